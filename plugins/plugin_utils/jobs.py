# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Training jobs of playbooks/train.yml: the pre-flight's findings, and a job's status from every node's records."""

from __future__ import annotations

import json
import re

from ansible_collections.trainops.cluster.plugins.module_utils.torchrun import parse_output, read_env_b64
from ansible_collections.trainops.cluster.plugins.plugin_utils.torchrun_verdict import launch_reasons

# The exit record's stopped_by of a part that train_action=stop ended (trainops-job's USER_STOP): not a node's name.
USER_STOP = "train_action=stop"
# ... and of a part that the supervisor ended after a stall (trainops-watch's STALL_STOP).
STALL_STOP = "train_on_stall=stop"
# A step counter as training scripts print it: train_ddp.py's records, "step 12", "global_step=12", tqdm's "12/100 [".
# Gloo's word for a peer that went away: names the peer's address.
_PEER_GONE_RE = re.compile(r'(?:closed by peer|Connection reset by peer) \[([0-9a-fA-F.:]+)\]')


def preflight(nodes, launch_env_b64, master, matrix, listeners, writes, seen, jobs_dir, master_node=None):
    """What would make the job hang, before anything starts: [finding], each naming the node.

    nodes: the inventory order; launch_env_b64: {node: launch.env as slurp's base64, or None}; master: "addr:port";
    matrix: the port matrix of the master port (reachability.summarize); listeners: {node: port_matrix listeners};
    writes: {node: the copy task's result}; seen: file names the first node found in jobs_dir; master_node: the node
    that serves the master port (cluster_master), None for the first node.
    """
    findings, launches = [], {}
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


def progress_of(progress, now):
    """What a node's progress record (NODE.progress.json, kept by trainops-watch) says: {step, logged_seconds_ago,
    steps_per_minute (over the last minute of steps seen, else the last two)}; Nones where it has none."""
    points = (progress or {}).get("points") or []
    if not points:
        return {"step": None, "logged_seconds_ago": None, "steps_per_minute": None}
    recent = [p for p in points if p[0] >= points[-1][0] - 60] or points[-2:]
    recent = recent if len(recent) > 1 else points[-2:]
    span = recent[-1][0] - recent[0][0]
    rate = round(60.0 * (recent[-1][1] - recent[0][1]) / span, 1) if len(recent) > 1 and span > 0 else None
    return {"step": progress.get("step"), "logged_seconds_ago": round(max(0.0, now - progress["step_at"]), 1), "steps_per_minute": rate}


def _exit_record(text):
    try:
        record = json.loads(text) if text else None
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def first_failed(failed, logs, addresses, ended):
    """Of the nodes whose part failed on its own, the one that failed first.

    A node whose log says a rank died of a signal comes first; then a node that the others' logs name as the peer
    that went away; then the one that ended first. Exit times alone mislead: the rank whose node lost a rank fails at
    once, while torchrun's agent on the node of the dead rank notices it up to 5 s later.
    """
    if not failed:
        return None
    by_address = {address: node for node, address in addresses.items()}
    killed = [n for n in failed if any(f["signal"] or (f["exitcode"] or 0) < 0 for f in parse_output("\n".join(logs.get(n) or []))["failures"])]
    blamed = [by_address[a] for n in addresses for line in (logs.get(n) or []) for a in _PEER_GONE_RE.findall(line) if a in by_address]
    # Equal end times (or none recorded) fall back to rank order, so the same logs always name the same node.
    order = {node: index for index, node in enumerate(addresses)}
    for candidates in (killed, [n for n in blamed if n in failed], blamed, failed):
        if candidates:
            return sorted(set(candidates), key=lambda n: (ended.get(n) or "", order.get(n, len(order))))[0]
    return None


def status(nodes, units, exits, logs, record, addresses, progress=None, watch=None, now=0.0):
    """One row per node and the job's verdict.

    units: {node: the unit's properties (systemd_service's status, trainops-job state where there is no systemd, or
    the Slurm batch job's state, with SlurmJobId, for every node)};
    exits: {node: NODE.exit text or None}; logs: {node: [last lines]}; record: the job record (job.json) or None;
    addresses: {node: cluster_ip}; progress: {node: NODE.progress.json or None}; watch: the supervisor's view
    (watch.json) or None; now: seconds since the epoch. Returns {rows: [[node, state, step, logged, steps/min, last
    line]], nodes: {node: {state, rc, stopped_by, ended, step, logged_seconds_ago, steps_per_minute, points}}, verdict,
    first_failed, stall_seconds, events (this start's, from the supervisor), diagnosis (the last stall's verdict)}.
    """
    run_id = (record or {}).get("run_id")
    progress = {n: p for n, p in (progress or {}).items() if p and p.get("run_id") == run_id}
    watch = watch if watch and watch.get("run_id") == run_id else {}
    events = [e for e in (record or {}).get("events") or [] if e.get("run_id") == run_id]
    per_node, rows = {}, []
    for node in nodes:
        unit = units.get(node) or {}
        exit_ = _exit_record(exits.get(node))
        if exit_ is not None and record is not None and exit_.get("run_id") != record.get("run_id"):
            exit_ = None  # a record of an earlier start
        lines = logs.get(node) or []
        # A Slurm job stands for every node's part: a part that has ended says so in its exit record. A job still
        # in the queue runs nowhere, whatever it waits for.
        if unit.get("SlurmState") == "PENDING":
            state = "queued: %s" % (unit.get("SlurmReason") or "waiting")
        elif unit.get("ActiveState") in ("active", "activating", "deactivating") and not (unit.get("SlurmJobId") and exit_):
            state = "running"
        elif exit_ is not None:
            by = exit_.get("stopped_by")
            state = "stopped" if by == USER_STOP else "stopped: stalled" if by == STALL_STOP else ("stopped: %s failed" % by) if by else (
                "exited 0" if exit_["rc"] == 0 else "failed: exited %s" % exit_["rc"])
        elif unit.get("Result", "success") != "success":
            state = "failed: %s" % unit["Result"]
        elif unit.get("ExecMainStartTimestamp"):
            state = "stopped"
        else:
            state = "not started"
        seen = progress_of(progress.get(node), now)
        per_node[node] = dict(seen, state=state, rc=exit_["rc"] if exit_ else None, stopped_by=(exit_ or {}).get("stopped_by"),
                              ended=(exit_ or {}).get("ended"), points=(progress.get(node) or {}).get("points") or [])
        rows.append([node, state] + ["-" if seen[key] is None else str(seen[key]) + unit for key, unit in
                                     (("step", ""), ("logged_seconds_ago", " s ago"), ("steps_per_minute", ""))] + [lines[-1] if lines else "-"])
    failed = [n for n, s in per_node.items() if s["state"].startswith("failed")]
    first = first_failed(failed, logs, addresses, {n: s["ended"] for n, s in per_node.items()})
    states = {s["state"] for s in per_node.values()}
    if record is None:
        verdict = "no such job"
    elif first:
        verdict = "failed: %s failed first" % first
    elif any(s.startswith("queued") for s in states):
        verdict = "queued in Slurm (%s)" % next(s for s in states if s.startswith("queued"))[len("queued: "):]
    elif "running" in states and watch.get("state") == "stalled":
        verdict = "stalled: no node logged a new step for %s s" % watch.get("stall_seconds")
    elif "running" in states:
        verdict = "running" if states == {"running"} else "partly running: %s" % ", ".join(n for n, s in per_node.items() if s["state"] != "running")
    elif states == {"exited 0"}:
        verdict = "succeeded"
    elif "stopped: stalled" in states:
        verdict = "stopped after a stall (train_on_stall)"
    else:
        verdict = "stopped"
    diagnosis = next((e["verdict"] for e in reversed(events) if e.get("event") == "diagnosis"), None)
    return {"rows": rows, "nodes": per_node, "verdict": verdict, "first_failed": first, "stall_seconds": watch.get("stall_seconds"),
            "events": events, "diagnosis": diagnosis}
