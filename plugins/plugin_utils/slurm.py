# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Slurm as the product reads it: `scontrol --oneliner show node` and `squeue` text in, plain data out; what a node's
Slurm state means for a launch (a DOWN or DRAINED node never runs a step: the job waits, which users see as a hang).
Pure functions: the doctor, the slurm role and train.yml's pre-flight use them.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

# scontrol's node states: a base state, then flags joined by "+" (IDLE+DRAIN, DOWN+NOT_RESPONDING). A node in any of
# these takes no new work; DRAIN on an allocated node is DRAINING (its jobs finish, no new ones start).
UNAVAILABLE = ("DOWN", "DRAIN", "DRAINED", "DRAINING", "FAIL", "FAILING", "NOT_RESPONDING", "FUTURE", "POWERED_DOWN",
               "POWER_DOWN", "POWERING_DOWN", "REBOOT_REQUESTED", "REBOOT_ISSUED", "UNKNOWN", "INVALID_REG", "MAINT")

# "NodeName=node1 Arch=x86_64 ... Reason=maint [root@2026-12-01T10:00:00] Comment=(null)": key=value pairs where a
# value (Reason, OS) may hold spaces, so a value runs until the next " Key=".
_PAIR_RE = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_/:.]*)=(.*?)(?=\s[A-Za-z][A-Za-z0-9_/:.]*=|$)")
_NULL = ("(null)", "")


def parse_show_node(text: str | None) -> dict[str, dict[str, str | None]]:
    """`scontrol --oneliner show node` (one node a line) -> {node name: {key: value}}; "(null)" values become None."""
    nodes: dict[str, dict[str, str | None]] = {}
    for line in (text or "").splitlines():
        # Reason comes last and is free text ("Node unexpectedly rebooted boot_time=... last response=..."): all of it.
        line, _sep, reason = line.partition(" Reason=")
        pairs: dict[str, str | None] = dict((key, None if value.strip() in _NULL else value.strip()) for key, value in _PAIR_RE.findall(line))
        if _sep:
            pairs["Reason"] = None if reason.strip() in _NULL else reason.strip()
        name = pairs.get("NodeName")
        if name:
            nodes[name] = pairs
    return nodes


def state_flags(state: str | None) -> list[str]:
    """"IDLE+DRAIN" -> ["IDLE", "DRAIN"]; a trailing "*" (not responding, in sinfo's style) -> NOT_RESPONDING."""
    state = (state or "UNKNOWN").upper()
    flags = [flag for flag in state.rstrip("*").split("+") if flag]
    if state.endswith("*"):
        flags.append("NOT_RESPONDING")
    return flags


def unavailable(node: dict[str, str | None]) -> str | None:
    """Why Slurm gives this node (a parse_show_node record) no work, or None when it can run a step now."""
    flags = state_flags(node.get("State"))
    bad = [flag for flag in flags if flag in UNAVAILABLE]
    if not bad:
        return None
    reason = node.get("Reason")
    return "%s in Slurm%s" % ("+".join(flags), " (reason: %s)" % reason if reason else "")


def gres_gpus(gres: str | None) -> int:
    """The GPU count of a node's Gres ("gpu:8", "gpu:h200:8(S:0-1)", "gpu:2,shard:4") -> 8; None gres -> 0."""
    total = 0
    for item in (gres or "").split(","):
        parts = re.sub(r"\(.*\)$", "", item.strip()).split(":")
        if parts[0] == "gpu" and len(parts) > 1 and parts[-1].isdigit():
            total += int(parts[-1])
    return total


def check_nodes(nodes: list[str], shown: dict[str, dict[str, str | None]], cluster_ips: dict[str, str], gpus: dict[str, int | None],
                munge: dict[str, str | None]) -> list[tuple[str, str, str]]:
    """What stops Slurm from running a job on every node, one problem per node and cause.

    nodes: the cluster's nodes in order; shown: parse_show_node() of the controller's view; cluster_ips: {node:
    cluster_ip}; gpus: {node: GPUs the node's facts found}; munge: {node: checksum of its munge key, None if absent};
    the key most nodes hold is the reference (the first node's on a tie). Returns [(node, problem, fix)].
    """
    problems: list[tuple[str, str, str]] = []
    keys = [munge[node] for node in nodes if munge.get(node)]
    reference = max(keys, key=keys.count) if keys else None
    holder = next((node for node in nodes if munge.get(node) == reference), None)
    for node in nodes:
        if node in munge:
            if munge[node] is None:
                problems.append((node, "has no munge key", "run site.yml (role slurm copies the controller's key)"))
            elif munge[node] != reference:
                problems.append((node, "has another munge key than %s: Slurm refuses its credentials (Invalid "
                                       "credential, Zero Bytes were transmitted)" % holder,
                                 "run site.yml: role slurm puts the cluster's one key on every node"))
        record = shown.get(node)
        if record is None:
            problems.append((node, "is not a Slurm node (slurm.conf lists no %s)" % node, "run site.yml with slurm_enabled"))
            continue
        why = unavailable(record)
        if why:
            problems.append((node, "is %s: jobs that need it wait" % why,
                             "fix the cause, then: scontrol update nodename=%s state=resume" % node))
        address = record.get("NodeAddr")
        if address and cluster_ips.get(node) and address != cluster_ips[node]:
            problems.append((node, "is known to Slurm at %s, not at its cluster_ip %s" % (address, cluster_ips[node]),
                             "run site.yml (slurm.conf's NodeAddr is the training address)"))
        configured = gres_gpus(record.get("Gres"))
        found = gpus.get(node)
        if found is not None and configured != found:
            problems.append((node, "has %d GPUs in Slurm's Gres but %d found on the node" % (configured, found),
                             "run site.yml (gres.conf and slurm.conf follow gpu_facts)"))
    return problems


def check_records(records: Iterable[dict[str, Any]], shown: dict[str, dict[str, str | None]], gpus: dict[str, int | None],
                  munge: dict[str, str | None]) -> list[tuple[str, str, str]]:
    """check_nodes() for the cluster's node records (inventory.node_records: Slurm knows each node by its short
    name) and parse_show_node()'s view, by Slurm's names."""
    records = list(records)
    by_host = dict((r["host"], shown[r["short"]]) for r in records if r["short"] in shown)
    return check_nodes([r["host"] for r in records], by_host, dict((r["host"], r["cluster_ip"]) for r in records), gpus, munge)


def job_state(squeue_line: str | None) -> dict[str, str | None]:
    """One `squeue --noheader --format=%i|%T|%S|%N|%r` line (or nothing) -> the job's state as the train role reads a
    node's unit: {ActiveState, SlurmJobId, SlurmState, ExecMainStartTimestamp, SlurmNodes, SlurmReason}."""
    line = (squeue_line or "").strip().splitlines()
    if not line:
        return {"ActiveState": "inactive"}
    job_id, state, started, node_list, reason = (line[0].split("|") + ["", "", "", "", ""])[:5]
    active = {"RUNNING": "active", "COMPLETING": "deactivating", "PENDING": "activating", "CONFIGURING": "activating",
              "SUSPENDED": "active", "STOPPED": "active", "REQUEUED": "activating", "RESIZING": "active"}
    return {"ActiveState": active.get(state, "inactive"), "SlurmJobId": job_id, "SlurmState": state,
            "ExecMainStartTimestamp": started if started not in ("N/A", "Unknown") else None, "SlurmNodes": node_list,
            "SlurmReason": reason if reason not in ("None", "") else None}


def cpu_layout(facts: dict[str, Any] | None) -> dict[str, int]:
    """A node's CPUs for its slurm.conf line, from Ansible's hardware facts: {CPUs, Sockets, CoresPerSocket,
    ThreadsPerCore}, or {CPUs} alone where the layout does not multiply to the CPU count (cpuinfo without physical
    ids, as on some ARM servers): with CPUs alone Slurm takes every CPU for a socket of one core, which is still
    schedulable, while a layout unlike the node's drains it."""
    facts = facts or {}
    cpus = int(facts.get("processor_vcpus") or 0)
    layout: list[Any] = [facts.get(key) for key in ("processor_count", "processor_cores", "processor_threads_per_core")]
    if not all(isinstance(value, int) and value > 0 for value in layout) or layout[0] * layout[1] * layout[2] != cpus:
        return {"CPUs": cpus}
    return {"CPUs": cpus, "Sockets": layout[0], "CoresPerSocket": layout[1], "ThreadsPerCore": layout[2]}
