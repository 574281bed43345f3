# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ranks that wait in code of the job's own (a data iterator of its own, as nanoGPT's get_batch): the frame they wait in
read from py-spy's dumps recorded on such loops (tests/fixtures/own-loader), the job judged wait-bound with that frame
from the windows the sampler makes of real waiting processes, and input-bound where the function is declared
(train_input_functions)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from trainops_job import judge, perf

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
RUN = "own-%d" % os.getpid()
COLLECTIVE = "stall/node1.diagnosis.json"  # rank 0 in DDP's backward: waiting in the gradients' all-reduce


def dump(name: str) -> list:
    return json.loads((FIXTURES / "own-loader" / ("%s.py-spy.json" % name)).read_text())


def in_backward() -> list:
    """A rank's recorded stack in DDP's backward (the stall's diagnosis on molecule train's node1)."""
    diagnosis = json.loads((FIXTURES / COLLECTIVE).read_text())
    return next(proc["stack"] for proc in diagnosis["processes"] if proc.get("stack"))


def test_the_frame_is_the_innermost_of_the_jobs_own_code():
    assert perf.own_frame(dump("sleep")) == "train.py:get_batch:6"
    # Inside the standard library (threading's wait under queue's get, a reader thread's hand-over): its caller.
    assert perf.own_frame(dump("queue")) == "stream.py:get_batch:18"
    assert perf.own_frame(None) is None and perf.own_frame([]) is None


def test_a_declared_input_function_is_a_wait_for_data():
    assert perf.place(dump("sleep"), "S") == "other" and perf.place(dump("queue"), "S") == "other"
    assert perf.place(dump("sleep"), "S", ("get_batch",)) == "input"
    assert perf.place(dump("queue"), "S", ("stream.py:get_batch",)) == "input"
    # Another file's get_batch is not this one's.
    assert perf.place(dump("queue"), "S", ("train.py:get_batch",)) == "other"


def windows(stacks: dict, inputs: tuple = ()) -> tuple:
    """Every node's second window (the first holds the start) as the sampler makes it: a real process asleep as the
    node's rank, its stack at each look the recorded one given for its node."""
    clock = [1000.0]
    ranks = {node: subprocess.Popen([sys.executable, "-c", "import time\ntime.sleep(60)"],
                                    env=dict(os.environ, TRAINOPS_RUN_ID=RUN, TRAINOPS_NODE=node, RANK=str(i), LOCAL_RANK="0"))
             for i, node in enumerate(sorted(stacks))}
    try:
        time.sleep(0.3)
        samplers = {node: perf.Sampler(RUN, node, clock=lambda: clock[0], stack=lambda pid, s=stack: (s, None), inputs=inputs)
                    for node, stack in stacks.items()}
        perfs = {}
        for node, sampler in samplers.items():
            clock[0] = 1000.0  # the nodes' windows end together
            for window in range(2):
                for dummy in range(20):
                    sampler.sample()
                    clock[0] += 0.5
                perfs[node] = sampler.window()
    finally:
        for process in ranks.values():
            process.kill()
            process.wait()
    return perfs, clock[0] + 1.0


def test_every_nodes_ranks_waiting_in_their_own_loader_are_wait_bound_with_its_frame():
    perfs, now = windows({node: dump("sleep") for node in ("node1", "node2", "node3")})
    assert perfs["node1"]["ranks"]["0"]["waits"] == {"train.py:get_batch:6": 10}, perfs["node1"]
    found = judge.bottleneck(perfs, now, 0)
    assert (found["kind"], found["node"], found["frame"]) == ("wait-bound", None, "train.py:get_batch:6"), found
    assert found["text"] == (
        "wait-bound: every node's ranks wait outside compute, collectives and checkpoint I/O 100 % of the time (node1 "
        "100 %, node2 100 %, node3 100 %); they wait in train.py:get_batch (line 6: 30 of 30 such looks); the input path? "
        "a loader of the job's own: give its function in train_input_functions to have its waits counted as input (and "
        "stage its data on each node's local disk), else look at what that frame waits for"), found["text"]
    # Declared (train_input_functions: [get_batch]), the same waits are the job's data.
    perfs, now = windows({node: dump("sleep") for node in ("node1", "node2", "node3")}, ("get_batch",))
    assert judge.bottleneck(perfs, now, 0)["kind"] == "input-bound"


def test_one_node_waiting_in_its_own_loader_is_named_while_the_others_wait_for_it():
    perfs, now = windows({"node1": in_backward(), "node2": in_backward(), "node3": dump("queue")})
    found = judge.bottleneck(perfs, now, 0)
    assert (found["kind"], found["node"], found["frame"]) == ("wait-bound", "node3", "stream.py:get_batch:18"), found
    assert found["text"].startswith("wait-bound: node3's ranks wait outside compute, collectives and checkpoint I/O 100 % "
                                    "of the time (node1 0 %, node2 0 %, node3 100 %); they wait in stream.py:get_batch"), found


def test_a_node_a_little_above_the_others_is_not_named():
    """After a stall, the windows of a job that sleeps between steps: node1's ranks 60 % in the script's own sleep, node2's
    50 %, node3's 30 % (CI at 671d518 named node1): no node stands out, none is named."""
    def window(other: int) -> dict:
        ranks = {"0": {"busy": 0.1, "cpu": 0.1, "places": {"other": other, "collective": 10 - other},
                       "waits": {"train_ddp.py:main:187": other}}}
        return {"at": 100.0, "seconds": 10.0, "attempt": 0, "ranks": ranks}
    perfs = {"node1": window(6), "node2": window(5), "node3": window(3)}
    assert judge.bottleneck(perfs, 105.0, 0) is None
    perfs["node1"] = window(10)
    perfs["node2"] = window(2)
    found = judge.bottleneck(perfs, 105.0, 0)
    assert (found["kind"], found["node"], found["frame"]) == ("wait-bound", "node1", "train_ddp.py:main:187"), found
