# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A node that reads the shared storage slower than its peers (the read throughput check, every node reading one test
file at once): it passes validate_storage_min_read_mbps and still starves its data loaders, and every job waits for it.
The NFS server the cluster runs reads its own disk, not the network: it is left out of the comparison.

Controller side: a pure function, used by roles storage_check (a warning) and doctor (a finding), filter
storage_slower_than_peers.
"""

from __future__ import annotations

import statistics

# Peers a node's figure is compared with, at least: with fewer the median is one other node's figure.
MIN_PEERS = 2
# A node's figure is judged only where its read lasted this long: a shorter one measures its start (the first request,
# the server's cache) more than the throughput. The facts scenario's 16 MiB reads took 0.02 s, and the three nodes'
# figures of one run lay 684-913 MB/s apart (188-1235 between runs). A slow node's read is a long one.
MIN_SECONDS = 1.0


def slower_than_peers(reads: dict, fraction: float, path: str, server: str | None = None) -> dict:
    """{node: warning} for each node whose read (reads: {node: {mbps, seconds}, or None where it did not read}) lasted
    at least MIN_SECONDS and reached more than `fraction` less than the median of the other nodes' MB/s (at least
    MIN_PEERS of them), `server` (the NFS server node, which reads its own disk) left out."""
    judged = {node: read for node, read in reads.items() if read and read.get("mbps") is not None and node != server}
    out: dict[str, str] = {}
    for node, read in sorted(judged.items()):
        peers = [other for other in judged if other != node]
        mbps = float(read["mbps"])
        if len(peers) < MIN_PEERS or float(read.get("seconds") or 0) < MIN_SECONDS:
            continue
        median = statistics.median(float(judged[other]["mbps"]) for other in peers)
        if mbps < (1 - fraction) * median:
            left_out = "; the NFS server %s left out: it reads its own disk" % server if server in reads else ""
            out[node] = ("%s reads %s at %.1f MB/s, %d %% of its peers' median %.1f MB/s (%s, every node reading at once%s): "
                         "its way to the storage is slower than theirs, and its data loaders wait (validate_storage_outlier_fraction "
                         "%s); check its link to the storage (ethtool, its switch port) and its mount options against its "
                         "peers' (nfsstat -m)" % (node, path, mbps, round(100 * mbps / median), median, ", ".join(sorted(peers)),
                                                  left_out, fraction))
    return out
