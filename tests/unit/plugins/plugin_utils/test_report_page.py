# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The report page built from molecule runs' reports: self-contained, escaped, with its plots; and its cost."""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

from ansible_collections.trainops.cluster.plugins.module_utils import gpu
from ansible_collections.trainops.cluster.plugins.module_utils.nccl_tests.perf_text import parse_perf_output
from ansible_collections.trainops.cluster.plugins.plugin_utils import jobs, plots, report_page
from ansible_collections.trainops.cluster.plugins.plugin_utils.nccl_tests import ladder
from helpers.timings import timed

ROOT = Path(__file__).resolve().parents[4]
REPORTS = ROOT / "tests" / "fixtures" / "reports"
TEMPLATE = str(ROOT / "roles" / "report_page" / "templates" / "index.html.j2")
T0 = 1796299700.0  # a job's first step, unix time


def with_curve(tmp_path, run="train"):
    """The run's reports, its CPU rung given a bandwidth curve and a limit as the current ladder writes them."""
    for path in (REPORTS / run).iterdir():
        shutil.copy(path, tmp_path / path.name)
    verify = json.loads((tmp_path / "verify.json").read_text())
    verify[-1]["runs"][0].update(curve=[[2 ** i, min(0.4, 2 ** i / 2e7)] for i in range(3, 23)], limit_gbps=1.25)
    (tmp_path / "verify.json").write_text(json.dumps(verify))
    return tmp_path


def test_the_page_is_self_contained_and_shows_the_plots(tmp_path):
    html, verdict = report_page.build(str(with_curve(tmp_path)), TEMPLATE, "train")
    assert verdict["status"] == "PASS"
    assert re.search(r"<h1>train: PASS</h1>", html)
    # Two plots: the CPU rung's busbw with the link limit, and the training loss; nothing fetched from anywhere.
    assert html.count("<svg") == 2 and plots.BUSBW in html and plots.LIMIT in html and plots.LOSS in html
    assert "link limit 1.25 GB/s" in html and "resumed at step 30" in html
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html) and "<script" not in html


def test_text_from_the_nodes_is_escaped(tmp_path):
    reports = with_curve(tmp_path)
    mesh = json.loads((reports / "ssh_mesh.json").read_text())
    mesh.update(ok=False, failures=[{"from": "node1", "to": "node2", "via": "name", "error": "<script>alert(1)</script>"}],
                messages=["node1 -> node2 (name): <script>alert(1)</script>"])
    (reports / "ssh_mesh.json").write_text(json.dumps(mesh))
    html, verdict = report_page.build(str(reports), TEMPLATE, "train")
    assert verdict["status"] == "FAIL" and "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_a_report_that_cannot_be_read_is_named(tmp_path):
    reports = with_curve(tmp_path)
    (reports / "drift.json").write_text("{not json")
    html, _verdict = report_page.build(str(reports), TEMPLATE, "train")
    assert "drift.json could not be read" in html


def write_job(reports, name, logs, failed_at=None, points=None, events=(), watch=None, perf=None, stages=None):
    """train-<name>.json as roles/train writes it: jobs.status of the nodes' reports of a job running on every node, or
    whose every part exited 1 at failed_at's time of its node. points: {node: its progress points}; events: the supervisor's;
    stages: {node: its stage record (NODE.stage.json)}."""
    nodes = sorted(logs)
    parts = {}
    for node in nodes:
        ended = (failed_at or {}).get(node)
        progress = {"run_id": "r1", "step": points[node][-1][1], "step_at": points[node][-1][0], "points": points[node]} \
            if node in (points or {}) else None
        parts[node] = {"node": node, "run_id": "r1", "now": T0 + 100, "state": "failed: exited 1" if ended else "running",
                       "running": not ended, "failed": bool(ended), "rc": 1 if ended else None, "stopped_by": None, "ended": ended,
                       "progress": progress, "log": logs[node], "perf": (perf or {}).get(node) or [], "stage": (stages or {}).get(node)}
    parts[nodes[0]].update(job={"name": name, "run_id": "r1", "events": list(events)}, supervisor=watch)
    status = jobs.status(nodes, parts, {n: "10.96.0.%d" % i for i, n in enumerate(nodes, 11)})
    (reports / ("train-%s.json" % name)).write_text(json.dumps(status, indent=4) + "\n")


def jobs_section(html):
    """The page from the Jobs heading to the next section's, or to the end of the page when it is the last."""
    start = html.index('<h2 id="jobs">Jobs</h2>')
    end = html.find("<h2", start + 1)
    return html[start:end if end > 0 else html.index("</main>")]


def test_the_jobs_section_shows_each_job_its_nodes_and_escapes_their_logs(tmp_path):
    reports = with_curve(tmp_path)
    write_job(reports, "ddp1", {"node1": ['TRAINOPS {"event": "step", "step": 42}'], "node2": ["<script>alert(1)</script>"]},
              points={"node1": [[T0 + 30, 40, None], [T0 + 90, 42, None]]})
    write_job(reports, "a-failed.job", {"node1": ["Traceback"], "node2": ["RuntimeError: boom & <b>bust</b>"]},
              failed_at={"node1": "2026-12-01T12:44:21.0Z", "node2": "2026-12-01T12:44:25.0Z"})
    html, verdict = report_page.build(str(reports), TEMPLATE, "train")
    # A failed job is no failing stage.
    assert verdict["status"] == "PASS" and "<h1>train: PASS</h1>" in html
    assert html.index('<h2 id="torchrun">') < html.index('<h2 id="jobs">Jobs</h2>')
    section = jobs_section(html)
    assert re.findall(r"<h3>([^<]*) <span", section) == ["a-failed.job", "ddp1"]
    assert '<span class="badge fail">failed: node1 failed first</span>' in section
    assert '<span class="badge pass">running</span>' in section
    assert '<tr><td class="odd">node1</td><td class="odd">failed: exited 1</td><td>-</td><td>-</td><td>-</td><td>Traceback</td></tr>' in section
    assert ("<tr><td>node1</td><td>running</td><td>42</td><td>10.0 s ago</td><td>2.0</td>"
            "<td>TRAINOPS {&#34;event&#34;: &#34;step&#34;, &#34;step&#34;: 42}</td></tr>") in section
    assert "<script" not in html and "<td>&lt;script&gt;alert(1)&lt;/script&gt;</td>" in section
    assert "<td>RuntimeError: boom &amp; &lt;b&gt;bust&lt;/b&gt;</td>" in section
    assert "No job started with train.yml yet" not in html


def test_a_jobs_stage_and_restarts_are_shown_with_each_nodes_bytes_and_rate(tmp_path):
    reports = with_curve(tmp_path)
    stage = {"dir": "/var/tmp/trainops-stage/ddp1", "bytes": 1073741824}
    events = [{"event": "restart", "run_id": "r1", "attempt": 1, "nodes": ["node1", "node2"], "why": "node3 lost", "at": T0 + 50,
               "converted": "checkpoint-20 converted to DeepSpeed's universal checkpoint in 12.7 s"}]
    write_job(reports, "ddp1", {"node1": ["step 4"], "node2": ["step 4"]}, points={"node1": [[T0 + 90, 4, None]]}, events=events,
              stages={"node1": dict(stage, copied=1073741824, mb_per_s=412.0), "node2": dict(stage, copied=0)})
    section = jobs_section(report_page.build(str(reports), TEMPLATE, "train")[0])
    assert ("<p class=\"reasons\">staged on every node&#39;s disk (/var/tmp/trainops-stage/ddp1), each file checked against one "
            "manifest (sha256): node1 1.07 GB (1.07 GB copied at 412 MB/s), node2 1.07 GB (kept: unchanged)</p>") in section
    # The record of this report names no first world (write_job): the restart's own words are the subject here.
    assert ("then 2 (node3 lost; checkpoint-20 converted to DeepSpeed&#39;s universal "
            "checkpoint in 12.7 s)") in section


def test_a_stalled_job_shows_its_diagnosis_events_and_plots(tmp_path):
    verdict = "stalled at step 40: rank 1 (node2) is stopped; rank 0 waits in allreduce <c10d>"
    events = [{"event": "stall", "step": 40, "idle_seconds": 60.5, "at": T0 + 70},
              {"event": "diagnosis", "step": 40, "verdict": verdict, "culprits": [{"rank": 1, "node": "node2", "why": "is stopped"}], "at": T0 + 75},
              {"event": "restart", "attempt": 1, "limit": 2, "at": T0 + 76}]
    write_job(tmp_path, "w1", {"node1": [], "node2": []}, points={"node1": [[T0, 1, 2.0], [T0 + 5, 20, None], [T0 + 10, 40, 1.5]]},
              events=[dict(event, run_id="r1") for event in events], watch={"run_id": "r1", "state": "stalled", "stall_seconds": 60})
    html, _verdict = report_page.build(str(tmp_path), TEMPLATE, "train")
    section = jobs_section(html)
    assert '<span class="badge warn">stalled: no node logged a new step for 60 s</span>' in section
    assert "Diagnosis: stalled at step 40: rank 1 (node2) is stopped; rank 0 waits in allreduce &lt;c10d&gt;" in section
    assert 'Odd one out: <span class="odd">rank 1 (node2)</span>' in section
    assert '<tr><td class="odd">node2</td><td class="odd">running</td>' in section
    assert "<tr><td>+70</td><td>stall</td><td>at step 40: no new step for 60.5 s</td></tr>" in section
    assert "<tr><td>+76</td><td>restart</td><td>attempt 1 of 2</td></tr>" in section
    if plots.available():
        assert "<svg" not in section and "No plots: matplotlib is not installed" in html
    else:
        # The step plot with its stall and restart markers, then the job's loss (the nulls left out).
        assert section.count("<svg") == 2 and "<h4>Step against time</h4>" in section and "<h4>Loss</h4>" in section
        assert plots.STALL in section and plots.RESTART in section and "restart 1" in section and ">node1<" in section


def test_each_nodes_windows_are_drawn_over_time(tmp_path):
    # The runners' windows in brief (perf.history_point): node2 the straggler, node1 waiting in the all-reduce; GPUs.
    perf = {node: [{"at": T0 + 10 * i, "busy": busy, "wait": wait, "gpu": 40.0 + i, "tx": 4.8} for i in range(1, 6)]
            for node, busy, wait in (("node1", 0.3, 0.7), ("node2", 1.0, 0.0))}
    write_job(tmp_path, "w2", {"node1": [], "node2": []}, points={"node1": [[T0, 1, 2.0], [T0 + 50, 40, 1.5]]}, perf=perf)
    html, _verdict = report_page.build(str(tmp_path), TEMPLATE, "train")
    section = jobs_section(html)
    if not plots.available():
        plot = section[section.index("<h4>Where each node's ranks spend their time</h4>"):]
        assert plot.count("<svg") >= 1 and "node2 busy" in plot and "node1 in collectives" in plot and "GPU util %" in plot


def test_a_short_jobs_time_plot_says_it_has_too_few_windows_instead_of_being_drawn_empty(tmp_path):
    # One window on each node (a job a minute old): a line needs two points, so the plot would be drawn empty.
    perf = {node: [{"at": T0 + 10, "busy": busy, "wait": None, "gpu": None, "tx": 4.8}] for node, busy in (("node1", 0.3), ("node2", 1.0))}
    write_job(tmp_path, "short", {"node1": [], "node2": []}, points={"node1": [[T0, 1, 2.0], [T0 + 50, 40, 1.5]]}, perf=perf)
    section = jobs_section(report_page.build(str(tmp_path), TEMPLATE, "train")[0])
    assert ("<h4>Where each node's ranks spend their time</h4><p class=\"note\">not enough windows yet to draw (1 of the %d needed)</p>"
            % plots.MIN_WINDOWS) in section
    assert "node1 busy" not in section
    # A window without a figure draws nothing either; a job without any window shows no such section.
    assert plots.perf_short([["node1", [[10.0, None, None, None]]]]) == "not enough windows yet to draw (0 of the 2 needed)"
    assert plots.perf_short([]) is None and plots.perf(None, [["node1", [[10.0, 30.0, None, None]]]]) is None
    assert plots.perf_short([["node1", [[10.0, 30.0, None, None], [20.0, 31.0, None, None]]]]) is None


def test_no_job_yet_is_said(tmp_path):
    html, _verdict = report_page.build(str(with_curve(tmp_path)), TEMPLATE, "train")
    assert "<p class=\"note\">No job started with train.yml yet.</p>" in jobs_section(html)


def test_job_reports_are_read_in_the_order_of_their_names_and_an_unreadable_one_is_named(tmp_path):
    write_job(tmp_path, "b", {"node1": []})
    write_job(tmp_path, "a", {"node1": []})
    (tmp_path / "train-broken.json").write_text("{not json")
    (tmp_path / "training.json").write_text("{}")
    reports, made, problems = report_page.read_job_reports(str(tmp_path))
    assert list(reports) == ["a", "b"] and list(made) == ["a", "b"] and reports["a"]["verdict"] == "running"
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", made["a"])
    assert len(problems) == 1 and problems[0].startswith("train-broken.json could not be read")
    html, _verdict = report_page.build(str(tmp_path), TEMPLATE, "train")
    assert "train-broken.json could not be read" in html and "as train.yml last saw it, %s" % made["a"] in html


def synthetic(tmp_path, nodes):
    """Reports of a cluster of `nodes` 8-GPU nodes, every stage passing, every rung with a curve."""
    names = ["gpu%02d" % n for n in range(1, nodes + 1)]
    matrix = {"ok": True, "failures": [], "messages": [], "probes": nodes * (nodes - 1), "local": 0,
              "headers": ["from \\ to"] + names, "rows": [[a] + ["-" if a == b else "ok" for b in names] for a in names]}
    curve = [[2 ** i, min(360.0, 2 ** i / 2e7)] for i in range(3, 34)]
    run = {"leader": names[0], "hosts": names, "passed": True, "verdict": "PASS", "busbw_gbps": 360.0, "limit_gbps": 478.1,
           "curve": curve, "reasons": []}
    verify = [{"label": label, "rung": label, "passed": True, "verdict": "PASS", "skipped": None,
               "runs": [dict(run, leader=name, hosts=[name]) for name in names] if per_node else [run]}
              for label, per_node in (("one GPU on each node", True), ("all GPUs of each node", True), ("all nodes", False))]
    drift_rows = [{"key": "key%d" % k, "consistent": True, "status": "ok", "odd_hosts": [], "values": {n: "v" for n in names},
                   "groups": [{"hosts": names, "value": "v"}]} for k in range(30)]
    for name, data in (("ssh_mesh.json", matrix), ("port_matrix.json", matrix), ("verify.json", verify),
                       ("drift.json", {"hosts": names, "keys": [], "rows": drift_rows, "failed": False, "errors": [], "warnings": []})):
        (tmp_path / name).write_text(json.dumps(data))
    return tmp_path


def test_the_page_is_built_and_timed_at_3_and_24_nodes(tmp_path):
    for nodes in (3, 24):
        (tmp_path / str(nodes)).mkdir()
        reports = synthetic(tmp_path / str(nodes), nodes)
        start = time.monotonic()
        html, verdict = report_page.build(str(reports), TEMPLATE, "bench")
        # The 2 s target is scripts/benchmark's; 20 s is a hang (about 1 s here, most of it the first build's imports).
        timed("report page built, plots drawn anew (%d nodes)" % nodes, time.monotonic() - start, 20)
        assert verdict["status"] == "PASS" and html.count("<svg") == 3


def test_a_rebuild_from_the_same_curves_draws_nothing_and_old_plots_are_pruned(tmp_path, monkeypatch):
    reports = with_curve(tmp_path)
    first, _verdict = report_page.build(str(reports), TEMPLATE, "train")
    assert len(list((reports / ".plots").iterdir())) == 2

    def no_drawing(*_args):
        raise AssertionError("drawn again")

    monkeypatch.setattr(plots, "_draw_busbw", no_drawing)
    monkeypatch.setattr(plots, "_draw_loss", no_drawing)
    again, _verdict = report_page.build(str(reports), TEMPLATE, "train")
    assert again.count("<svg") == 2 and re.sub(r"Built [^<]* from", "", again) == re.sub(r"Built [^<]* from", "", first)
    (reports / "torchrun.json").unlink()
    report_page.build(str(reports), TEMPLATE, "train")
    assert len(list((reports / ".plots").iterdir())) == 1


def test_the_real_h200_ladder_is_drawn_against_its_nvlink_limit(tmp_path):
    # The ladder's verdict of the recorded 2x H200 run (tests/fixtures/gpu/h200x2), as verify.json holds it.
    h200 = ROOT / "tests" / "fixtures" / "gpu" / "h200x2"
    facts = gpu.gather(smi_xml=(h200 / "nvidia-smi-q.xml").read_text(), query_csv=(h200 / "query-gpu.csv").read_text(),
                       nvlink=(h200 / "nvlink-s.txt").read_text())
    output = {"rc": 0, "timed_out": False, "seconds": 40.0, "result": parse_perf_output((h200 / "all_reduce_perf.txt").read_text()),
              "debug": None}
    settings = {"all_reduce_perf": "all_reduce_perf", "mpirun": "mpirun", "env_wrapper": "trainops-env", "python": "python3",
                "cpu_program": "cpu_allreduce.py", "min_bytes": 8, "max_bytes": "8G", "gpu_max_bytes": "128M", "iters": 20,
                "warmup": 5, "json_dir": None}
    step = ladder.plan(["vm"], {"vm": 2}, settings)[1]
    verdict = ladder.judge_step(step, {"vm": output}, {"vm": facts}, {"vm": {}}, 0.5)
    (tmp_path / "verify.json").write_text(json.dumps([verdict]))
    html, page_verdict = report_page.build(str(tmp_path), TEMPLATE, "h200x2")
    assert page_verdict["status"] == "PASS" and html.count("<svg") == 1
    assert "link limit 478.1 GB/s" in html and ">vm<" in html


def test_a_job_whose_steps_are_not_recognised_says_so_on_the_page(tmp_path):
    note = "progress unknown: no step recognised in 4 min; set train_progress_pattern"
    write_job(tmp_path, "odd", {"node1": ["it=3 | J=0.25"]}, watch={"run_id": "r1", "state": "waiting for the first step", "note": note})
    html, _verdict = report_page.build(str(tmp_path), TEMPLATE, "train")
    assert '<p class="diagnosis">%s</p>' % note in jobs_section(html)


def test_a_scaling_runs_table_is_on_the_page(tmp_path):
    reports = with_curve(tmp_path)
    write_job(reports, "scale", {"node1": ["step 40"], "node2": ["step 40"]}, events=[
        {"event": "scale", "run_id": "r1", "world": 1, "nodes": ["node1"], "steps_per_second": 4.75, "at": T0 + 20},
        {"event": "scale", "run_id": "r1", "world": 2, "nodes": ["node1", "node2"], "steps_per_second": 4.74, "at": T0 + 40}])
    section = jobs_section(report_page.build(str(reports), TEMPLATE, "train")[0])
    assert "<h4>What each size buys (train_action=scale)</h4>" in section
    assert "<tr><td>2</td><td>node1, node2</td><td>4.74</td><td>-</td><td>2.0x</td><td>100 %</td><td>not judged</td><td></td></tr>" in section
    # Throughput against the nodes, with the linear line from one node (steps/s x nodes: no batch known).
    plot = section[section.index("What each size buys"):]
    assert "<svg" in plot and "linear from 1 node" in plot and "steps/s x nodes" in plot


def test_the_burn_in_table_is_on_the_page(tmp_path):
    # The GPU machine's H100 through verify.yml --tags burn_in, beside molecule's reports.
    reports = with_curve(tmp_path)
    shutil.copy(ROOT / "tests" / "fixtures" / "gpu" / "burn" / "h100x1-verify-burn-in.json", reports / "burn-in.json")
    html, _verdict = report_page.build(str(reports), TEMPLATE, "train")
    section = html[html.index('<h2 id="burn_in">'):html.index('<h2 id="ladder">')]
    assert ("<tr><td>vm</td><td>GPU0</td><td>NVIDIA H100 80GB HBM3</td><td>00000000:00:06.0</td><td>681.7 (69 %)</td>"
            "<td>3012.8 (90 %)</td><td>55.3 (88 %)</td><td>55.2 (88 %)</td><td>-</td><td>65ca46eeec16</td>") in section
    assert "not judged: vm: the only NVIDIA H100 80GB HBM3, not compared with peers" in section


def test_the_acceptance_record_is_on_the_page(tmp_path):
    reports = with_curve(tmp_path)
    record = {"date": "2026-12-05 14:00:00 UTC", "passed": False, "rows": [], "nodes": {
        "node1": {"passed": True, "checks": [{"check": "GPU health", "device": "GPU0", "figure": "no ECC, row remap, clock or link problem",
                                              "threshold": "none (docs/gpu-health.md)", "result": "pass"}]},
        "node3": {"passed": False, "checks": [{"check": "burn-in: GEMM TFLOP/s", "device": "GPU0", "figure": "500.0 (51 %)",
                                               "threshold": "at least 90 % of the median", "result": "fail"}]}}}
    (reports / "acceptance.json").write_text(json.dumps(record))
    html, _verdict = report_page.build(str(reports), TEMPLATE, "train")
    section = html[html.index('<h2 id="acceptance">'):html.index('<h2 id="ladder">')]
    assert 'Acceptance record <span class="badge fail">FAIL</span>' in section and "made 2026-12-05 14:00:00 UTC" in section
    assert ("<tr><td>burn-in: GEMM TFLOP/s</td><td>GPU0</td><td>500.0 (51 %)</td><td>at least 90 % of the median</td>"
            '<td><span class="badge fail">fail</span></td></tr>') in section
