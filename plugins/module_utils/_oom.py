# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The kernel's OOM kills in its log: which process, whose, how much memory it held, and whether a cgroup's limit (a
container's) or the host's memory ran out. A rank killed so exits -9 (SIGKILL), which says nothing of why.

Two lines a kill (Linux 5.x and later; older kernels write the second alone, without UID):
``oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=...,oom_memcg=...,task_memcg=...,task=python3,pid=4242,uid=2000``
``Memory cgroup out of memory: Killed process 4242 (python3) total-vm:...kB, anon-rss:...kB, file-rss:...kB,
shmem-rss:...kB, UID:2000 pgtables:...kB oom_score_adj:0`` ("Out of memory: Killed process ..." where the host ran out).

Node side: the job runner (roles/train/files/trainops_job links this file) compares the log before and after an attempt
and records the kills of the training user's processes in its exit record. Standard library only.
"""

from __future__ import annotations

import re
from typing import Any

_OOM_KILL_RE = re.compile(r"oom-kill:constraint=(\w+),.*?task=(.*?),pid=(\d+),uid=(\d+)")
_KILLED_RE = re.compile(r"(?:(Memory cgroup out of memory|Out of memory)(?: \(oom_kill_allocating_task\))?: )?Killed process (\d+) "
                        r"\((.*?)\) total-vm:([\d,]+)kB, anon-rss:([\d,]+)kB, file-rss:([\d,]+)kB, shmem-rss:([\d,]+)kB(?:, UID:(\d+))?")


def _kb(text: str) -> int:
    return int(text.replace(",", ""))


def kills(log: str) -> list[dict[str, Any]]:
    """Every OOM kill in the kernel log, oldest first: [{pid, task, uid (None where the kernel did not say), rss_kb (the
    memory it held: anonymous, file and shared), memcg (True: a cgroup's limit; False: the host's memory; None: not
    said)}]."""
    found: list[dict[str, Any]] = []
    pending: dict[int, dict[str, Any]] = {}  # oom-kill lines whose Killed line is still to come, by pid
    for line in log.splitlines():
        match = _OOM_KILL_RE.search(line)
        if match:
            pending[int(match.group(3))] = {"task": match.group(2), "uid": int(match.group(4)),
                                            "memcg": match.group(1) == "CONSTRAINT_MEMCG"}
            continue
        match = _KILLED_RE.search(line)
        if not match:
            continue
        pid = int(match.group(2))
        said = pending.pop(pid, {})
        uid = said.get("uid") if said.get("uid") is not None else int(match.group(8)) if match.group(8) else None
        memcg = said["memcg"] if "memcg" in said else {"Memory cgroup out of memory": True, "Out of memory": False}.get(match.group(1) or "")
        found.append({"pid": pid, "task": match.group(3), "uid": uid, "memcg": memcg,
                      "rss_kb": _kb(match.group(5)) + _kb(match.group(6)) + _kb(match.group(7))})
    return found


def new(before: list[dict[str, Any]], after: list[dict[str, Any]], uid: int | None = None) -> list[dict[str, Any]]:
    """The kills in `after` that `before` (the same log, read earlier) did not hold, of processes of `uid` where given.
    The kernel's ring buffer may have gone round: a kill is new unless `before` had one of its pid and task."""
    seen = {(k["pid"], k["task"]) for k in before}
    return [k for k in after if (k["pid"], k["task"]) not in seen and (uid is None or k["uid"] in (uid, None))]


def ranked(found: list[dict[str, Any]], ranks: dict[int, int]) -> list[dict[str, Any]]:
    """The kills with the global rank of each killed process that was one (`ranks`: pid -> rank, as the runner's
    sampler saw the attempt's ranks; the kernel's pid is the node's, as /proc's)."""
    return [dict(k, rank=ranks[k["pid"]]) if k["pid"] in ranks else k for k in found]


# How a node's state and the job's verdict begin to say the kills.
KILLED = "killed by the kernel's OOM killer"


def said(found: list[dict[str, Any]]) -> str:
    """How status says the kills: "killed by the kernel's OOM killer: rank 1, python3 (pid 4242) held 1.9 GiB (its
    container's memory limit)" (without "rank N, " for a process that was no rank: a launcher, a data loader's worker)."""
    where = {True: " (its container's memory limit)", False: " (the node's memory ran out)", None: ""}

    def one(kill: dict[str, Any]) -> str:
        rank = "rank %d, " % kill["rank"] if kill.get("rank") is not None else ""
        return "%s%s (pid %d) held %.1f GiB%s" % (rank, kill["task"], kill["pid"], kill["rss_kb"] / 2 ** 20, where[kill["memcg"]])
    return KILLED + ": " + ", ".join(one(k) for k in found)
