# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The node program's runner with fake commands and real processes, no containers: a job's end recorded, fail fast, a
stop that lets the command end, a restart asked by the supervisor, a sweep, and the node's report."""

from __future__ import annotations

import json
import time
from pathlib import Path

from conftest import wait_for
from trainops_job import records

# A trainer that saves on SIGTERM: it takes a second to write its file, then exits 0.
SAVES_ON_SIGTERM = """python3 -c '
import os, signal, sys, time
def save(*a):
    time.sleep(1)
    open(os.environ["TRAINOPS_CHECKPOINT_DIR"] + "/saved-on-sigterm", "w").write("ok")
    print("saved", flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, save)
for step in range(1, 100000):
    print("step %d loss 0.5" % step, flush=True)
    time.sleep(0.2)
'"""


def test_a_command_that_ends_is_recorded_with_its_log_and_progress(cluster):
    [node] = cluster("echo starting; for i in 1 2 3; do echo \"step $i loss 0.$i\"; done; exit 3")
    assert node.run("start").returncode == 0
    record = wait_for(node.exit_record, 20, "the exit record")
    assert record["rc"] == 3 and record["stopped_by"] is None and record["run_id"] == node.conf["run_id"]
    report = node.report()
    assert report["state"] == "failed: exited 3" and report["failed"] and not report["running"]
    assert report["log"][:2] == ["starting", "step 1 loss 0.1"]
    assert [p[1:] for p in report["progress"]["points"]] == [[1, 0.1], [2, 0.2], [3, 0.3]]
    assert report["job"]["run_id"] == node.conf["run_id"] and report["job"]["events"] == []
    assert {"job.json", "node1.log", "node1.exit", "node1.progress.json"} <= set(report["records"])


def test_a_peer_that_failed_on_its_own_ends_the_others_parts(cluster):
    first, second = cluster("if [ $TRAINOPS_NODE = node2 ]; then sleep 1; exit 7; fi; exec sleep 60", nodes=2)
    for node in (first, second):
        assert node.run("start").returncode == 0
    start = time.monotonic()
    record = wait_for(first.exit_record, 30, "node1's exit record")
    assert record["stopped_by"] == "node2" and first.report()["state"] == "stopped: node2 failed"
    assert second.exit_record()["rc"] == 7 and second.report()["failed"]
    print("node1 stopped %.1f s after the start" % (time.monotonic() - start))


def test_a_stop_lets_the_command_end_and_save(cluster):
    [node] = cluster(SAVES_ON_SIGTERM)
    assert node.run("start").returncode == 0
    wait_for(lambda: (node.report()["progress"] or {}).get("step", 0) >= 3, 20, "three steps")
    assert node.report()["state"] == "running"
    assert node.run("stopping").returncode == 0
    stopped = node.run("stop")
    assert json.loads(stopped.stdout) == {"ended": [], "left": [], "stopped": True, "running": False}, stopped.stderr
    assert (Path(node.conf["checkpoint_dir"]) / "saved-on-sigterm").read_text() == "ok"
    record = node.exit_record()
    assert record["rc"] == 0 and record["stopped_by"] == records.USER_STOP
    assert node.report()["state"] == "stopped" and node.report()["log"][-1] == "saved"


def test_the_supervisors_restart_starts_the_command_again_and_its_stop_ends_it(cluster):
    [node] = cluster('echo "attempt $TRAINOPS_ATTEMPT"; exec sleep 60')
    assert node.run("start").returncode == 0
    wait_for(lambda: "attempt 0" in node.report()["log"], 10, "the first attempt")
    control = Path(node.conf["job_dir"]) / records.CONTROL_REQUEST
    control.write_text(json.dumps({"run_id": node.conf["run_id"], "action": "restart", "id": 1}))
    wait_for(lambda: "attempt 1" in node.report()["log"], 15, "the restart")
    assert "trainops-job: restart 1 after a stall (train_on_stall: restart)" in node.report()["log"]
    control.write_text(json.dumps({"run_id": node.conf["run_id"], "action": "stop", "id": 2}))
    record = wait_for(node.exit_record, 15, "the stop")
    assert record["stopped_by"] == records.STALL_STOP and node.report()["state"] == "stopped: stalled"


def test_a_sweep_ends_what_is_left_of_the_job(cluster):
    [node] = cluster("sleep 60 & sleep 60")
    assert node.run("start").returncode == 0
    wait_for(lambda: node.report()["running"], 10, "the runner")
    time.sleep(0.5)
    swept = json.loads(node.run("sweep").stdout)
    assert len(swept["ended"]) >= 2 and swept["left"] == []
    wait_for(node.exit_record, 10, "the exit record")


def test_a_node_without_the_job_reports_it_not_started(cluster):
    [node] = cluster("true")
    node.conf_dir.joinpath("j1.json").unlink()
    report = node.report()
    assert report["state"] == records.NOT_STARTED and report["run_id"] is None


def test_a_bad_job_name_is_refused(cluster):
    [node] = cluster("true")
    node.conf["job"] = "../etc"
    run = node.run("report")
    assert run.returncode == 2 and "bad job name ../etc" in run.stderr
