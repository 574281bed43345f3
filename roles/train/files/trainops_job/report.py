# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""This node's report of a job, one JSON object: what the controller's status, watch, stop and collect read, once per
node, instead of the job's files (plugin_utils/jobs.py judges across nodes)."""

from __future__ import annotations

import os
import time
from typing import Any, Callable

from . import _checkpoints, lifecycle, perf, records, succession

LOG_LINES = 80  # enough for torchrun's failure summary, which names the rank that died


def log_tail(path: str, lines: int = LOG_LINES, chunk: int = 65536) -> list:
    """The last lines of a log, read from its end."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - chunk))
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return []
    return text.splitlines()[-lines:]


def report(job: records.Job, clock: Callable[[], float] = time.time) -> dict:
    """{node, run_id, now, state, running, standby (a spare not brought in: waiting, or ended so), failed (ended non-zero
    on its own, for good), rc, stopped_by, started, ended, not_restarted (why a failed part ended with no restart),
    attempt, progress: {step, step_at, loss, points, nccl (tee.nccl_summary)} or None, log: [last lines], log_path,
    rdma_ports (this node's active ones: perf.rdma_ports), perf (its ranks' windows in brief: perf.history_point)}, and the
    job's: its record (job: with its events), its folder
    (dir), the supervisor's view (supervisor) and its records ({name: kind}, what collect copies), read from shared storage by every node, so
    that any node tells them when the first is gone."""
    alive = lifecycle.runner_pid(job) is not None
    ended = job.exit_record()
    final = ended is not None and ended.get("final", True)
    # The exit record is the node's word: a runner still telling its peers after its command ended has ended; one that
    # waits for the supervisor's restart has not. A runner leaves its pid only when it was ended before it could
    # record how its part ended.
    lost = not alive and not final and os.path.exists(job.run_path("pid"))
    running = alive and not final
    standby = job.standing_by() if running else bool((ended or {}).get("standby"))
    waits = (records.STANDBY if job.node in job.spares else records.SCALE_STANDBY) if standby else None
    out: dict[str, Any]
    out = {"node": job.node, "run_id": job.run_id, "now": round(clock(), 3), "running": running, "standby": standby,
           "state": records.state(ended, running, lost, waits), "failed": lost or bool(ended and final and ended["rc"] != 0 and not ended.get("stopped_by")),
           "restarting": running and ended is not None,
           "attempt": (ended or {}).get("attempt"),
           "rc": (ended or {}).get("rc"), "stopped_by": (ended or {}).get("stopped_by"), "started": (ended or {}).get("started"),
           "ended": (ended or {}).get("ended"), "not_restarted": (ended or {}).get("not_restarted"),
           "progress": job.of_this_run(job.node_path("progress")), "log": log_tail(job.node_path("log")), "log_path": job.node_path("log"),
           "rdma_ports": perf.rdma_ports(), "stage": job.of_this_run(job.node_path("stage")),
           "perf": (job.of_this_run(job.node_path("perf")) or {}).get("history") or []}
    record = job.read(records.JOB_RECORD)
    kinds = {name: records.record_kind(name, job.members) for name in _listing(job.dir)}
    out.update(job=record if (record or {}).get("run_id") == job.run_id else None, dir=job.dir,
               supervisor=job.of_this_run(records.SUPERVISOR_VIEW), records={n: k for n, k in sorted(kinds.items()) if k})
    if succession.holder(job, succession.lease(job)) == job.node:
        out["checkpoints"] = checkpoints(job)
    return out


def checkpoints(job: records.Job) -> dict:
    """The job's saves as its checkpoint directory tells them (the one a start resumes from: LLaMA-Factory's output_dir,
    else the job's): {dir, saves (_checkpoints.saves: each one's bytes, first and last write), free (bytes free there
    for the training user's files, None where it cannot be read)}. The supervising node's alone: the folder is shared."""
    folder = (job.conf.resume or {}).get("dir") or job.conf.checkpoint_dir
    try:
        seen = os.statvfs(folder)
        free: int | None = seen.f_bavail * seen.f_frsize
    except OSError:
        free = None
    return {"dir": folder, "saves": _checkpoints.saves(_checkpoints.listing(folder)) if folder else [], "free": free}


def _listing(path: str) -> list:
    try:
        return os.listdir(path)
    except OSError:
        return []


def absent() -> dict:
    """The report of a node where no job of that name was ever started."""
    return {"node": None, "run_id": None, "now": round(time.time(), 3), "state": records.NOT_STARTED, "running": False,
            "failed": False, "rc": None, "stopped_by": None, "started": None, "ended": None, "progress": None, "log": []}
