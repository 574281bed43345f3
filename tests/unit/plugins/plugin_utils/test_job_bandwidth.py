# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A communication-bound job against the ladder's busbw on the same nodes (plugin_utils/job_bandwidth.py), from molecule
train's records: the slowed-link job's slow event (tests/fixtures/reports/train/slow-link-event.json: node2's interface
held to 40 Mbit/s, every node sending 4.6-4.9 MB/s) and the ladder's report of that cluster (verify.json there: the CPU
rung over MPI, 0.109 GB/s busbw)."""

from __future__ import annotations

import json
from pathlib import Path

from ansible_collections.trainops.cluster.plugins.plugin_utils import job_bandwidth, jobs

TRAIN = Path(__file__).resolve().parents[3] / "fixtures" / "reports" / "train"
SLOW = json.loads((TRAIN / "slow-link-event.json").read_text())
LADDER = json.loads((TRAIN / "verify.json").read_text())
NODES = ["node1", "node2", "node3"]


def test_a_link_slowed_below_the_ladders_busbw_is_called_slower_than_verified():
    rung = job_bandwidth.ladder_rung(LADDER, NODES)
    assert rung == {"label": "CPU all-reduce over MPI, all nodes", "busbw_gbps": 0.109}
    assert job_bandwidth.against_ladder(SLOW, rung) == (
        "; against the ladder (CPU all-reduce over MPI, all nodes: 0.109 GB/s busbw on these nodes) the job sends at most "
        "4.9 MB/s a node in collectives, 4 %: the network is slower now than when it was verified (a rate limit, a neighbour's traffic, "
        "a link renegotiated): verify.yml measures it again")


def test_a_job_near_the_ladders_busbw_has_reached_the_networks_limit():
    fast = dict(SLOW, net={n: dict(net, tx_mbps=80.0) for n, net in SLOW["net"].items()})
    assert job_bandwidth.against_ladder(fast, job_bandwidth.ladder_rung(LADDER, NODES)).endswith(
        "80.0 MB/s a node in collectives, 73 %: the job uses the network as fast as the ladder did: the network is the limit (send less "
        "per step: gradient accumulation; or a faster network)")


def test_a_job_that_sends_little_with_nothing_queued_is_said_to_wait_on_its_ranks_not_the_network():
    # The slowed link's figures with no node holding bytes back (its queue 0.1-200 KiB, under QUEUED_KB): the job sends
    # 4.9 MB/s because it has little to send, not because the network holds it (the field report's staged job).
    idle = dict(SLOW, node=None, queued={"node1": 0.1, "node2": 200.0, "node3": 0.0})
    said = job_bandwidth.against_ladder(idle, job_bandwidth.ladder_rung(LADDER, NODES))
    assert said.endswith("4.9 MB/s a node in collectives, 4 %: nothing waits to be sent on any node (at most 200 KiB): the ranks wait "
                         "on each other in small collectives, not on the network (each all-reduce's latency, or ranks reaching it at "
                         "different times): fewer, larger all-reduces (gradient accumulation, DDP's bucket_cap_mb) wait less"), said
    # Where the queues are not known (an older node program's windows), the ladder's comparison alone.
    assert "the network is slower now" in job_bandwidth.against_ladder(dict(SLOW, queued={}), job_bandwidth.ladder_rung(LADDER, NODES))


def test_the_bytes_count_while_the_ranks_are_in_collectives():
    # 48 MB/s over a window that node spent 60 % in collectives: 80 MB/s while it sent.
    part = dict(SLOW, net={n: dict(net, tx_mbps=48.0) for n, net in SLOW["net"].items()}, shares={"node1": 0.6, "node2": 0.9, "node3": 1.0})
    assert "at most 80.0 MB/s a node in collectives, 73 %" in job_bandwidth.against_ladder(part, job_bandwidth.ladder_rung(LADDER, NODES))


def test_nothing_is_said_without_a_ladder_run_on_these_nodes_or_another_class():
    assert job_bandwidth.ladder_rung(LADDER, NODES[:2]) is None and job_bandwidth.ladder_rung(None, NODES) is None
    # NCCL's all-node rung comes first where it ran.
    nccl = [{"rung": "all", "label": "all nodes", "runs": [{"hosts": NODES, "busbw_gbps": 42.0}]}] + LADDER
    assert job_bandwidth.ladder_rung(nccl, NODES)["busbw_gbps"] == 42.0
    assert job_bandwidth.against_ladder(SLOW, None) == ""
    assert job_bandwidth.against_ladder(dict(SLOW, kind="input-bound"), job_bandwidth.ladder_rung(LADDER, NODES)) == ""


def test_status_ends_the_slow_verdict_with_it():
    reports = {n: {"node": n, "run_id": SLOW["run_id"], "now": 100.0, "running": True, "state": "running", "log": [], "progress": None}
               for n in NODES}
    reports["node1"].update(job={"run_id": SLOW["run_id"], "events": [SLOW]}, supervisor={"slow": SLOW})
    status = jobs.status(NODES, reports, {n: n for n in NODES}, ladder=LADDER)
    assert status["verdict"].startswith("running, slow: communication-bound: every node's ranks wait")
    assert status["verdict"].endswith("4 %: the network is slower now than when it was verified (a rate limit, a neighbour's "
                                      "traffic, a link renegotiated): verify.yml measures it again"), status["verdict"]
    assert jobs.status(NODES, reports, {n: n for n in NODES})["verdict"].endswith("(eth1)")


def test_no_comparison_where_nccl_went_over_rdma_or_its_choice_is_unknown():
    # RDMA's bytes pass no interface counter: the socket traffic alone would read as a network far slower than verified.
    def verdict(nccl, gpu=None):
        reports = {n: {"node": n, "run_id": SLOW["run_id"], "now": 100.0, "running": True, "state": "running", "log": [],
                       "progress": {"step": 3, "points": [], "nccl": nccl}, "perf": [{"at": 90.0, "busy": 1.0, "gpu": gpu}]} for n in NODES}
        reports["node1"].update(job={"run_id": SLOW["run_id"], "events": [SLOW]}, supervisor={"slow": SLOW})
        return jobs.status(NODES, reports, {n: n for n in NODES}, ladder=LADDER)["verdict"]
    assert verdict({"transports": ["NET/IB", "P2P/CUMEM"]}).endswith("(eth1)")  # no RDMA counters read: nothing said
    assert verdict({"transports": ["NET/IBext_v8"], "networks": ["IBext_v8"]}).endswith("(eth1)")  # a net plugin's RDMA
    assert verdict(None, gpu=97.0).endswith("(eth1)")  # GPUs, NCCL's choice not logged (train_nccl_debug null)
    assert "the network is slower now" in verdict({"transports": ["NET/Socket"]}, gpu=97.0)
    assert "the network is slower now" in verdict(None)  # no GPUs: Gloo over TCP


def test_over_infiniband_the_rdma_ports_bytes_are_held_to_the_ladder():
    """NCCL over NET/IB: the nodes' RDMA port counters (perf.rdma_bytes) are what the job sends, against NCCL's
    all-node rung."""
    rdma = {n: {"interface": "RDMA ports", "rx_mbps": 20000.0, "tx_mbps": 21000.0} for n in NODES}
    slow = dict(SLOW, rdma=rdma)
    ladder = [{"rung": "all", "label": "all nodes", "runs": [{"hosts": NODES, "busbw_gbps": 45.0}]}]
    reports = {n: {"node": n, "run_id": SLOW["run_id"], "now": 100.0, "running": True, "state": "running", "log": [],
                   "progress": {"step": 3, "points": [], "nccl": {"transports": ["NET/IB", "P2P/CUMEM"]}},
                   "perf": [{"at": 90.0, "gpu": 97.0}]} for n in NODES}
    reports["node1"].update(job={"run_id": SLOW["run_id"], "events": [slow]}, supervisor={"slow": slow})
    verdict = jobs.status(NODES, reports, {n: n for n in NODES}, ladder=ladder)["verdict"]
    assert verdict.endswith("; against the ladder (all nodes: 45 GB/s busbw on these nodes) the job sends at most 21000.0 MB/s "
                            "a node in collectives, 47 %: the network is slower now than when it was verified (a rate limit, "
                            "a neighbour's traffic, a link renegotiated): verify.yml measures it again"), verdict
