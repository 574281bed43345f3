# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A node that reads the shared storage slower than its peers (plugin_utils/storage_peers.py), and the doctor's finding
for it: fake figures, the NFS server (which reads its own disk, several times faster) left out."""

from __future__ import annotations

from ansible_collections.trainops.cluster.plugins.plugin_utils import doctor, storage_peers


def read(mbps: float, mib: int = 256) -> dict:
    return {"mbps": mbps, "seconds": round(mib * 2 ** 20 / mbps / 1e6, 3)}


def test_a_node_more_than_the_fraction_below_its_peers_median_is_named_with_the_figures():
    figures = {"node1": read(2400.0), "node2": read(110.0), "node3": read(41.0), "node4": read(108.0), "node5": None}
    found = storage_peers.slower_than_peers(figures, 0.1, "/mnt/shared", server="node1")
    assert list(found) == ["node3"]
    assert found["node3"] == (
        "node3 reads /mnt/shared at 41.0 MB/s, 38 % of its peers' median 109.0 MB/s (node2, node4, every node reading at once; "
        "the NFS server node1 left out: it reads its own disk): its way to the storage is slower than theirs, and its data "
        "loaders wait (validate_storage_outlier_fraction 0.1); check its link to the storage (ethtool, its switch port) and "
        "its mount options against its peers' (nfsstat -m)")
    # With the server in the comparison its local reads make healthy clients look slow next to it.
    three = {"node1": read(900.0), "node2": read(100.0), "node3": read(95.0)}
    assert sorted(storage_peers.slower_than_peers(three, 0.1, "/mnt/shared")) == ["node2", "node3"]
    assert storage_peers.slower_than_peers(three, 0.1, "/mnt/shared", server="node1") == {}


def test_within_the_fraction_or_with_too_few_peers_nothing_is_named():
    assert storage_peers.slower_than_peers({"node1": read(100.0), "node2": read(92.0), "node3": read(95.0)}, 0.1, "/s") == {}
    # Three nodes, one of them the server: each client has one peer only.
    assert storage_peers.slower_than_peers({"node1": read(900.0), "node2": read(100.0), "node3": read(20.0)}, 0.1, "/s", server="node1") == {}
    # The facts scenario's reads: 16 MiB in 0.02 s, figures 684-913 MB/s apart in one run: their start, not judged.
    facts = {"node1": {"mbps": 740.0, "seconds": 0.023}, "node2": {"mbps": 684.8, "seconds": 0.025}, "node3": {"mbps": 913.5, "seconds": 0.018}}
    assert storage_peers.slower_than_peers(facts, 0.1, "/s") == {}


def test_the_doctor_warns_about_the_slower_node_beside_its_other_findings():
    state = {n: {"expect_fstab": True, "present": True, "expect_mounted": True, "mounted": True, "writable": True,
                 "sees": True, "free_bytes": 2 ** 40, "read_mbps": mbps, "read_seconds": read(mbps)["seconds"], "source": "node1:/srv/shared"}
             for n, mbps in (("node1", 2400.0), ("node2", 110.0), ("node3", 41.0), ("node4", 108.0))}
    found = doctor.storage(sorted(state), state, "/mnt/shared", 2 ** 30, outlier_fraction=0.1, server="node1")
    warned = [f for f in found if f["status"] == "warn"]
    assert [f["node"] for f in warned] == ["node3"] and warned[0]["detail"].startswith("node3 reads /mnt/shared at 41.0 MB/s")
    assert all(f["status"] == "ok" for f in doctor.storage(sorted(state), state, "/mnt/shared", 2 ** 30))
