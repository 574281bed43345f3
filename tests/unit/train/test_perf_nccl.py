# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""NCCL's own times in the job's windows (train_collective_timing): the sampler asks each rank's flight recorder for a
dump through its pipe once a window and reads what its collectives took; the supervisor names the node the others wait
for and classes a job communication-bound from them, with the busbw NCCL reached against the ladder's. The dumps are
the GPU machine's (tests/fixtures/gpu/perf/h100x1-ddp-timed-rank*.flight-recorder: two DDP ranks over NCCL's sockets,
64 MiB all-reduces at 1.68 GB/s busbw)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from ansible_collections.trainops.cluster.plugins.plugin_utils import job_bandwidth, jobs
from conftest import recorded_windows
from trainops_job import judge, perf

# Run ids of this test process alone: the sampler reads every process of the machine, and another suite's ranks (a
# second checkout's tests running beside) must not count as this one's.
RUN = "r1-%d" % os.getpid()

DUMP = Path(__file__).resolve().parents[2] / "fixtures" / "gpu" / "perf" / "h100x1-ddp-timed-rank1.flight-recorder"


def test_the_sampler_asks_each_rank_for_a_dump_once_a_window_and_reads_its_collectives(tmp_path):
    """A rank (a real process with the runner's variables) whose watchdog, played by a thread, answers its pipe with the
    recorded dump, as torch does: the window carries the collectives' times and their share of the time since the last."""
    env = dict(os.environ, TRAINOPS_RUN_ID=RUN, TRAINOPS_NODE="node1", RANK="3", LOCAL_RANK="0", TORCH_NCCL_ENABLE_TIMING="1",
               TORCH_NCCL_DEBUG_INFO_PIPE_FILE="%s/p-rank" % tmp_path, TORCH_FR_DUMP_TEMP_FILE="%s/d-rank" % tmp_path)
    os.mkfifo("%s/p-rank3.pipe" % tmp_path)
    reader = os.open("%s/p-rank3.pipe" % tmp_path, os.O_RDONLY | os.O_NONBLOCK)
    asked = []

    def watchdog():
        for dummy in range(200):
            try:
                if os.read(reader, 16):
                    asked.append(time.time())
                    (tmp_path / "d-rank3").write_bytes(DUMP.read_bytes())
            except BlockingIOError:
                pass
            time.sleep(0.02)

    rank = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(0.05)"], env=env)
    thread = threading.Thread(target=watchdog)
    thread.start()
    clock = [1000.0]
    try:
        sampler = perf.Sampler(RUN, "node1", clock=lambda: clock[0])
        time.sleep(0.3)
        sampler.sample()  # the rank is found: not asked before TIMING_EVERY
        clock[0] += perf.TIMING_EVERY
        sampler.sample()  # asked
        deadline = time.time() + 3
        while not asked and time.time() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)
        clock[0] += 1.0
        sampler.sample()  # the dump read
        window = sampler.window()
    finally:
        rank.kill()
        rank.wait()
        thread.join()
        os.close(reader)
    assert len(asked) == 1
    times = window["collectives"]["3"]
    assert times["calls"] == 383 and times["sizes"][0]["op"] == "all_reduce" and times["sizes"][0]["busbw_gbps"] == 1.6809
    # 15.2 s of collectives read over the 11 s since the rank was found: the first dump holds the rank's start as well.
    assert times["seconds"] == 11.0 and times["share"] == 1.0
    assert sampler.timing[3]["last"] == 382
    # The next window carries the same dump (none was read in it), and the one after that none.
    assert sampler.window()["collectives"]["3"]["calls"] == 383
    clock[0] += perf.WINDOW + perf.TIMING_EVERY + 1
    assert "collectives" not in sampler.window()


def node(share: float, busbw: float = 1.68, at: float = 100.0) -> dict:
    """A GPU node's window: its ranks spin in CUDA (busy, stacks in compute) and spend `share` in NCCL's collectives."""
    size = {"op": "all_reduce", "bytes": 67125248, "calls": 100, "ms": 39.9, "total_ms": 1000.0 * share * 10, "busbw_gbps": busbw, "group": 4}
    ranks = {str(i): {"busy": 1.0, "cpu": 1.0, "places": {"compute": 10}} for i in range(2)}
    return {"at": at, "seconds": 10.0, "attempt": 0, "first": False, "ranks": ranks,
            "collectives": {str(i): {"calls": 100, "ms": 10000.0 * share, "seconds": 10.0, "share": share, "sizes": [size]} for i in range(2)}}


def test_the_node_whose_ranks_spend_least_in_collectives_is_the_straggler():
    perfs = {"node1": node(0.58), "node2": node(0.05), "node3": node(0.61)}
    found = judge.bottleneck(perfs, 105.0, 0)
    assert found["kind"] == "straggler" and found["node"] == "node2", found
    assert found["text"].startswith("straggler: node2's ranks spend 5 % of the time in NCCL's collectives, the other nodes' 60 %"), found
    # Every node alike: nobody waits for anyone.
    assert judge.nccl_straggler({"node1": node(0.58), "node2": node(0.5)}, 105.0, 0) is None
    # Waiting little everywhere: not a straggler, whatever the gap.
    assert judge.nccl_straggler({"node1": node(0.3), "node2": node(0.02), "node3": node(0.35)}, 105.0, 0) is None


def test_every_node_in_collectives_is_communication_bound_with_nccls_busbw_against_the_ladder():
    perfs = {"node1": node(0.7, busbw=1.5), "node2": node(0.72, busbw=1.68)}
    found = judge.bottleneck(perfs, 105.0, 0)
    assert found["kind"] == "communication-bound" and found["node"] is None, found
    assert found["nccl"]["busbw_gbps"] == 1.68 and found["nccl"]["node"] == "node2"
    assert found["text"].startswith("communication-bound: every node's ranks wait in collectives 70-72 % of the time "
                                    "(node1 70 %, node2 72 %; NCCL's flight recorder)"), found["text"]
    assert "; NCCL's all_reduce of 64 MiB: 39.9 ms a call, 1.68 GB/s busbw (node2's rank 0, the fastest)" in found["text"]
    rung = {"label": "NCCL all_reduce_perf, all nodes", "busbw_gbps": 1.86}
    assert job_bandwidth.against_ladder(found, rung) == (
        "; against the ladder (NCCL all_reduce_perf, all nodes: 1.86 GB/s busbw on these nodes, at its largest size) NCCL's "
        "all_reduce of 67.1 MB reached 1.68 GB/s, 90 %: the job uses the network as fast as the ladder did: the network is the "
        "limit (send less per step: gradient accumulation; or a faster network)")
    ladder = [{"rung": "all", "label": "NCCL all_reduce_perf, all nodes", "runs": [{"hosts": ["node2", "node1"], "busbw_gbps": 1.86}]}]
    held = jobs._held_to_ladder(found, ladder, {})
    assert held["text"].endswith("90 %: the job uses the network as fast as the ladder did: the network is the limit (send "
                                 "less per step: gradient accumulation; or a faster network)")
    # A third node without timings: not every node's figure, not judged from them.
    perfs["node3"] = dict(node(0.7), collectives={})
    assert judge.bottleneck(perfs, 105.0, 0) is None


def test_the_runners_own_window_recorded_on_the_gpu_machine_gives_the_jobs_busbw():
    """tests/fixtures/gpu/perf/h100x1-job-perf-collectives.json: the runner (tests/device/bin/device-job-signals) asked
    both ranks for their dumps and read them; one node alone is no straggler and no class."""
    recorded = json.loads((DUMP.parent / "h100x1-job-perf-collectives.json").read_text())
    assert sorted(recorded["collectives"]) == ["0", "1"]
    found = judge.nccl_busbw({"node1": recorded}, ["node1"])
    assert (found["op"], found["bytes"], found["ms"], found["busbw_gbps"]) == ("all_reduce", 67125248, 39.931, 1.681)
    window = dict(recorded, attempt=0, first=False, at=100.0)
    assert judge.nccl_straggler({"node1": window}, 105.0, 0) is None


NODES_JOB = DUMP.parents[1] / "h100x1-nodes-job"


def nodes_windows(case: str) -> tuple:
    """The four namespace nodes' last windows of tests/fixtures/gpu/h100x1-nodes-job/<case> and a moment just after."""
    return recorded_windows(NODES_JOB / case)


def test_a_straggler_recorded_on_the_gpu_machine_is_named_from_nccls_times():
    """gpu2's rank multiplied 40 times as many matrices a step as the others (tests/device/bin/device-job-busbw): its
    ranks spend the least time in the all-reduce, the others wait there for it."""
    perfs, now = nodes_windows("straggler")
    assert {node: judge._nccl_shares(perfs, [node])[node] for node in perfs} == {"gpu1": 1.0, "gpu2": 0.2, "gpu3": 0.921, "gpu4": 0.916}
    found = judge.bottleneck(perfs, now, 0)
    assert found["kind"] == "straggler" and found["node"] == "gpu2", found
    assert found["text"].startswith("straggler: gpu2's ranks spend 20 % of the time in NCCL's collectives, the other nodes' 92 %")
    # Every rank's stack reads compute (a GPU rank spins in CUDA's calls): the stacks alone name nobody.
    assert {tuple(r["places"]) for w in perfs.values() for r in w["ranks"].values()} == {("compute",)}


def test_the_jobs_busbw_recorded_on_the_gpu_machine_is_within_10_percent_of_nccl_tests_on_the_same_nodes():
    """The sound job (a 64 MiB all-reduce a step on four namespace nodes over NCCL's sockets) against the ladder's
    all_reduce_perf on the same four nodes at its largest size, 64 MiB (verify_max_bytes=64M): issue 36's measure."""
    perfs, now = nodes_windows("sound")
    ladder = json.loads((NODES_JOB / "verify.json").read_text())
    found = judge.bottleneck(perfs, now, 0)
    assert found["kind"] == "communication-bound" and found["node"] is None, found
    assert (found["nccl"]["op"], found["nccl"]["bytes"], found["nccl"]["busbw_gbps"]) == ("all_reduce", 67125248, 0.7335)
    rung = job_bandwidth.ladder_rung(ladder, list(perfs))
    assert rung == {"label": "all nodes", "busbw_gbps": 0.765629}
    assert abs(found["nccl"]["busbw_gbps"] / rung["busbw_gbps"] - 1) <= 0.10
    held = jobs._held_to_ladder(found, ladder, {})
    assert held["text"].endswith("against the ladder (all nodes: 0.766 GB/s busbw on these nodes, at its largest size) NCCL's "
                                 "all_reduce of 67.1 MB reached 0.734 GB/s, 96 %: the job uses the network as fast as the "
                                 "ladder did: the network is the limit (send less per step: gradient accumulation; or a "
                                 "faster network)"), held["text"]
    # Judged: every node's window holds NCCL's times (a GPU job is not judged on its stacks alone).
    assert judge.judged(perfs, now, 0)
    without = {node: dict(window, collectives={}) for node, window in perfs.items()}
    assert not judge.judged(without, now, 0) and judge.bottleneck(without, now, 0) is None


def test_scale_recorded_on_the_gpu_machine_names_each_size_and_does_not_call_a_poor_size_healthy():
    """train_action=scale on the four namespace nodes (tests/fixtures/gpu/h100x1-nodes-job/scale-job.json): one rank
    alone on the GPU, then 2 and 4 nodes' ranks time-sharing it and all-reducing over sockets."""
    events = json.loads((NODES_JOB / "scale-job.json").read_text())["events"]
    rows = jobs.scale_table(events)
    assert [(r["world"], r["speedup"], r["efficiency"]) for r in rows] == [(1, 1.0, 1.0), (2, 0.16, 0.082), (4, 0.1, 0.026)]
    assert [jobs.bound_word(r["bound"]) for r in rows] == ["healthy", "unexplained", "communication-bound"]
    # The supervisor judged 2 nodes on both nodes' NCCL times and no class reached its bound: not healthy at 8 %.
    assert [e["bound"]["kind"] for e in events if e["event"] == "scale"] == ["healthy", "healthy", "communication-bound"]
    assert rows[1]["bound"]["text"].startswith("unexplained: no class reached its bound (input, checkpoints, collectives, a "
                                               "straggler), yet each node added 8 % of the smallest size's throughput")
    assert jobs.scale_text(rows) == "scaled: 2 nodes 0.16x 1 node (8 %, unexplained), 4 nodes 0.1x (3 %, communication-bound)"
