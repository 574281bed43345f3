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
T0 = 1796299700.0  # a job's first step, unix time


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
        "mesh": "PASS", "ports": "PASS", "drift": "PASS", "burn_in": "NOT RUN", "verify": "PASS", "torchrun": "PASS", "doctor": "NOT RUN"}
    assert model["stages"][4]["made"] == "2026-12-01 17:44:00 UTC" and model["stages"][6]["made"] is None
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
    verify = model["stages"][4]
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
    assert model["stages"][6] == dict(model["stages"][6], status="FAIL", culprit="node2", reason="names: cannot resolve node3")


def test_no_report_at_all_is_not_a_pass():
    model = cluster_page.page({}, {})
    assert model["verdict"]["status"] == "NOT RUN" and model["verdict"]["reason"] == "no stage has written a report yet"
    assert model["ladder"] is None and model["mesh"] is None


def test_a_ladder_where_every_rung_was_skipped_is_not_run():
    skipped = [{"label": "one GPU on each node", "passed": None, "verdict": "skipped", "skipped": "skipped: no GPUs", "runs": []}]
    model = cluster_page.page({"verify": skipped}, {})
    assert model["stages"][4]["status"] == "NOT RUN"
    assert model["verdict"] == {"status": "NOT RUN", "stage": "Bring-up ladder", "culprit": None, "reason": "every rung was skipped"}
    assert model["ladder"][0]["reasons"] == ["skipped: no GPUs"]


def job_report(parts, record=None, supervisor=None, queue=None):
    """A job's status report as roles/train writes it to train-<job>.json: jobs.status of the nodes' reports, through JSON."""
    reports = {part["node"]: part for part in parts}
    reports[NODES[0]] = dict(reports[NODES[0]], job=record or RECORD, supervisor=supervisor)
    return json.loads(json.dumps(jobs.status(NODES, reports, ADDRESSES, queue)))


def part(node, state="running", rc=None, ended=None, stopped_by=None, log=None, points=None, now=0.0):
    """A node's report (trainops-job report): its progress record's points are [[unix time, step, loss or None]]."""
    progress = {"node": node, "run_id": RECORD["run_id"], "step": points[-1][1], "step_at": points[-1][0], "loss": points[-1][2],
                "points": points} if points else None
    return {"node": node, "run_id": RECORD["run_id"], "now": now, "state": state, "running": state == "running",
            "failed": rc not in (None, 0) and not stopped_by, "rc": rc, "stopped_by": stopped_by, "ended": ended,
            "progress": progress, "log": log or []}


def running_job():
    return job_report([part("node1", log=[STEP % 148, STEP % 149], points=[[T0, 148, 0.06], [T0 + 2, 149, 0.0548]], now=T0 + 14.3),
                       part("node2", log=["starting"]), part("node3")])


def failed_job():
    # node2's rank was killed (torchrun's summary says so), node1 lost its peer first, node3 was stopped by node1.
    return job_report([part("node1", "failed: exited 1", 1, "2026-12-01T12:44:21.0Z",
                            log=["RuntimeError: [../gloo/transport/tcp/pair.cc:598] Connection closed by peer [10.96.0.12]:50123"]),
                       part("node2", "failed: exited 1", 1, "2026-12-01T12:44:25.0Z",
                            log=(FIXTURES / "torchrun" / "killed-rank.log").read_text().splitlines()),
                       part("node3", "stopped: node1 failed", 143, "2026-12-01T12:44:27.0Z", stopped_by="node1", log=["terminated"])])


def test_a_running_job_shows_each_nodes_state_step_and_last_line():
    model = cluster_page.page(load("train"), {}, {"ddp1": running_job()}, {"ddp1": "2026-12-01 12:45:00 UTC"})
    assert model["jobs"] == [{
        "name": "ddp1", "verdict": "running", "status": "PASS", "first_failed": None, "made": "2026-12-01 12:45:00 UTC",
        "stall_seconds": None, "note": None, "diagnosis": None, "events": [],
        "rows": [{"node": "node1", "state": "running", "step": "149", "logged": "12.3 s ago", "steps_per_minute": "30.0",
                  "last_line": STEP % 149, "first_failed": False, "culprit": False},
                 {"node": "node2", "state": "running", "step": "-", "logged": "-", "steps_per_minute": "-", "last_line": "starting",
                  "first_failed": False, "culprit": False},
                 {"node": "node3", "state": "running", "step": "-", "logged": "-", "steps_per_minute": "-", "last_line": "-",
                  "first_failed": False, "culprit": False}],
        "progress": {"nodes": [["node1", [[0.0, 148], [2.0, 149]]]], "marks": []}, "losses": [[148, 0.06], [149, 0.0548]],
        "perf": [], "scale_rows": [], "scale": [], "scale_notes": [], "data": []}]


def test_each_nodes_windows_are_shown_over_time():
    """The runners' windows in brief (perf.history_point), as status carries them: node3 the straggler, busy all the time,
    the others waiting in the all-reduce; node2's GPUs (a GPU node's windows) below."""
    windows = {"node1": [(0.2, 0.8, None), (0.25, 0.7, None)], "node2": [(0.3, 0.6, 35.0), (0.3, 0.6, 31.5)],
               "node3": [(1.0, 0.0, None), (0.97, None, None)]}
    parts = [part("node1", log=[STEP % 148], points=[[T0, 148, 0.06]], now=T0 + 14.3), part("node2"), part("node3")]
    for one in parts:
        one["perf"] = [{"at": T0 + 10 * (i + 1), "busy": busy, "wait": wait, "gpu": gpu, "tx": 4.8}
                       for i, (busy, wait, gpu) in enumerate(windows[one["node"]])]
    report = job_report(parts)
    job = cluster_page.page(load("train"), {}, {"ddp1": report}, {"ddp1": "now"})["jobs"][0]
    assert job["perf"] == [["node1", [[10.0, 20.0, 80.0, None], [20.0, 25.0, 70.0, None]]],
                           ["node2", [[10.0, 30.0, 60.0, 35.0], [20.0, 30.0, 60.0, 31.5]]],
                           ["node3", [[10.0, 100.0, 0.0, None], [20.0, 97.0, None, None]]]]


def test_a_report_of_four_columns_still_shows():
    # train-<job>.json of a status before the step's age and rate: [node, state, step, last line].
    report = {"verdict": "running", "rows": [["node1", "running", "12", "step 12"]]}
    assert cluster_page.jobs({"old": report}, {})[0]["rows"] == [
        {"node": "node1", "state": "running", "step": "12", "logged": "-", "steps_per_minute": "-", "last_line": "step 12",
         "first_failed": False, "culprit": False}]


VERDICT = "stalled at step 40: rank 1 (node2) is stopped; ranks 0, 2 wait in allreduce (distributed_c10d.py:2501)"


def stalled_job(stopped=False):
    """A job that stalled at step 40 (node2's rank stopped), was diagnosed and restarted, stalled again at 52: still
    stalled, or stopped by the supervisor after its restart limit. Only node1 and node2 print steps; node1 a loss."""
    events = [{"event": "stall", "step": 40, "idle_seconds": 121.0, "stall_seconds": 120, "at": T0 + 160},
              {"event": "diagnosis", "step": 40, "verdict": "stalled at step 40: node3 stopped answering", "at": T0 + 170,
               "culprits": [{"rank": None, "node": "node3", "why": "stopped answering (no diagnosis within 30 s)"}]},
              {"event": "restart", "attempt": 1, "limit": 1, "at": T0 + 171},
              {"event": "stall", "step": 40, "idle_seconds": 120.5, "stall_seconds": 120, "at": T0 + 400},
              {"event": "diagnosis", "step": 40, "verdict": VERDICT, "at": T0 + 410,
               "culprits": [{"rank": 1, "node": "node2", "why": "is stopped"}, {"rank": None, "node": None, "why": "rank 5 has no process on any node"}]},
              {"event": "restart limit", "restarts": 1, "limit": 1, "at": T0 + 410.5},
              {"event": "stop", "why": "stalled (train_on_stall: stop)", "at": T0 + 411},
              {"event": "stall", "step": 3, "at": T0 + 50, "run_id": "an earlier start"}]
    record = dict(RECORD, events=[dict(event, run_id=RECORD["run_id"]) for event in events[:-1]] + events[-1:])
    points = {"node1": [[T0, 1, 2.5], [T0 + 10, 10, None], [T0 + 40, 40, 1.5], [T0 + 200, 41, 1.4], [T0 + 280, 52, 1.2]],
              "node2": [[T0 + 5, 1, None], [T0 + 45, 40, None]]}
    state, by = ("stopped: stalled", "train_on_stall=stop") if stopped else ("running", None)
    return job_report([part(n, state, 143 if stopped else None, "2026-12-01T12:55:00Z" if stopped else None, by, points=points.get(n),
                            now=T0 + 420) for n in NODES], record, {"run_id": RECORD["run_id"], "state": "stalled", "stall_seconds": 120})


def test_a_stalled_job_shows_its_progress_events_and_diagnosis():
    job = cluster_page.jobs({"w1": stalled_job()}, {})[0]
    assert (job["verdict"], job["status"], job["stall_seconds"]) == ("stalled: no node logged a new step for 120 s", "WARN", 120)
    # The last diagnosis names the odd one out; the rank missing everywhere has no node to mark.
    assert job["diagnosis"] == {"text": VERDICT, "odd": ["rank 1 (node2)"], "culprits": [
        {"rank": 1, "node": "node2", "why": "is stopped"}, {"rank": None, "node": None, "why": "rank 5 has no process on any node"}]}
    assert [(row["node"], row["step"], row["culprit"]) for row in job["rows"]] == [("node1", "52", False), ("node2", "40", True),
                                                                                   ("node3", "-", False)]
    # Seconds since the first point of any node; an earlier start's events are not this job's.
    assert job["progress"] == {"nodes": [["node1", [[0.0, 1], [10.0, 10], [40.0, 40], [200.0, 41], [280.0, 52]]],
                                         ["node2", [[5.0, 1], [45.0, 40]]]],
                               "marks": [[160.0, "stall"], [171.0, "restart 1"], [400.0, "stall"]]}
    assert job["losses"] == [[1, 2.5], [40, 1.5], [41, 1.4], [52, 1.2]]
    assert job["events"] == [
        {"seconds": 160.0, "event": "stall", "detail": "at step 40: no new step for 121.0 s"},
        {"seconds": 170.0, "event": "diagnosis", "detail": "stalled at step 40: node3 stopped answering"},
        {"seconds": 171.0, "event": "restart", "detail": "attempt 1 of 1"},
        {"seconds": 400.0, "event": "stall", "detail": "at step 40: no new step for 120.5 s"},
        {"seconds": 410.0, "event": "diagnosis", "detail": VERDICT},
        {"seconds": 410.5, "event": "restart limit", "detail": "1 of 1 restarts made"},
        {"seconds": 411.0, "event": "stop", "detail": "stalled (train_on_stall: stop)"}]


def test_a_job_without_points_has_no_plot_and_times_its_events_from_the_first():
    report = {"verdict": "running", "rows": [], "nodes": {"node1": {"points": []}}, "diagnosis": None,
              "events": [{"event": "stall", "step": None, "idle_seconds": 300, "at": T0 + 300}, {"event": "restart", "attempt": 1, "at": T0 + 330}]}
    job = cluster_page.jobs({"quiet": report}, {})[0]
    assert job["progress"] is None and job["losses"] == [] and job["diagnosis"] is None
    assert [(event["seconds"], event["event"]) for event in job["events"]] == [(0.0, "stall"), (30.0, "restart")]


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


def test_a_stopped_nodes_last_line_says_how_it_was_stopped_not_the_signals_traceback():
    # A job's node log from the GPU machine whose part was stopped (tests/fixtures/nccl_tests/README.md): it ends with
    # torchrun's "SignalException: Process 454 got signal: 15", which reads as a crash. The traceback stays in the log.
    log = (FIXTURES / "nccl_tests" / "job_h100x1_two_hosts.log").read_text().splitlines()
    assert log[-1] == "torch.distributed.elastic.multiprocessing.api.SignalException: Process 454 got signal: 15"
    ended = "2026-12-01T12:50:00Z"
    report = job_report([part(n, "stopped", 143, ended, "train_action=stop", log=log) for n in NODES])
    assert [row[-1] for row in report["rows"]] == [log[-1]] * 3
    job = cluster_page.jobs({"stopped": report}, {})[0]
    assert [(row["state"], row["last_line"]) for row in job["rows"]] == [("stopped", "stopped by train_action=stop")] * 3
    # The supervisor's stop after a stall likewise; a node stopped because a peer failed names that peer, and the node
    # that failed first keeps its own last line.
    assert {row["last_line"] for row in cluster_page.jobs({"w": stalled_job(stopped=True)}, {})[0]["rows"]} == {
        "stopped by train_on_stall=stop"}
    assert [row["last_line"] for row in cluster_page.jobs({"ddp1": failed_job()}, {})[0]["rows"]] == [
        "RuntimeError: [../gloo/transport/tcp/pair.cc:598] Connection closed by peer [10.96.0.12]:50123",
        (FIXTURES / "torchrun" / "killed-rank.log").read_text().splitlines()[-1], "stopped by node1's failure"]


def test_each_job_verdict_has_its_colour():
    ended = "2026-12-01T12:50:00Z"
    reports = {"done": job_report([part(n, "exited 0", 0, ended) for n in NODES]),
               "partly": job_report([part("node1", "exited 0", 0, ended), part("node2"), part("node3")]),
               "queued": job_report([part(n, "not started") for n in NODES], queue={"SlurmState": "PENDING", "SlurmReason": "ReqNodeNotAvail"}),
               "stopped": job_report([part(n, "stopped", 143, ended, "train_action=stop") for n in NODES]),
               "stalled": stalled_job(), "stopped after a stall": stalled_job(stopped=True)}
    assert [(job["verdict"], job["status"]) for job in cluster_page.jobs(reports, {})] == [
        ("succeeded", "PASS"), ("partly running: node1", "WARN"), ("queued in Slurm (ReqNodeNotAvail)", "WARN"), ("stopped", "NOT RUN"),
        ("stalled: no node logged a new step for 120 s", "WARN"), ("stopped after a stall (train_on_stall)", "FAIL")]


def test_a_scaling_run_shows_its_table_and_a_slow_job_its_straggler():
    events = [{"event": "scale", "world": 1, "nodes": ["node1"], "steps_per_second": 4.75, "at": T0 + 20},
              {"event": "scale", "world": 3, "nodes": NODES, "steps_per_second": 4.54, "at": T0 + 60},
              {"event": "scaled", "sizes": [1, 3], "at": T0 + 61}]
    record = dict(RECORD, events=[dict(event, run_id=RECORD["run_id"]) for event in events])
    parts = [part(n, "stopped: scaling measured", 143, "2026-12-01T12:55:00Z", "train_action=scale: measured") for n in NODES]
    job = cluster_page.jobs({"s1": job_report(parts, record)}, {})[0]
    assert (job["verdict"], job["status"]) == ("scaled: 3 nodes 2.87x 1 node (96 %)", "PASS")
    assert job["scale_rows"] == [["1", "node1", "4.75", "-", "1.0x", "100 %", "not judged", ""],
                                 ["3", "node1, node2, node3", "4.54", "-", "2.87x", "96 %", "not judged", ""]]
    assert [e["detail"] for e in job["events"]] == ["1 nodes: 4.75 steps/s", "3 nodes: 4.54 steps/s", ""]
    text = "straggler: node3's ranks are busy 97 % of the time, the other nodes' 22 % (they wait for it)"
    record = dict(RECORD, events=[{"event": "slow", "node": "node3", "text": text, "at": T0 + 30, "run_id": RECORD["run_id"]},
                                  {"event": "spare joined", "node": "node4", "replaces": "node2", "at": T0 + 40, "run_id": RECORD["run_id"]}])
    job = cluster_page.jobs({"s2": job_report([part(n) for n in NODES], record, {"run_id": RECORD["run_id"], "slow": {"text": text}})}, {})[0]
    assert (job["verdict"], job["status"]) == ("running, slow: " + text, "WARN") and job["scale_rows"] == []
    assert [e["detail"] for e in job["events"]] == [text, "node4 in place of node2"]


def test_the_burn_in_shows_each_gpu_and_names_a_failed_one():
    # verify.yml --tags burn_in on the GPU machine's H100 (tests/fixtures/gpu/burn/SOURCES.md), then a variant of it.
    burn = json.loads((FIXTURES / "gpu" / "burn" / "h100x1-verify-burn-in.json").read_text())
    model = cluster_page.page({"burn_in": burn}, {})
    assert model["stages"][3]["status"] == "PASS" and model["burn_in"]["rows"] == [
        ["vm", "GPU0", "NVIDIA H100 80GB HBM3", "00000000:00:06.0", "681.7 (69 %)", "3012.8 (90 %)", "55.3 (88 %)", "55.2 (88 %)",
         "-", "65ca46eeec16", "PASS"]]
    assert model["burn_in"]["not_judged"] == ["vm: the only NVIDIA H100 80GB HBM3, not compared with peers"]
    finding = {"node": "vm", "device": "GPU0", "gpu": 0, "bus": "00000000:00:06.0", "status": "fail", "what": "GEMM below its peers'",
               "figure": "535.4 TFLOP/s (79 % of the median 681.7 of 8 NVIDIA H100 80GB HBM3)", "threshold": "at least 90 % of the median",
               "fix": "..."}
    model = cluster_page.page({"burn_in": dict(burn, passed=False, findings=[finding])}, {})
    assert model["verdict"] == {"status": "FAIL", "stage": "Burn-in", "culprit": "vm GPU0",
                                "reason": "GEMM below its peers': 535.4 TFLOP/s (79 % of the median 681.7 of 8 NVIDIA H100 80GB HBM3)"}
    assert model["burn_in"]["rows"][0][-1] == "FAIL"
    assert cluster_page.page({"burn_in": dict(burn, passed=None, rows=[])}, {})["stages"][3]["reason"].startswith("no node ran it")
