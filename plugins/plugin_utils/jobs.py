# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Training jobs of playbooks/train.yml: the pre-flight's findings, and a job's status across nodes from every node's
report (the node program, roles/train/files/trainops_job, says how its part stands; this judges the job)."""

from __future__ import annotations

from typing import Any

from ansible_collections.trainops.cluster.plugins.module_utils import _oom as oom
from ansible_collections.trainops.cluster.plugins.module_utils._job_events import Event, Watch, Word
from ansible_collections.trainops.cluster.plugins.module_utils._perf_classes import HEALTHY, NOT_JUDGED, UNEXPLAINED, UNEXPLAINED_EFFICIENCY
from ansible_collections.trainops.cluster.plugins.module_utils.torchrun import first_failed, read_env_b64
from ansible_collections.trainops.cluster.plugins.plugin_utils import job_bandwidth, job_saves, job_stage, nccl_use
from ansible_collections.trainops.cluster.plugins.plugin_utils.torchrun_verdict import launch_reasons


class Verdict(Word):
    """The first words of a job's verdict (status()'s "verdict"): the rest says on which nodes, why, or what held it back."""

    NO_SUCH_JOB = "no such job"
    FAILED = "failed"
    QUEUED = "queued in Slurm"
    RESTARTING = "restarting"
    STALLED = Watch.STALLED.value
    RUNNING_ON = "running on"
    RUNNING_SLOW = "running, slow"
    PARTLY_RUNNING = "partly running"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    # train_action=scale's, every size measured (or not all of them).
    SCALED = "scaled"
    SCALED_IN_PART = "scaled in part"
    STOPPED_AFTER_STALL = "stopped after a stall"
    STOPPED = "stopped"


# A node that gave no report of this start: its program not installed, or its part of an earlier start.
NO_PART = "no part of this start"
UNREACHABLE = "unreachable from the controller: no report"
# A node's state as the controller sees it beside its report: Slurm has not started the batch job; a restart went on
# without it (the rest of the state says why).
QUEUED_STATE = "queued: "
LEFT_OUT_STATE = "left out: "


def preflight(nodes: list[str], launch_env_b64: dict[str, str | None], master: str, matrix: dict[str, Any] | None,
              listeners: dict[str, list[dict[str, Any]] | None], writes: dict[str, dict[str, Any] | None], seen: list[str],
              jobs_dir: str, master_node: str | None = None) -> list[str]:
    """What would make the job hang, before anything starts: [finding], each naming the node.

    nodes: the inventory order; launch_env_b64: {node: launch.env as slurp's base64, or None}; master: "addr:port";
    matrix: the port matrix of the master port (reachability.summarize); listeners: {node: port_matrix listeners};
    writes: {node: the copy task's result}; seen: file names the first node found in jobs_dir; master_node: the node
    that serves the master port (cluster_master), None for the first node.
    """
    findings: list[str] = []
    launches: dict[str, dict[str, str]] = {}
    for node in nodes:
        text = launch_env_b64.get(node)
        if text is None:
            findings.append("%s: no launch environment (run site.yml --tags launch)" % node)
        else:
            launches[node] = read_env_b64(text)
    findings += launch_reasons(launches, nodes, master)
    port = int(master.rsplit(":", 1)[1])
    master_node = master_node or nodes[0]
    busy = [entry for entry in (listeners.get(master_node) or []) if int(entry.get("port", 0)) == port and entry.get("state") == "served"]
    if busy:
        findings.append("%s: the master port %d is in use (another program listens there; a job still running?)" % (master_node, port))
    findings += ["master port: %s" % message for message in (matrix or {}).get("messages", [])
                 if "-> %s " % master_node in message]
    for node in nodes:
        write = writes.get(node) or {}
        # The task does not fail (failed_when: false, so every node is checked): a write that worked names its dest.
        if "dest" not in write:
            findings.append("%s: cannot write to %s as the training user: %s" % (node, jobs_dir, write.get("msg", "failed")))
        elif ".preflight-%s" % node not in seen:
            findings.append("%s: wrote to %s, but %s does not see the file: not the same shared storage" % (node, jobs_dir, nodes[0]))
    return findings


def progress_of(progress: dict[str, Any] | None, now: float) -> dict[str, Any]:
    """What a node's progress record says: {step, logged_seconds_ago, steps_per_minute (over the last minute of steps
    seen, else the last two)}; Nones where it has none. now: the node's clock, as its report gives it."""
    points = (progress or {}).get("points") or []
    if progress is None or not points:
        return {"step": None, "logged_seconds_ago": None, "steps_per_minute": None}
    recent = [p for p in points if p[0] >= points[-1][0] - 60] or points[-2:]
    recent = recent if len(recent) > 1 else points[-2:]
    span = recent[-1][0] - recent[0][0]
    rate = round(60.0 * (recent[-1][1] - recent[0][1]) / span, 1) if len(recent) > 1 and span > 0 else None
    return {"step": progress.get("step"), "logged_seconds_ago": round(max(0.0, now - progress["step_at"]), 1), "steps_per_minute": rate}


# How a verdict stands, by its first words (the report page colours a job by it): failed, or stopped by the supervisor
# after a stall; well (running on every node, or succeeded); under way but not well (queued, running on some nodes or
# in a spare's place, stalled, restarting). Any other verdict (stopped by a user, no such job) is not judged.
VERDICT_FAILED = (Verdict.FAILED, Verdict.STOPPED_AFTER_STALL)
VERDICT_WELL = (Verdict.RUNNING, Verdict.SUCCEEDED, Verdict.SCALED)
VERDICT_UNDER_WAY = (Verdict.PARTLY_RUNNING, Verdict.RUNNING_ON, Verdict.RUNNING_SLOW, Verdict.QUEUED, Verdict.STALLED,
                     Verdict.RESTARTING, Verdict.SCALED_IN_PART)


def verdict_scale(verdict: str) -> str | None:
    """"fail", "pass" or "warn" for a verdict of status(), None for one that judges nothing."""
    if verdict.startswith(VERDICT_FAILED):
        return "fail"
    if verdict in VERDICT_WELL or verdict.startswith(Verdict.SCALED + ":"):
        return "pass"
    return "warn" if verdict.startswith(VERDICT_UNDER_WAY) else None


def _unexplained(bound: dict | None, efficiency: float | None) -> dict | None:
    """A healthy size's bound, unless its efficiency says otherwise (a size judged healthy whose nodes each add less than
    UNEXPLAINED_EFFICIENCY of the smallest size's throughput: something the classes do not see holds it back): then
    what to look at."""
    if (bound or {}).get("kind") != HEALTHY.name or efficiency is None or efficiency >= UNEXPLAINED_EFFICIENCY:
        return bound
    return {"kind": UNEXPLAINED.name, "node": None, "text": "%s: %s, yet each node added %d %% of the smallest size's throughput: %s" % (
        UNEXPLAINED.name, UNEXPLAINED.doing, round(100 * efficiency), UNEXPLAINED.advice)}


def scale_table(events: list) -> list:
    """train_action=scale's sizes as the supervisor measured them: [{world, nodes, steps_per_second, speedup, efficiency,
    error, bound (what held the size back: judge.bottleneck's kind, node and text, "healthy", "unexplained" (healthy at
    an efficiency below UNEXPLAINED_EFFICIENCY), or None: not judged),
    samples_per_second}], against the smallest size measured. Data parallel: every node does the same work in a step, so a step of k
    nodes does k nodes' work, and speedup = k * rate_k / (m * rate_m) for the smallest size m, efficiency = speedup * m / k
    (1.0: each added node adds a whole node's throughput)."""
    found = [e for e in events if e.get("event") == Event.SCALE]
    base = next((e for e in found if e.get("steps_per_second")), None)
    rows = []
    for event in found:
        rate = event.get("steps_per_second")
        ratio = event["world"] * rate / (base["world"] * base["steps_per_second"]) if base and rate is not None else None
        speedup = round(ratio, 2) if ratio is not None else None
        efficiency = round(ratio * base["world"] / event["world"], 3) if ratio is not None and base else None
        rows.append({"world": event["world"], "nodes": event.get("nodes") or [], "steps_per_second": rate, "speedup": speedup,
                     "efficiency": efficiency, "error": event.get("error"), "bound": _unexplained(event.get("bound"), efficiency),
                     "samples_per_second": _samples(event)})
    return rows


def _samples(event: dict) -> float | None:
    """A size's samples per second: steps per second x each rank's samples per step x the ranks its runners counted."""
    rate, batch, ranks = event.get("steps_per_second"), event.get("samples_per_rank"), event.get("ranks")
    return round(rate * int(batch) * ranks, 2) if rate and batch and ranks else None


def bound_word(bound: dict | None) -> str:
    """A size's class in a word or two: "communication-bound (node2)", "straggler (node3)", "healthy", "not judged"."""
    if not bound:
        return NOT_JUDGED
    return "%s (%s)" % (bound["kind"], bound["node"]) if bound.get("node") else bound["kind"]


def scale_rows(rows: list) -> list:
    """The table status shows: [[nodes, their names, steps/s, samples/s, speedup, efficiency, what bounds it, not measured
    because]]."""
    return [[str(r["world"]), ", ".join(r["nodes"]), "-" if r["steps_per_second"] is None else "%.3g" % r["steps_per_second"],
             "%.4g" % r["samples_per_second"] if r.get("samples_per_second") else "-",
             "-" if r["speedup"] is None else "%sx" % r["speedup"], "-" if r["efficiency"] is None else "%d %%" % round(100 * r["efficiency"]),
             "-" if r["error"] else bound_word(r.get("bound")), r["error"] or ""] for r in rows]


def scale_notes(rows: list) -> list:
    """What held each size back, in full, for the sizes where something did: ["3 nodes: communication-bound: ..."]."""
    return ["%d node%s: %s" % (r["world"], "s" if r["world"] > 1 else "", r["bound"]["text"]) for r in rows
            if (r.get("bound") or {}).get("kind", HEALTHY.name) != HEALTHY.name]


def _bound_said(row: dict) -> str:
    """What held a size back, where something did (a healthy or unjudged size adds nothing to the line)."""
    bound = row.get("bound") or {}
    return ", " + bound_word(bound) if bound.get("kind", HEALTHY.name) != HEALTHY.name else ""


def scale_text(rows: list) -> str:
    """"scaled: 2 nodes 1.8x 1 node (90 %), 3 nodes 2.1x (70 %)", with a size that was not measured named and why."""
    measured = [r for r in rows if r["speedup"]]
    base = measured[0]["world"] if measured else None
    against = " %d node%s" % (base, "s" if base > 1 else "") if base is not None else ""
    parts = ["%d node%s %sx%s (%d %%%s)" % (r["world"], "s" if r["world"] > 1 else "", r["speedup"], against if i == 1 else "",
                                            round(100 * r["efficiency"]), _bound_said(r)) for i, r in enumerate(measured) if i]
    missed = ["%d nodes not measured: %s" % (r["world"], r["error"]) for r in rows if r["error"]]
    return "%s: %s" % (Verdict.SCALED_IN_PART if missed else Verdict.SCALED, "; ".join([", ".join(parts) or "one size measured"] + missed))


def _verdict(record: dict | None, per_node: dict, first: str | None, supervisor: dict, events: list, unsupervised: str | None = None) -> str:
    """The job's word from its nodes' parts; per_node leaves out the spares that no restart brought in."""
    states = {node: seen["state"] for node, seen in per_node.items()}
    running = [n for n, seen in per_node.items() if seen["running"]]
    queued = next((s for s in states.values() if s.startswith(QUEUED_STATE)), None)
    if record is None:
        return Verdict.NO_SUCH_JOB
    # The supervisor's guard ended the job instead of restarting it (crash loop, restart limit, too few nodes).
    # Or no restart can come: the supervisor's node is gone while parts wait for its word, or ended without it.
    guard = next((e.get("why") for e in reversed(events) if e.get("event") == Event.STOP and e.get("guard")), None) or unsupervised
    if first or unsupervised:
        # Why the first failed, where its state says the kernel killed a process of it for memory (its exit record's OOM kills).
        killed = next((part for part in (per_node.get(first) or {}).get("state", "").split("; ") if part.startswith(oom.KILLED)), None)
        return ("%s: %s failed first" % (Verdict.FAILED, first) if first else Verdict.FAILED) + (" (%s)" % killed if killed else "") + (
            "; not restarted: %s" % guard if guard else "")
    if queued:
        return "%s (%s)" % (Verdict.QUEUED, queued[len(QUEUED_STATE):])
    waiting = [n for n, seen in per_node.items() if seen["restarting"]]
    if waiting:
        return "%s: %s wait for the supervisor's restart" % (Verdict.RESTARTING, ", ".join(waiting))
    if running and supervisor.get("state") == Watch.STALLED:
        return "%s: no node logged a new step for %s s" % (Verdict.STALLED, supervisor.get("stall_seconds"))
    restart = next((e for e in reversed(events) if e.get("event") == Event.RESTART), None)
    if running and restart and not any(p[0] > restart.get("at", 0) for seen in per_node.values() for p in seen["points"]):
        # Its parts run again, but training has not: the rendezvous, the checkpoint's load.
        return "%s: attempt %s on %s, no step logged yet" % (Verdict.RESTARTING, restart.get("attempt"), ", ".join(running))
    if running and len(running) < len(states) and all(states[n].startswith(LEFT_OUT_STATE) for n in states if n not in running):
        out = [n for n in states if n not in running]
        joined = {e["node"]: e["replaces"] for e in events if e.get("event") == Event.SPARE_JOINED and e["node"] in running}
        rest = [n for n in out if n not in joined.values()]
        if joined:
            spares = ", ".join("%s (a spare) in place of %s" % item for item in joined.items())
            return "%s %d nodes: %s%s" % (Verdict.RUNNING_ON, len(running), spares, "; %s left out" % ", ".join(rest) if rest else "")
        return "%s %d of %d nodes (%s left out)" % (Verdict.RUNNING_ON, len(running), len(states), ", ".join(out))
    if running and len(running) == len(states) and supervisor.get("slow"):
        return "%s: %s" % (Verdict.RUNNING_SLOW, supervisor["slow"]["text"])
    if running:
        return Verdict.RUNNING if len(running) == len(states) else "%s: %s" % (Verdict.PARTLY_RUNNING, ", ".join(n for n in states if n not in running))
    if all(seen["rc"] == 0 and not seen["stopped_by"] for seen in per_node.values()):
        return Verdict.SUCCEEDED
    if any(e.get("event") == Event.SCALED for e in events):
        return scale_text(scale_table(events))
    if any(e.get("event") == Event.STOP for e in events):
        return "%s (train_on_stall)" % Verdict.STOPPED_AFTER_STALL + (": %s" % guard if guard else "")
    return Verdict.STOPPED


def _held_to_ladder(slow: dict, ladder: list | None, reports: dict) -> dict:
    """The slow verdict, a communication-bound one ending with the job's bytes against the ladder's busbw on the nodes
    it runs on now (job_bandwidth; a restart on fewer nodes has no run to compare with), counted where they pass: the
    training interface where every node's NCCL went over sockets, or for a job without GPUs (Gloo's TCP); the nodes'
    RDMA port counters where every node's NCCL went over InfiniBand or a net plugin. Not where NCCL's choice is unknown
    (train_nccl_debug null) or mixed. Where the job timed NCCL's collectives, the busbw they reached, whatever the
    network."""
    if slow.get("nccl"):
        return dict(slow, text=slow["text"] + job_bandwidth.against_ladder(slow, job_bandwidth.ladder_rung(ladder, list(slow.get("shares") or {}))))
    said = [nccl for nccl in ((r.get("progress") or {}).get("nccl") for r in reports.values()) if nccl]
    gpus = any(p.get("gpu") is not None for r in reports.values() for p in r.get("perf") or [])
    if said and all(nccl_use.over_sockets(nccl) for nccl in said) or not said and not gpus:
        counted = slow.get("net")
    elif said and not any(nccl_use.over_sockets(nccl) for nccl in said):
        counted = slow.get("rdma")
    else:
        return slow
    rung = job_bandwidth.ladder_rung(ladder, list(counted or {}))
    return dict(slow, text=slow["text"] + job_bandwidth.against_ladder(dict(slow, net=counted), rung))


def status(nodes: list, reports: dict, addresses: dict, queue: dict | None = None, unreachable: list | None = None,
           ladder: list | None = None) -> dict:
    """One row per node and the job's verdict, from every node's report (trainops-job report: the node says how its
    part stands; the first node's also carries the job record and the supervisor's view).

    reports: {node: its report, or None where it gave none}; addresses: {node: cluster_ip}; queue: the Slurm batch job's
    state ({SlurmState, SlurmReason}) where Slurm runs the job, else None; unreachable: the nodes the controller could
    not reach; ladder: the ladder's steps (verify.json), whose busbw on the job's nodes a communication-bound verdict is held
    against (job_bandwidth). Returns {rows: [[node, state, step, logged, steps/min, last line]], nodes: {node: {state, running,
    standby (a spare no restart brought in: shown, not judged), active (running or queued), failed, rc, stopped_by, ended,
    not_restarted, log (its path), step, logged_seconds_ago, steps_per_minute, points}}, verdict (its first words a Verdict),
    found (a job of that name), stalled (the verdict is), first_failed,
    stall_seconds, note (the supervisor's, e.g. progress unknown), events (this start's), diagnosis (the last stall's
    verdict), starts ([{attempt, nodes, why}]: the start and every
    restart on the cluster, each with its nodes), slow (what holds the job back, judge.bottleneck, or None), scale,
    scale_rows and scale_notes (train_action=scale's sizes: scale_table, as status shows them, and what held each
    back), records ({name: kind} of the job's records, its folder's files that collect copies), dir (the job's folder),
    findings (what is wrong with how it runs though it runs: NCCL over sockets despite RDMA, nccl_use; a node's log saying
    "No space left on device", the saves' share of the time and the checkpoint storage's end, job_saves), saves (the
    checkpoints' figures, job_saves.saves), staged (what the stage did on each node, job_stage.said, or None); a node's nccl:
    what its ranks' NCCL used (nccl_use.said), its perf: its ranks' windows in brief over time ([{at, busy, wait, gpu,
    tx}], the node program's perf.history_point)}.
    """
    # The job's record and its supervisor's view, as the first node tells them (or any node, where it is gone).
    head = next((r for r in (reports.get(n) for n in nodes) if r and r.get("job")), None) or {}
    record = head.get("job")
    run_id = (record or {}).get("run_id")
    supervisor = dict(head.get("supervisor") or {})
    events = [e for e in (record or {}).get("events") or [] if e.get("run_id") == run_id]
    # Nodes a restart went on without (they did not answer): gone, or back with no part of this start.
    left = {e["node"]: e.get("why") for e in events if e.get("event") == Event.LEFT_OUT}
    # Spares (group cluster_spare) that no restart brought in stand by, or ended so: shown, not judged.
    joined = {e["node"] for e in events if e.get("event") == Event.SPARE_JOINED}
    spares = [n for n in (record or {}).get("spares") or [] if n not in joined]
    per_node, rows, logs = {}, [], {}
    for node in nodes:
        report = reports.get(node) or {}
        if report.get("run_id") != run_id:
            report = {}  # no part of this start on that node (yet): an earlier start's, or none
        state = report.get("state") or (UNREACHABLE if node in (unreachable or []) else NO_PART)
        if node in left and not report.get("running"):
            state = LEFT_OUT_STATE + str(left[node])
        if (queue or {}).get("SlurmState") == "PENDING" and not report.get("ended"):
            state = QUEUED_STATE + ((queue or {}).get("SlurmReason") or "waiting")
        logs[node] = report.get("log") or []
        seen = progress_of(report.get("progress"), report.get("now") or 0.0)
        standby = node in spares and (not report or bool(report.get("standby")))
        per_node[node] = dict(seen, state=state, running=bool(report.get("running")), standby=standby, active=bool(report.get("running")) or
                              state.startswith(QUEUED_STATE), failed=bool(report.get("failed")), restarting=bool(report.get("restarting")),
                              rc=report.get("rc"), stopped_by=report.get("stopped_by"), ended=report.get("ended"), log=report.get("log_path"),
                              not_restarted=report.get("not_restarted"), nccl=nccl_use.said((report.get("progress") or {}).get("nccl")),
                              perf=report.get("perf") or [],
                              points=(report.get("progress") or {}).get("points") or [])
        rows.append([node, state] + ["-" if seen[key] is None else str(seen[key]) + unit for key, unit in
                                     (("step", ""), ("logged_seconds_ago", " s ago"), ("steps_per_minute", ""))]
                    + [logs[node][-1] if logs[node] else "-"])
    first = first_failed([n for n, seen in per_node.items() if seen["failed"]], logs, addresses,
                         {n: seen["ended"] for n, seen in per_node.items()})
    # A node the supervisor found lost (powered off: it wrote nothing) failed first, not a survivor whose ranks failed
    # because it went away; said while nothing runs again, and only where no restart followed (a restart that went on
    # without it, stopped later by a user, is no failure of the job).
    last = next((e for e in reversed(events) if e.get("event") in (Event.FAILURE, Event.RESTART)), None)
    if last and last.get("event") == Event.FAILURE and last.get("lost") and not any(seen["running"] for seen in per_node.values()):
        first = last["first"]
    diagnosis = next((e["verdict"] for e in reversed(events) if e.get("event") == Event.DIAGNOSIS), None)
    # The supervisor's node: the first, or the one that took the supervision when its holder went silent (succession).
    note, unsupervised, holder = supervisor.get("note"), None, supervisor.get("holder") or nodes[0]
    if record is not None and not reports.get(holder):
        note = ("%s gave no report: the job's supervisor runs there; another node takes the supervision once it has been "
                "silent for train_supervisor_silence" % holder)
        if any(seen["restarting"] or seen["not_restarted"] for seen in per_node.values()):
            unsupervised = "%s, where the supervisor runs, gave no report" % holder
    found, scaled = starts(record, events), scale_table(events)
    judged = {node: seen for node, seen in per_node.items() if not seen["standby"]}
    ours = {n: r for n, r in reports.items() if r and r.get("run_id") == run_id}
    if supervisor.get("slow"):
        supervisor["slow"] = _held_to_ladder(supervisor["slow"], ladder, ours)
    # A plain str: Ansible stores only its own types, and the word of a Verdict is a str already.
    verdict = str(_verdict(record, judged, first, supervisor, events, unsupervised))
    staged = job_stage.said({n: r.get("stage") for n, r in ours.items()})
    saved = job_saves.saves(next((r["checkpoints"] for r in ours.values() if r.get("checkpoints")), None))  # the supervising node's
    return {"rows": rows, "nodes": per_node, "verdict": verdict, "found": record is not None, "stalled": verdict.startswith(Verdict.STALLED),
            "first_failed": first, "findings": nccl_use.findings(ours) + job_saves.no_space(logs) + saved["said"], "saves": saved,
            "stall_seconds": supervisor.get("stall_seconds"), "slow": supervisor.get("slow"), "note": note, "events": events,
            "diagnosis": diagnosis,
            "starts": found, "starts_text": starts_text(found), "scale": scaled, "scale_rows": scale_rows(scaled), "scale_notes": scale_notes(scaled),
            "records": head.get("records") or {}, "dir": head.get("dir"), "staged": staged}


def batch_said(steps: int, change: float) -> str:
    """A restart's batch where train_keep_global_batch holds it: "accumulation 12: the global batch kept", or "accumulation
    11: the global batch 8 % smaller" where the nodes left do not divide it."""
    if not change:
        return "accumulation %d: the global batch kept" % steps
    return "accumulation %d: the global batch %d %% %s" % (steps, round(abs(change) * 100), "smaller" if change < 0 else "larger")


def starts_text(found: list) -> str | None:
    """"restarted 2 times: on 3 nodes, then 3 (node2 failed), then 2 (a stall at step 40; checkpoint-40 converted to
    DeepSpeed's universal checkpoint in 12.7 s; accumulation 12: the global batch kept)", where it was restarted."""
    if len(found) < 2:
        return None
    return "restarted %d time%s: on %d nodes, then %s" % (
        len(found) - 1, "" if len(found) == 2 else "s", len(found[0]["nodes"]),
        ", then ".join("%d (%s)" % (len(s["nodes"]), "; ".join([str(s["why"])] + [s[k] for k in ("converted", "batch") if s.get(k)]))
                       for s in found[1:]))


def starts(record: dict | None, events: list) -> list:
    """Each start of the job's command, with its nodes (its world size): the first, then every restart's, with its batch
    where train_keep_global_batch kept it (batch_said) and its checkpoint's conversion where it was converted."""
    if record is None:
        return []
    found = [{"attempt": 0, "nodes": record.get("nodes") or [], "why": "start"}]
    for event in (e for e in events if e.get("event") == Event.RESTART):
        found.append({"attempt": event.get("attempt"), "nodes": event.get("nodes") or found[-1]["nodes"], "why": event.get("why")})
        if event.get("accumulation"):
            found[-1]["batch"] = batch_said(event["accumulation"], event.get("batch_change") or 0.0)
        if event.get("converted"):
            found[-1]["converted"] = event["converted"]
    return found
