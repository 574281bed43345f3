# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A start prepared, a runner detached (no systemd), found, stopped and swept: this node's part of train.yml's start
and stop, and of a failed peer's word."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from . import records, runner, stage


def prepare(job: records.Job) -> None:
    """Before every node starts: the job's folder and its checkpoints' (as the training user), this node's records of an
    earlier start gone, and the job record written by the first node, so that a status right after the start reads it."""
    job.makedirs(job.dir, job.conf.checkpoint_dir, job.path(records.FLIGHT_RECORDER))
    job.remove(*(job.node_path(kind) for kind in ("exit", "stopped_by", "progress", "diagnosis", "perf")))
    job.unmark("stopping")
    job.unmark("pid")  # an earlier start's runner that ended without its record
    job.unmark("attempt")
    job.unmark("standby")
    if job.first:
        job.write(records.JOB_RECORD, dict(job.conf.record, run_id=job.run_id, events=[]))
        # Earlier starts' claims of the supervision (succession): each names its start, none counts for this one.
        job.remove(*(job.path(n) for n in os.listdir(job.dir) if n.startswith(records.CLAIM_PREFIX) and job.run_id not in n))


def written_pid(job: records.Job) -> int | None:
    """The pid this node's last runner of this job wrote, running or not."""
    try:
        with open(job.run_path("pid")) as handle:
            return int(handle.read().strip())
    except (OSError, ValueError):
        return None


def runner_pid(job: records.Job) -> int | None:
    """The pid of this node's runner of this job, while it runs (systemd's unit and a detached one alike)."""
    pid = written_pid(job)
    if pid is None:
        return None
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as handle:
            words = handle.read().split(b"\0")
    except (OSError, ValueError):
        return None
    # /usr/local/bin/trainops-job run NAME, or python3 -m trainops_job run NAME (detached).
    return pid if b"trainops" in b" ".join(words) and job.name.encode() in words and b"run" in words else None


def start(job: records.Job, wait: float = 30.0) -> int:
    """The runner, detached from the caller's session (a node without systemd); returns once it has written its pid,
    failed at once where the runner ended before that. A loaded node's Python takes seconds to import the runner: 5 s
    failed a start on the suite's loaded machine, so the bound is for a runner that neither writes its pid nor ends."""
    os.makedirs(records.RUN_DIR, exist_ok=True)
    with open(job.run_path("out"), "ab") as out:
        child = subprocess.Popen(runner.program("run", job.name), stdin=subprocess.DEVNULL, stdout=out, stderr=out, cwd="/",
                                 env=dict(os.environ, PYTHONPATH=runner.PACKAGE_DIR), start_new_session=True)
    deadline = time.monotonic() + wait
    while runner_pid(job) is None:
        ended = child.poll() is not None
        if ended and written_pid(job) == child.pid:
            return 0  # it started, and its command has ended already
        if ended or time.monotonic() > deadline:
            print("trainops-job: job %s did not start; see %s" % (job.name, job.run_path("out")), file=sys.stderr)
            return 1
        time.sleep(0.1)
    return 0


def stopping(job: records.Job) -> None:
    """Before any node is stopped: this node's part ending now is a stop, not a failure (its ranks may die of a peer's
    stop before its own arrives)."""
    job.mark("stopping", job.run_id)


def stop(job: records.Job) -> dict:
    """This node's part stopped (its runner ends the command and records it), and what is left of it swept."""
    pid = runner_pid(job)
    if pid and job.conf.supervisor == "systemd":
        subprocess.run(["systemctl", "stop", "trainops-job@%s.service" % job.name], check=False,
                       timeout=job.conf.stop_timeout + 30)
    elif pid:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + job.conf.stop_timeout
        while runner_pid(job) and time.monotonic() < deadline:
            time.sleep(0.2)
    still = runner_pid(job) is not None
    # The stage goes with the job (train_stage_keep keeps it for the next start), once nothing of the job reads it.
    plan = job.conf.stage or {}
    unstaged = bool(plan.get("dir")) and not plan.get("keep") and not still and stage.unstage(str(plan["dir"]))
    return dict(sweep(job), stopped=bool(pid), running=still, unstaged=unstaged)


def stop_local(job: records.Job, by: str, attempt: str) -> None:
    """A peer failed in an attempt (it says so over SSH, as the training user): this node's part of that attempt ends,
    unless it has ended already. A word that comes late, once a restart's attempt runs here, is not for it."""
    if job.attempt() == int(attempt) and not job.exit_record():
        job.write_text(job.node_path("stopped_by"), by + "\n")
        runner.Runner(job).end(runner_pid(job) or 0)


def sweep(job: records.Job) -> dict:
    """Whatever of the job is left on this node ended (the unit's ExecStopPost); {ended, left}: pids."""
    ended = runner.Runner(job).end(runner_pid(job) or 0)
    return {"ended": [p["pid"] for p in ended["found"]], "left": [p["pid"] for p in ended["left"]]}
