# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The report page's verdict and content, from the JSON reports of molecule runs (tests/fixtures/reports)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from ansible_collections.trainops.cluster.plugins.plugin_utils import cluster_page, jobs

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
REPORTS = FIXTURES / "reports"
NODES = ["node1", "node2", "node3"]
ADDRESSES = {"node1": "10.96.0.11", "node2": "10.96.0.12", "node3": "10.96.0.13"}
RECORD = {"name": "ddp1", "run_id": "trainops-job-ddp1-1"}
STEP = '[default0]:TRAINOPS {"event": "step", "loss": 0.0548, "step": %d}'


def load(run):
    reports = {key: None for key, _name, _title in cluster_page.STAGES}
    for key, name, _title in cluster_page.STAGES:
        path = REPORTS / run / name
        if path.exists():
            reports[key] = json.loads(path.read_text())
    return reports


def test_a_healthy_run_passes_and_names_the_stages_that_did_not_run():
    model = cluster_page.page(load("train"), {"verify": "2026-12-01 17:44:00 UTC"})
    assert model["verdict"] == {"status": "PASS", "stage": None, "culprit": None, "reason": None}
    assert {s["key"]: s["status"] for s in model["stages"]} == {
        "mesh": "PASS", "ports": "PASS", "drift": "PASS", "verify": "PASS", "torchrun": "PASS", "doctor": "NOT RUN"}
    assert model["stages"][3]["made"] == "2026-12-01 17:44:00 UTC" and model["stages"][5]["made"] is None
    assert model["ports"]["rows"][0][1] == {"text": "-", "cls": "self"} and model["ports"]["rows"][0][2]["cls"] == "ok"


def test_the_first_failing_stage_in_bring_up_order_is_the_verdict():
    reports = load("train")
    reports["ports"] = dict(reports["ports"], ok=False, failures=[{"from": "node3", "to": "node1", "via": 29500, "error": "timed out"}],
                            messages=["node3 -> node1 (29500): timed out"])
    reports["ports"]["rows"] = copy.deepcopy(reports["ports"]["rows"])
    reports["ports"]["rows"][2][1] = "29500: timed out"
    failed_rung = copy.deepcopy(reports["verify"])
    failed_rung[5].update(passed=False, verdict="FAIL")
    failed_rung[5]["runs"][0].update(passed=False, verdict="FAIL", reasons=["rank 2 on node3: NCCL WARN socket timeout"])
    reports["verify"] = failed_rung
    model = cluster_page.page(reports, {})
    assert model["verdict"] == {"status": "FAIL", "stage": "Ports between nodes", "culprit": "node3 -> node1",
                                "reason": "node3 -> node1 (29500): timed out"}
    verify = model["stages"][3]
    assert verify["status"] == "FAIL" and verify["culprit"] == "CPU all-reduce over MPI, all nodes on node1"
    assert verify["reason"] == "rank 2 on node3: NCCL WARN socket timeout"
    assert model["ports"]["rows"][2][1] == {"text": "29500: timed out", "cls": "fail"}


def test_a_rung_not_judged_is_said_and_never_passes():
    reports = load("train")
    reports["verify"] = copy.deepcopy(reports["verify"])
    reports["verify"][5].update(verdict="not judged")
    reports["verify"][5]["runs"][0].update(verdict="not judged", not_judged="no link limit known for node1's eth1")
    verdict = cluster_page.page(reports, {})["verdict"]
    assert verdict["status"] == "NOT JUDGED" and verdict["reason"] == "no link limit known for node1's eth1"


def test_drift_marks_the_odd_nodes_cells_and_fails_on_a_critical_key():
    reports = load("train")
    drift = copy.deepcopy(reports["drift"])
    row = next(r for r in drift["rows"] if r["key"] == "mpi")
    row.update(consistent=False, status="FAIL", odd_hosts=["node3"], values=dict(row["values"], node3="Open MPI 4.1.6"),
               groups=[{"hosts": ["node1", "node2"], "value": row["values"]["node1"]}, {"hosts": ["node3"], "value": "Open MPI 4.1.6"}])
    drift["failed"] = True
    model = cluster_page.page(dict(reports, drift=drift), {})
    assert model["verdict"]["stage"] == "Versions side by side" and model["verdict"]["culprit"] == "node3"
    assert model["verdict"]["reason"] == "mpi: node3 has Open MPI 4.1.6, others Open MPI 4.1.4"
    cells = next(r for r in model["drift"]["rows"] if r["key"] == "mpi")["cells"]
    assert [cell["odd"] for cell in cells] == [False, False, True] and cells[2]["text"] == "Open MPI 4.1.6"


def test_the_doctor_names_its_first_failing_finding():
    reports = load("doctor")
    doctor = copy.deepcopy(reports["doctor"])
    doctor.update(ok=False, failed_checks=["names"])
    doctor["findings"].insert(3, {"check": "names", "node": "node2", "status": "fail", "detail": "cannot resolve node3",
                                  "fix": "run site.yml --tags hosts"})
    model = cluster_page.page(dict(reports, doctor=doctor), {})
    assert model["stages"][5] == dict(model["stages"][5], status="FAIL", culprit="node2", reason="names: cannot resolve node3")


def test_no_report_at_all_is_not_a_pass():
    model = cluster_page.page({}, {})
    assert model["verdict"]["status"] == "NOT RUN" and model["verdict"]["reason"] == "no stage has written a report yet"
    assert model["ladder"] is None and model["mesh"] is None


def test_a_ladder_where_every_rung_was_skipped_is_not_run():
    skipped = [{"label": "one GPU on each node", "passed": None, "verdict": "skipped", "skipped": "skipped: no GPUs", "runs": []}]
    model = cluster_page.page({"verify": skipped}, {})
    assert model["stages"][3]["status"] == "NOT RUN"
    assert model["verdict"] == {"status": "NOT RUN", "stage": "Bring-up ladder", "culprit": None, "reason": "every rung was skipped"}
    assert model["ladder"][0]["reasons"] == ["skipped: no GPUs"]


def job_report(units, exits, logs):
    """A job's status report as roles/train writes it to train-<job>.json: jobs.status through JSON."""
    return json.loads(json.dumps(jobs.status(NODES, units, exits, logs, RECORD, ADDRESSES)))


def exit_record(node, rc, ended, stopped_by=None):
    return json.dumps({"node": node, "rc": rc, "run_id": RECORD["run_id"], "ended": ended, "stopped_by": stopped_by})


def running_job():
    running = {"ActiveState": "active", "Result": "success", "ExecMainStartTimestamp": "Tue 2026-12-01 12:43:27 UTC"}
    return job_report({n: running for n in NODES}, {n: None for n in NODES},
                      {"node1": [STEP % 148, STEP % 149], "node2": ["starting"], "node3": []})


def failed_job():
    # node2's rank was killed (torchrun's summary says so), node1 lost its peer first, node3 was stopped by node1.
    failed = {"ActiveState": "failed", "Result": "exit-code", "ExecMainStartTimestamp": "Tue 2026-12-01 12:43:27 UTC"}
    logs = {"node1": ["RuntimeError: [../gloo/transport/tcp/pair.cc:598] Connection closed by peer [10.96.0.12]:50123"],
            "node2": (FIXTURES / "torchrun" / "killed-rank.log").read_text().splitlines(), "node3": ["terminated"]}
    exits = {"node1": exit_record("node1", 1, "2026-12-01T12:44:21.0Z"), "node2": exit_record("node2", 1, "2026-12-01T12:44:25.0Z"),
             "node3": exit_record("node3", 143, "2026-12-01T12:44:27.0Z", stopped_by="node1")}
    return job_report({n: failed for n in NODES}, exits, logs)


def test_a_running_job_shows_each_nodes_state_step_and_last_line():
    model = cluster_page.page(load("train"), {}, {"ddp1": running_job()}, {"ddp1": "2026-12-01 12:45:00 UTC"})
    assert model["jobs"] == [{
        "name": "ddp1", "verdict": "running", "status": "PASS", "first_failed": None, "made": "2026-12-01 12:45:00 UTC",
        "rows": [{"node": "node1", "state": "running", "step": "149", "last_line": STEP % 149, "first_failed": False},
                 {"node": "node2", "state": "running", "step": "-", "last_line": "starting", "first_failed": False},
                 {"node": "node3", "state": "running", "step": "-", "last_line": "-", "first_failed": False}]}]


def test_a_failed_job_names_its_first_failed_node_and_leaves_the_verdict_to_the_stages():
    reports = load("train")
    alone = cluster_page.page(reports, {})
    model = cluster_page.page(reports, {}, {"ddp1": failed_job(), "demo": running_job()}, {"ddp1": "t1", "demo": "t2"})
    failed = model["jobs"][0]
    assert (failed["name"], failed["verdict"], failed["status"], failed["first_failed"]) == (
        "ddp1", "failed: node2 failed first", "FAIL", "node2")
    assert [(row["node"], row["state"], row["first_failed"]) for row in failed["rows"]] == [
        ("node1", "failed: exited 1", False), ("node2", "failed: exited 1", True), ("node3", "stopped: node1 failed", False)]
    assert [job["name"] for job in model["jobs"]] == ["ddp1", "demo"]
    # Jobs are no bring-up stage: the banner and the stages are those of the page without them.
    assert model["verdict"] == alone["verdict"] == {"status": "PASS", "stage": None, "culprit": None, "reason": None}
    assert model["stages"] == alone["stages"] and alone["jobs"] == []


def test_each_job_verdict_has_its_colour():
    stopped = {"ActiveState": "inactive", "Result": "success", "ExecMainStartTimestamp": "Tue 2026-12-01 12:43:27 UTC"}
    done = {n: exit_record(n, 0, "2026-12-01T12:50:00Z") for n in NODES}
    partly = {"node1": exit_record("node1", 0, "2026-12-01T12:50:00Z"), "node2": None, "node3": None}
    running = {"ActiveState": "active", "ExecMainStartTimestamp": "Tue 2026-12-01 12:43:27 UTC"}
    queued = {"ActiveState": "active", "SlurmJobId": "18", "SlurmState": "PENDING", "SlurmReason": "ReqNodeNotAvail"}
    reports = {"done": job_report({n: stopped for n in NODES}, done, {}),
               "partly": job_report({"node1": stopped, "node2": running, "node3": running}, partly, {}),
               "queued": job_report({n: queued for n in NODES}, {}, {}),
               "stopped": job_report({n: stopped for n in NODES}, {}, {})}
    assert [(job["verdict"], job["status"]) for job in cluster_page.jobs(reports, {})] == [
        ("succeeded", "PASS"), ("partly running: node1", "WARN"), ("queued in Slurm (ReqNodeNotAvail)", "WARN"), ("stopped", "NOT RUN")]
