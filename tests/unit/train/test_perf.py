# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Where each rank's time goes (trainops_job.perf): real processes sampled as the runner samples a node's ranks, and
the straggler named from every node's windows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from trainops_job import perf

BUSY = "while True: pass"
WAITS = "import time\nwhile True: time.sleep(0.05)"


def rank(code: str, number: int, node: str = "node1", run_id: str = "r1") -> subprocess.Popen:
    env = dict(os.environ, TRAINOPS_RUN_ID=run_id, TRAINOPS_NODE=node, RANK=str(number), LOCAL_RANK=str(number))
    return subprocess.Popen([sys.executable, "-c", code], env=env)


def test_a_rank_that_computes_is_busy_and_one_that_waits_is_not():
    ranks = [rank(BUSY, 0), rank(WAITS, 1), rank(BUSY, 2, node="node2"), rank(BUSY, 3, run_id="r2")]
    try:
        sampler = perf.Sampler("r1", "node1")
        time.sleep(0.3)
        for dummy in range(20):
            sampler.sample()
            time.sleep(0.1)
        window = sampler.window()
    finally:
        for process in ranks:
            process.kill()
            process.wait()
    # This node's ranks of this run alone: another node's (namespace nodes share /proc) and another run's are not.
    assert sorted(window["ranks"]) == ["0", "1"]
    assert window["ranks"]["0"]["busy"] >= 0.8 and window["ranks"]["1"]["busy"] <= 0.3, window
    assert window["ranks"]["0"]["cpu"] > window["ranks"]["1"]["cpu"], window
    assert 1.5 < window["seconds"] < 10 and not sampler.samples


def window(busy: list, at: float = 100.0, attempt: int = 0) -> dict:
    return {"at": at, "seconds": 10.0, "attempt": attempt, "ranks": {str(i): {"busy": b, "cpu": b} for i, b in enumerate(busy)}}


def test_the_node_the_others_wait_for_is_named_with_its_figures():
    # node3 at a fifth of a core: its rank busy the whole step, the others waiting for it at the all-reduce.
    perfs = {"node1": window([0.2]), "node2": window([0.25]), "node3": window([0.97])}
    found = perf.straggler(perfs, 105.0, 0)
    assert found == {"node": "node3", "busy": 0.97, "others": 0.225, "ratio": 4.31, "text": (
        "straggler: node3's ranks are busy 97 % of the time, the other nodes' 22 % (they wait for it); it computes at least "
        "4.3x longer per step")}


def test_no_straggler_when_every_node_is_as_busy_or_the_figures_are_stale():
    assert perf.straggler({"node1": window([0.9, 0.95]), "node2": window([0.92]), "node3": window([0.97])}, 105.0, 0) is None
    assert perf.straggler({"node1": window([0.3]), "node2": window([0.35]), "node3": window([0.6])}, 105.0, 0) is None
    slow = {"node1": window([0.2]), "node2": window([0.25]), "node3": window([0.97])}
    # Windows older than three, or of an earlier attempt, are not judged; nor is one node alone.
    assert perf.straggler(slow, 135.5, 0) is None and perf.straggler(slow, 105.0, 1) is None
    assert perf.straggler({"node1": window([0.97])}, 105.0, 0) is None


def test_the_runner_writes_each_windows_shares_to_the_nodes_perf_record(cluster):
    [node] = cluster("RANK=0 LOCAL_RANK=0 exec %s -c 'while True: pass'" % sys.executable)
    assert node.run("start").returncode == 0
    path = node.file("perf")
    deadline = time.monotonic() + 30
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    record = json.loads(path.read_text())
    assert (record["run_id"], record["node"], record["attempt"]) == (node.conf["run_id"], "node1", 0)
    assert list(record["ranks"]) == ["0"] and record["ranks"]["0"]["busy"] >= 0.8 and record["seconds"] >= perf.WINDOW, record
    assert node.report()["records"]["node1.perf.json"] == "record"
