# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What a communication-bound job sends against what the ladder measured on the same nodes (verify.json): a job far
below the ladder's busbw has a network slower now than when it was verified; one near it has reached the network's
limit. In a ring all-reduce each rank sends about busbw bytes a second while the collective runs (nccl-tests' busbw is
that per-rank figure: algbw x 2(n-1)/n), so a node's bytes out on the training interface compare with it directly."""

from __future__ import annotations

from ansible_collections.trainops.cluster.plugins.module_utils._perf_classes import COMMUNICATION, QUEUED_KB

# Below this share of the ladder's busbw the job's network is called slower than verified.
SLOWER = 0.5


def ladder_rung(steps: list | None, nodes: list) -> dict | None:
    """The ladder's run across exactly these nodes, with its busbw at the largest size: {label, busbw_gbps}, NCCL's
    all-node rung where it ran, else the CPU rung (MPI, for a Gloo job); None where neither did."""
    for rung in ("all", "cpu"):
        step = next((s for s in steps or [] if isinstance(s, dict) and s.get("rung") == rung), None) or {}
        for run in step.get("runs") or []:
            if sorted(run.get("hosts") or []) == sorted(nodes) and run.get("busbw_gbps"):
                return {"label": step.get("label") or rung, "busbw_gbps": float(run["busbw_gbps"])}
    return None


def against_ladder(slow: dict | None, rung: dict | None) -> str:
    """The words a communication-bound verdict ends with: the most any node sends while its ranks are in collectives
    (MB/s over the runners' window divided by the window's share in collectives: the rest of the window sends little)
    against the ladder's busbw, or where the job times NCCL's collectives the busbw they reached; "" where either is
    missing."""
    nets, nccl = (slow or {}).get("net") or {}, (slow or {}).get("nccl")
    if slow is None or slow.get("kind") != COMMUNICATION.name or not (nets or nccl) or not rung:
        return ""
    if nccl:
        # NCCL's own times (train_collective_timing): the busbw its collective reached, nccl-tests' figure itself.
        share = nccl["busbw_gbps"] / rung["busbw_gbps"]
        return "; against the ladder (%s: %.3g GB/s busbw on these nodes, at its largest size) NCCL's %s of %.3g MB reached %.3g GB/s, %d %%: %s" % (
            rung["label"], rung["busbw_gbps"], nccl["op"], nccl["bytes"] / 1e6, nccl["busbw_gbps"], round(100 * share), _meaning(share))
    shares = slow.get("shares") or {}
    sent = max(net["tx_mbps"] / (shares.get(node) or 1.0) for node, net in nets.items())
    share = sent / (rung["busbw_gbps"] * 1000.0)
    most = max((slow.get("queued") or {}).values(), default=None)
    if share < SLOWER and most is not None and most < QUEUED_KB:
        # Little sent and nothing waiting to be sent on any node: the network is not what they wait for.
        meaning = ("nothing waits to be sent on any node (at most %.0f KiB): the ranks wait on each other in small "
                   "collectives, not on the network (each all-reduce's latency, or ranks reaching it at different times): "
                   "fewer, larger all-reduces (gradient accumulation, DDP's bucket_cap_mb) wait less" % most)
    else:
        meaning = _meaning(share)
    return "; against the ladder (%s: %.3g GB/s busbw on these nodes) the job sends at most %.1f MB/s a node in collectives, %d %%: %s" % (
        rung["label"], rung["busbw_gbps"], sent, round(100 * share), meaning)


def _meaning(share: float) -> str:
    return ("the network is slower now than when it was verified (a rate limit, a neighbour's traffic, a link "
            "renegotiated): verify.yml measures it again" if share < SLOWER else
            "the job uses the network as fast as the ladder did: the network is the limit (send less per step: gradient "
            "accumulation; or a faster network)")
