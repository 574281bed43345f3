# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The job's supervisor, on the first node, as the training user: every node's progress watched, a stall judged (no
node logged a new step for the stall time), every node asked for its diagnosis, the verdict recorded, and what
train_on_stall says done (report, stop, restart) without the controller. It also says when no step was recognised at
all: a job whose trainer prints its steps in a form not read is never judged stalled."""

from __future__ import annotations

import os
import statistics
import sys
import time

from . import records, verdict

# Seconds every node has to answer a stall with its diagnosis; a node silent after that "stopped answering".
DIAGNOSIS_WAIT = verdict.DIAGNOSIS_WAIT


def stall_seconds(conf: dict, progresses: list) -> float:
    """The stall time: stall_seconds when set, else stall_factor times the median seconds per step seen, at least
    stall_floor (a checkpoint or an evaluation takes several steps' time)."""
    if conf.get("stall_seconds"):
        return float(conf["stall_seconds"])
    gaps = []
    for progress in progresses:
        points = progress.get("points") or []
        gaps += [(b[0] - a[0]) / max(1, b[1] - a[1]) for a, b in zip(points, points[1:]) if b[1] > a[1]]
    derived = float(conf["stall_factor"]) * statistics.median(gaps) if gaps else 0.0
    return round(max(float(conf["stall_floor"]), derived), 1)


def stalled(progresses: list, seconds: float, now: float, restarted_at: float | None = None) -> tuple | None:
    """(last step, seconds since any node logged a new step) when that is over seconds, else None. A job that has not
    logged its first step (since a restart) is not judged: its start is the pre-flight's and torchrun's own rendezvous
    timeout's."""
    logged = [p for p in progresses if p.get("step_at") and p["step_at"] > (restarted_at or 0)]
    if not logged:
        return None
    idle = now - max(p["step_at"] for p in logged)
    return (max(p["step"] for p in logged), round(idle, 1)) if idle > seconds else None


def unknown(since: float, now: float, floor: float) -> str | None:
    """What to say of a job that has run floor seconds without one recognised step."""
    waited = now - since
    if waited < floor:
        return None
    return ("progress unknown: no step recognised in %s; set train_progress_pattern (a regex with named groups step and "
            "loss) to the form the trainer prints" % ("%d min" % (waited // 60) if waited >= 120 else "%d s" % waited))


class Supervisor:
    def __init__(self, job: records.Job, clock=time.time, sleep=time.sleep):
        self.job, self.clock, self.sleep = job, clock, sleep
        watch = job.read(records.SUPERVISOR_VIEW, {})
        # The view of this start goes on over a restart of the runner's command (its restarts and stalls count on).
        fresh = {"run_id": job.run_id, "restarts": 0, "stalls": 0, "since": round(clock(), 3)}
        self.watch = watch if watch.get("run_id") == job.run_id else fresh

    def progresses(self) -> list:
        return [p for p in (self.job.of_this_run(self.job.node_path("progress", n)) for n in self.job.nodes) if p]

    def ended(self) -> list:
        return [n for n in self.job.nodes if self.job.exit_record(n)]

    def diagnoses(self, stall: int, wait: float = DIAGNOSIS_WAIT) -> dict:
        """Every node's answer to the stall, waiting up to wait seconds; None for a node that did not answer."""
        answers, deadline = {}, time.monotonic() + wait
        while True:
            for node in self.job.nodes:
                found = self.job.of_this_run(self.job.node_path("diagnosis", node))
                if found and found.get("stall") == stall:
                    answers[node] = found
            if len(answers) == len(self.job.nodes) or time.monotonic() >= deadline:
                return {node: answers.get(node) for node in self.job.nodes}
            self.sleep(1)

    def act(self, stall: tuple, seconds: float) -> None:
        """A stall: recorded, diagnosed on every node, and acted on (the control request every node's runner reads)."""
        conf, job, watch = self.job.conf, self.job, self.watch
        watch["stalls"] += 1
        step, idle = stall
        job.add_event({"event": "stall", "step": step, "idle_seconds": idle, "stall_seconds": seconds}, self.clock())
        job.write(records.STALL_REQUEST, {"run_id": job.run_id, "stall": watch["stalls"], "step": step})
        found = verdict.verdict(step, self.diagnoses(watch["stalls"]), job.nodes)
        job.add_event({"event": "diagnosis", "step": step, "verdict": found["text"], "culprits": found["culprits"]}, self.clock())
        print(found["text"], flush=True)
        action, limit = conf["on_stall"], int(conf["max_auto_restarts"])
        if action == "restart" and watch["restarts"] >= limit:
            action = "stop"
            job.add_event({"event": "restart limit", "restarts": watch["restarts"], "limit": limit}, self.clock())
        if action == "restart":
            watch["restarts"] += 1
            watch["restarted_at"] = round(self.clock(), 3)
            job.add_event({"event": "restart", "attempt": watch["restarts"], "limit": limit}, self.clock())
        elif action == "stop":
            job.add_event({"event": "stop", "why": "stalled (train_on_stall: stop)"}, self.clock())
        if action in ("stop", "restart"):
            job.write(records.CONTROL_REQUEST, {"run_id": job.run_id, "action": action, "id": watch["stalls"]})

    def check(self, judged: tuple | None) -> tuple | None:
        """One look at every node's progress; returns the stall judged last, as (its last step's time, restarts)."""
        watch, now = self.watch, self.clock()
        seen = self.progresses()
        seconds = stall_seconds(self.job.conf, seen)
        stall = stalled(seen, seconds, now, watch.get("restarted_at"))
        last_step_at = max((p["step_at"] for p in seen if p.get("step_at")), default=None)
        state = "progressing" if last_step_at else "waiting for the first step"
        # A new stall needs a new step or a restart since the last one judged.
        if stall and judged != (last_step_at, watch["restarts"]) and not self.ended():
            judged = (last_step_at, watch["restarts"])
            self.act(stall, seconds)
        if stall and judged == (last_step_at, watch["restarts"]):
            state = "stalled"
        note = None if last_step_at else unknown(watch["since"], now, float(self.job.conf["stall_floor"]))
        watch.update(state=state, stall_seconds=seconds, last_step_at=last_step_at, checked=round(now, 3), note=note)
        self.job.write(records.SUPERVISOR_VIEW, watch)
        return judged

    def run(self, runner_pid: int) -> int:
        """Until the runner that started it ends, a look every 2 s."""
        judged = None
        while _alive(runner_pid):
            judged = self.check(judged)
            self.sleep(2)
        return 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # the runner is root's
    return True


def wait(job: records.Job, seconds: float, sleep=time.sleep) -> str:
    """train_action=watch: until every node's part has ended, the supervisor says stalled, or seconds pass."""
    deadline = time.monotonic() + seconds
    while True:
        if all(job.exit_record(n) for n in job.nodes):
            return "ended"
        if (job.of_this_run(records.SUPERVISOR_VIEW) or {}).get("state") == "stalled":
            return "stalled"
        if time.monotonic() >= deadline:
            return "watching"
        sleep(2)


def main(job: records.Job, runner_pid: int) -> int:
    """The supervisor's output (each verdict) goes to the job's supervisor log."""
    with open(job.path(records.SUPERVISOR_LOG), "a") as log:
        sys.stdout = log
        return Supervisor(job).run(runner_pid)
