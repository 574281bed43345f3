# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The cluster report page's content, from the stages' JSON reports: one verdict, then each stage as it was last run.

Pure data: no drawing and no HTML here (plugin_utils/plots.py draws, roles/report_page's template lays it out).
"""

from __future__ import annotations

from typing import Any, Callable

from ansible_collections.trainops.cluster.plugins.module_utils._job_events import BY_SETTING, Event
from ansible_collections.trainops.cluster.plugins.plugin_utils import burn_in
from ansible_collections.trainops.cluster.plugins.plugin_utils.drift_compare import describe_row, format_value
from ansible_collections.trainops.cluster.plugins.plugin_utils.jobs import verdict_scale

# The stages in the order a bring-up climbs them: (key, report file, title).
STAGES = (
    ("mesh", "ssh_mesh.json", "SSH mesh"),
    ("ports", "port_matrix.json", "Ports between nodes"),
    ("drift", "drift.json", "Versions side by side"),
    ("burn_in", "burn-in.json", "Burn-in"),
    ("verify", "verify.json", "Bring-up ladder"),
    ("torchrun", "torchrun.json", "torchrun rungs"),
    ("doctor", "doctor.json", "Doctor"),
)
# Reports the page shows beside the stages, judged by none of them: (key, report file).
EXTRAS = (("acceptance", "acceptance.json"),)
PASS, FAIL, NOT_JUDGED, WARN, MISSING = "PASS", "FAIL", "NOT JUDGED", "WARN", "NOT RUN"


def _matrix_status(report: dict[str, Any]) -> tuple[str, str | None, str | None]:
    if report["ok"]:
        return PASS, None, None
    first = (report.get("failures") or [{}])[0]
    culprit = "%s -> %s" % (first.get("from"), first.get("to")) if first else None
    return FAIL, culprit, (report.get("messages") or [None])[0]


def _drift_status(report: dict[str, Any]) -> tuple[str, str | None, str | None]:
    # A row's status is drift_compare's: ok, FAIL (critical key), WARN, or ignored (differs, by policy unimportant).
    odd = [row for row in report.get("rows", []) if row.get("status") in ("FAIL", "WARN")]
    severe = [row for row in odd if row.get("status") == "FAIL"]
    if report.get("failed") or severe:
        row = (severe or odd)[0]
        return FAIL, ", ".join(row.get("odd_hosts") or []) or None, describe_row(row)
    if odd:
        return WARN, ", ".join(odd[0].get("odd_hosts") or []) or None, describe_row(odd[0])
    return PASS, None, None


def _verdicts_status(verdicts: list[dict[str, Any]]) -> tuple[str, str | None, str | None]:
    """verify.json and torchrun.json: a list of verdicts, passed null for one that did not run."""
    failed = [v for v in verdicts if v.get("passed") is False]
    if failed:
        first = failed[0]
        reasons = list(first.get("reasons") or []) + [r for run in first.get("runs") or [] if run.get("passed") is False
                                                      for r in run.get("reasons") or []]
        hosts = [run.get("leader") for run in first.get("runs") or [] if run.get("passed") is False and run.get("leader")]
        return FAIL, first["label"] + (" on " + ", ".join(hosts) if hosts else ""), (reasons or [None])[0]
    unjudged = [v for v in verdicts if v.get("verdict") == "not judged"]
    if unjudged:
        return NOT_JUDGED, unjudged[0].get("label"), next((run.get("not_judged") for run in unjudged[0].get("runs") or []
                                                           if run.get("not_judged")), None)
    if verdicts and all(v.get("passed") is None for v in verdicts):
        return MISSING, None, "every rung was skipped"
    return PASS, None, None


def _doctor_status(report: dict[str, Any]) -> tuple[str, str | None, str | None]:
    if report.get("ok"):
        return PASS, None, None
    first: dict[str, Any] = next((f for f in report.get("findings") or [] if f.get("status") == "fail"), {})
    return FAIL, first.get("node"), ("%s: %s" % (first.get("check"), first.get("detail"))) if first else None


def _burn_in_status(report: dict[str, Any]) -> tuple[str, str | None, str | None]:
    """burn-in.json (burn_in's verdict): passed null where no node ran it (no GPUs, burn_in_cpu off)."""
    if report.get("passed") is None:
        return MISSING, None, "no node ran it (no GPUs; burn_in_cpu off)"
    if report["passed"]:
        return PASS, None, None
    # A warning (DCGM's) fails nothing: the first failure is named.
    first: dict[str, Any] = next((f for f in report.get("findings") or [] if f.get("status", "fail") == "fail"), {})
    culprit = " ".join(part for part in (first.get("node"), first.get("device")) if part) or None
    return FAIL, culprit, "%s: %s" % (first.get("what"), first.get("figure")) if first else None


def burn_in_table(report: dict[str, Any]) -> dict[str, Any]:
    """One row a GPU: [node, device, model, bus, GEMM, memory, host->GPU, GPU->host, SM clock under load (each with its
    share of the specification, the clock's of its maximum), result (its sha256's first 12), verdict], then the findings and what was not judged."""
    failed = {(f.get("node"), f.get("gpu")) for f in report.get("findings") or [] if f.get("status", "fail") == "fail"}
    rows = []
    for row in report.get("rows") or []:
        share = row.get("share") or {}
        cells = ["-" if row.get(k) is None else "%s%s" % (row[k], " (%d %%)" % round(100 * share[k]) if k in share else "")
                 for k in ("gemm", "memory", "h2d", "d2h", "clocks")]
        device = burn_in.device_name(row)
        verdict = FAIL if (row.get("node"), row.get("index")) in failed else PASS
        rows.append([row.get("node"), device, row.get("name"), row.get("bus") or "-"] + cells + [(row.get("sha256") or "-")[:12], verdict])
    return {"rows": rows, "findings": report.get("findings") or [], "not_judged": report.get("not_judged") or []}


STATUS: dict[str, Callable[[Any], tuple[str, str | None, str | None]]]
STATUS = {"burn_in": _burn_in_status, "mesh": _matrix_status, "ports": _matrix_status, "drift": _drift_status, "verify": _verdicts_status,
          "torchrun": _verdicts_status, "doctor": _doctor_status}


def _cell_class(text: object) -> str:
    if text == "-":
        return "self"
    return "ok" if str(text).startswith("ok") else "fail"


def matrix_grid(report: dict[str, Any]) -> dict[str, Any]:
    """{headers, rows: [[{text, cls}]]}: the N x N matrix with each cell's class (self, ok, fail)."""
    rows = [[{"text": str(row[0]), "cls": "name"}] + [{"text": str(cell), "cls": _cell_class(cell)} for cell in row[1:]]
            for row in report.get("rows") or []]
    return {"headers": list(report.get("headers") or []), "rows": rows}


def drift_grid(report: dict[str, Any]) -> dict[str, Any]:
    """{hosts, rows: [{key, status, cells: [{text, odd}]}]}: every compared key by node, the odd nodes' cells marked."""
    hosts = list(report.get("hosts") or [])
    rows = []
    for row in report.get("rows") or []:
        odd = set(row.get("odd_hosts") or [])
        if not row.get("consistent") and not odd:
            odd = set(hosts)  # no majority: every value stands out
        rows.append({"key": row["key"], "status": row.get("status"),
                     "cells": [{"text": format_value(row["values"].get(host), "-"), "odd": host in odd} for host in hosts]})
    return {"hosts": hosts, "rows": rows}


def ladder(verdicts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ladder's rungs: {label, verdict, reasons, runs: [{name, verdict, busbw_gbps, limit_gbps, curve}]}."""
    rungs = []
    for verdict in verdicts:
        runs = [{"name": run.get("leader") if len(run.get("hosts") or []) <= 1 else ", ".join(run["hosts"]),
                 "verdict": run.get("verdict"), "busbw_gbps": run.get("busbw_gbps"), "limit_gbps": run.get("limit_gbps"),
                 "curve": run.get("curve") or [], "reasons": run.get("reasons") or []}
                for run in verdict.get("runs") or []]
        reasons = [verdict["skipped"]] if verdict.get("skipped") else [r for run in runs for r in run["reasons"]]
        rungs.append({"label": verdict.get("label"), "verdict": verdict.get("verdict") or MISSING.lower(), "reasons": reasons,
                      "runs": runs})
    return rungs


def _job_status(verdict: str) -> str:
    """A job's verdict (plugin_utils/jobs.status's words) on the page's scale, for its colour: FAIL when a node failed
    or the supervisor stopped the job after a stall; PASS while it runs on every node or once it succeeded; WARN when
    queued in Slurm, running on some nodes only, stalled or restarting (it may yet move); a job a user stopped or one
    that never started has no verdict (NOT RUN). The words are jobs.status's, judged there (jobs.verdict_scale)."""
    return {"fail": FAIL, "pass": PASS, "warn": WARN}.get(verdict_scale(verdict) or "", MISSING)


def _stopped_line(stopped_by: str | None, nodes: dict) -> str | None:
    """What the table shows in place of a stopped node's last line, or None for a node nobody stopped: the last line of a
    part that was stopped is the signal's traceback (torchrun's "SignalException: Process 2 got signal: 15"), which reads
    as a crash; it stays in the node's log. A stop a setting asked for names it (_job_events.BY_SETTING: "stopped by
    train_action=stop"); the others say why ("stopped: left out of a restart")."""
    if not stopped_by:
        return None
    if stopped_by in nodes:
        return "stopped by %s's failure" % stopped_by
    return ("stopped by %s" if stopped_by in BY_SETTING else "stopped: %s") % stopped_by


def _job_rows(report: dict, culprits: set) -> list:
    """The table's rows: [{node, state, step, logged, steps_per_minute, last_line, first_failed, culprit}]; a stopped
    node's last line says how it was stopped (_stopped_line)."""
    rows: list[dict[str, Any]] = []
    nodes = report.get("nodes") or {}
    for node, state, step, *rate, last_line in report.get("rows") or []:
        # A report written before status carried the step's age and rate has 4 columns.
        logged, per_minute = rate or ("-", "-")
        stopped = _stopped_line((nodes.get(node) or {}).get("stopped_by"), nodes)
        rows.append({"node": node, "state": state, "step": step, "logged": logged, "steps_per_minute": per_minute,
                     "last_line": stopped or last_line, "first_failed": node == report.get("first_failed"), "culprit": node in culprits})
    return rows


def _job_origin(points: dict[str, list[Any]], events: list[dict[str, Any]]) -> float | None:
    """Time zero of the job's plot and event list (unix time): its first point on any node, else its first event."""
    firsts = [series[0][0] for series in points.values() if series] or [event["at"] for event in events if event.get("at")]
    return min(firsts, default=None)


def _event_detail(event: dict[str, Any]) -> str:
    """An event's words for the page's event list: the diagnosis's verdict, or what the supervisor saw or did."""
    kind = event.get("event")
    if kind == Event.DIAGNOSIS:
        return event.get("verdict") or ""
    if kind == Event.STALL:
        return "at step %s: no new step for %s s" % (event.get("step"), event.get("idle_seconds"))
    if kind == Event.RESTART:
        return "attempt %s of %s" % (event.get("attempt"), event.get("limit"))
    if kind == Event.RESTART_LIMIT:
        return "%s of %s restarts made" % (event.get("restarts"), event.get("limit"))
    if kind == Event.SLOW:
        return event.get("text") or ""
    if kind == Event.SPARE_JOINED:
        return "%s in place of %s" % (event.get("node"), event.get("replaces"))
    if kind == Event.SCALE:
        return "%s nodes: %s" % (event.get("world"), event.get("error") or "%s steps/s" % event.get("steps_per_second"))
    return event.get("why") or ""


def _event_mark(event: dict[str, Any]) -> str | None:
    """The step plot's label for an event drawn as a vertical line there, or None for one it does not show."""
    if event.get("event") == Event.STALL:
        return str(Event.STALL)
    if event.get("event") == Event.RESTART:
        return "%s %s" % (Event.RESTART, event.get("attempt"))
    return None


def _job_progress(points: dict[str, list[Any]], events: list[dict[str, Any]], origin: float) -> dict[str, Any] | None:
    """The step plot's data: {nodes: [[node, [[seconds, step]]]], marks: [[seconds, label]]}, seconds since origin; None
    when no node has a point (only rank 0 prints steps: often only the first node has any)."""
    nodes = [[node, [[round(at - origin, 3), step] for at, step, _loss in series]] for node, series in points.items() if series]
    if not nodes:
        return None
    marks = [[round(event["at"] - origin, 3), _event_mark(event)] for event in events if _event_mark(event) and event.get("at")]
    return {"nodes": nodes, "marks": marks}


def _job_perf(report: dict[str, Any], origin: float) -> list[list[Any]]:
    """Where each node's ranks spent their time, window by window: [[node, [[seconds, busy %, waiting in collectives %
    or None, GPU utilization % or None]]]] (seconds since origin), the nodes with a window; [] without."""
    out = []
    for node, seen in (report.get("nodes") or {}).items():
        points = [[round(p["at"] - origin, 1), _percent(p.get("busy")), _percent(p.get("wait")), p.get("gpu")]
                  for p in seen.get("perf") or [] if p.get("at") is not None]
        if points:
            out.append([node, points])
    return out


def _percent(share: float | None) -> float | None:
    return None if share is None else round(100 * share, 1)


def _job_losses(points: dict[str, list[Any]]) -> list[list[Any]]:
    """[[step, loss]] of the node with the most points (the one that prints the loss), steps without a loss left out."""
    longest = max(points.values(), key=len, default=[])
    return [[step, loss] for _at, step, loss in longest if loss is not None]


def _job_diagnosis(report: dict[str, Any], events: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The last stall's {text, culprits: [{rank, node, why}], odd: ["rank R (node)" or "node" per culprit that names
    one]}, or None when the job has not stalled. A culprit without rank or node (a rank missing everywhere) is named
    only in the text."""
    if not report.get("diagnosis"):
        return None
    last: dict[str, Any] = next((event for event in reversed(events) if event.get("event") == Event.DIAGNOSIS), {})
    culprits = last.get("culprits") or []
    odd = [("rank %s (%s)" % (c["rank"], c.get("node"))) if c.get("rank") is not None else c["node"] for c in culprits
           if c.get("rank") is not None or c.get("node")]
    return {"text": report["diagnosis"], "culprits": culprits, "odd": odd}


def _job(name: str, report: dict[str, Any], made: str | None) -> dict[str, Any]:
    events = report.get("events") or []
    points = {node: seen.get("points") or [] for node, seen in (report.get("nodes") or {}).items()}
    diagnosis = _job_diagnosis(report, events)
    windows = [p["at"] for seen in (report.get("nodes") or {}).values() for p in seen.get("perf") or [] if p.get("at")]
    origin = _job_origin(points, events) or min(windows, default=None)
    return {"name": name, "verdict": report.get("verdict"), "status": _job_status(report.get("verdict") or ""),
            "first_failed": report.get("first_failed"), "made": made, "stall_seconds": report.get("stall_seconds"),
            "note": report.get("note"),
            "rows": _job_rows(report, {c["node"] for c in (diagnosis or {}).get("culprits", []) if c.get("node")}),
            "diagnosis": diagnosis,
            "events": [{"seconds": round(event["at"] - origin, 1) if event.get("at") else None, "event": event.get("event"),
                        "detail": _event_detail(event)} for event in events],
            "progress": _job_progress(points, events, origin) if origin is not None else None, "losses": _job_losses(points),
            "perf": _job_perf(report, origin) if origin is not None else [],
            "scale_rows": report.get("scale_rows") or [], "scale": report.get("scale") or [],
            "scale_notes": report.get("scale_notes") or [], "data": _job_data(report)}


def _job_data(report: dict[str, Any]) -> list[str]:
    """What status says of the job's data path and its starts: each node's stage (staged bytes, copied at what rate),
    the restarts (their world, a checkpoint converted, the batch kept), the saves' share of the time."""
    return [line for line in [report.get("staged"), report.get("starts_text")] + list((report.get("saves") or {}).get("said") or []) if line]


def jobs(reports: dict[str, Any], made: dict[str, str]) -> list[dict[str, Any]]:
    """The training jobs of playbooks/train.yml, each as its last status report says (train-<job>.json, written by
    roles/train from plugin_utils/jobs.status at every start, status and stop).

    reports: {job: that report}; made: {job: when it was written (text)}. Returns, in the order of reports,
    [{name, verdict, status (_job_status), first_failed, made, stall_seconds, note (the supervisor's, e.g. progress unknown),
      rows: [{node, state, step, logged, steps_per_minute, last_line, first_failed, culprit (named by the diagnosis)}],
      diagnosis: {text, culprits: [{rank, node, why}], odd: [who each culprit is]} or None,
      events: [{seconds (since the job's first point, else its first event), event, detail}],
      progress: {nodes: [[node, [[seconds, step]]]], marks: [[seconds, "stall" | "restart N"]]} or None without points,
      losses: [[step, loss]], perf: where each node's ranks spent their time over the windows (_job_perf),
      scale_rows: train_action=scale's table, as status shows it, scale: its sizes (jobs.scale_table),
      scale_notes: what held each size back ([] for another job), data: its stage, restarts and saves (_job_data)}].
    """
    return [_job(name, report, made.get(name)) for name, report in reports.items()]


def page(reports: dict[str, Any], made: dict[str, str], job_reports: dict[str, Any] | None = None,
         job_made: dict[str, str] | None = None) -> dict[str, Any]:
    """Everything the page shows. reports: {stage key: parsed JSON, or None where the stage has no report};
    made: {stage key: when its report was written (text)}; job_reports, job_made: the same of the training jobs (jobs()).

    Returns {verdict: {status, stage, culprit, reason}, stages: [{key, title, status, culprit, reason, made}],
    mesh, ports (matrix_grid), drift (drift_grid), burn_in (burn_in_table), acceptance (the record as written, or
    None), ladder (ladder()), torchrun (its verdicts), doctor (findings),
    jobs (jobs())}.
    The verdict is the first failing stage in bring-up order; else NOT JUDGED when a stage could not be judged; PASS
    only when at least one stage reported and none failed; stages that never ran are listed as NOT RUN. A training job
    is no bring-up stage: a failed job says so in its own section and leaves the verdict to the stages.
    """
    stages: list[dict[str, Any]] = []
    for key, _file, title in STAGES:
        report = reports.get(key)
        status, culprit, reason = STATUS[key](report) if report is not None else (MISSING, None, None)
        stages.append({"key": key, "title": title, "status": status, "culprit": culprit, "reason": reason, "made": made.get(key)})
    ran = [stage for stage in stages if stage["status"] != MISSING]
    first = next((stage for stage in ran if stage["status"] == FAIL), None) or next(
        (stage for stage in ran if stage["status"] == NOT_JUDGED), None)
    if first:
        verdict = {"status": first["status"], "stage": first["title"], "culprit": first["culprit"], "reason": first["reason"]}
    else:
        skipped = next((stage for stage in stages if stage["reason"]), None)
        verdict = {"status": PASS if ran else MISSING, "stage": None if ran or not skipped else skipped["title"], "culprit": None,
                   "reason": None if ran else skipped["reason"] if skipped else "no stage has written a report yet"}
    get: Callable[[str], Any] = reports.get
    return {
        "verdict": verdict,
        "stages": stages,
        "mesh": matrix_grid(get("mesh")) if get("mesh") else None,
        "ports": matrix_grid(get("ports")) if get("ports") else None,
        "drift": drift_grid(get("drift")) if get("drift") else None,
        "burn_in": burn_in_table(get("burn_in")) if get("burn_in") else None,
        "acceptance": get("acceptance"),
        "ladder": ladder(get("verify")) if get("verify") else None,
        "torchrun": get("torchrun"),
        "doctor": (get("doctor") or {}).get("findings"),
        "jobs": jobs(job_reports or {}, job_made or {}),
    }
