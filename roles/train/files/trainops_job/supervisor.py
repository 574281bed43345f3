# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The job's supervisor, on the first node (on the next one where that node is lost: succession), as the training user:
every node's progress watched, a stall judged (no node logged a new step for the stall time), every node asked for its
diagnosis, the verdict recorded, and what train_on_stall says done (report, stop, restart) without the controller; a
failed part (train_on_failure: restart) restarted from the newest complete checkpoint on the nodes that still answer (a
spare standing by in the place of one that does not), within the restart limit and short of a crash loop. While steps
come it names a straggler (perf); for train_action=scale it runs and measures each size in turn. It also says when no
step was recognised at all: a job whose trainer prints its steps in a form not read is never judged stalled."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import threading
import time
from typing import Any, Callable

from . import _checkpoints, _perf_classes, batch, convert, diagnosis, judge, perf, records, report, succession, torchrun, verdict
from ._job_events import Event, Watch, WatchEnd
from .settings import Settings
from .view import View

# Seconds every node has to answer a stall with its diagnosis; a node silent after that "stopped answering".
DIAGNOSIS_WAIT = verdict.DIAGNOSIS_WAIT
# Seconds a node has to report over SSH when a restart probes whether it can take part.
PROBE_TIMEOUT = 20
# Seconds between two probes while a restart waits (train_spare_wait) for the nodes its checkpoint needs.
SPARE_POLL = 5.0
# train_action=scale: a measured size runs on until its class is judged (every node's window after its first), at most
# this long: a size of few steps ends before its nodes' second windows.
BOUND_WAIT = 3 * perf.WINDOW
# A node of the attempt whose heartbeat (its runner's NODE.alive, one a runner.HEARTBEAT) has not moved for this long
# on this supervisor's clock is probed; one the probe does not reach, or whose runner does not answer, is lost.
LOST_AFTER = 30.0
# A named bottleneck is cleared once the windows judged without it span this long: on a loaded host one window's
# full run queue can lift every node's busy share near the straggler's (CI at 410a08f: status said plain "running"
# seconds after node3 was named), and status should not flicker between slow and not.
SLOW_CLEARED_AFTER = 2 * perf.WINDOW


def stall_seconds(conf: Settings, progresses: list) -> float:
    """The stall time: stall_seconds when set, else stall_factor times the median seconds per step seen, at least
    stall_floor (a checkpoint or an evaluation takes several steps' time)."""
    if conf.stall_seconds:
        return float(conf.stall_seconds)
    gaps = []
    for progress in progresses:
        points = progress.get("points") or []
        gaps += [(b[0] - a[0]) / max(1, b[1] - a[1]) for a, b in zip(points, points[1:]) if b[1] > a[1]]
    derived = float(conf.stall_factor) * statistics.median(gaps) if gaps else 0.0
    return round(max(float(conf.stall_floor), derived), 1)


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
    def __init__(self, job: records.Job, clock: Callable[[], float] = time.time, sleep: Callable[[float], object] = time.sleep,
                 epoch: int = 1, taken_from: str | None = None):
        """epoch: the supervision's (succession), 1 on the first node; taken_from: the node whose supervisor went silent,
        where this one took the supervision from it."""
        self.job, self.clock, self.sleep, self.epoch = job, clock, sleep, epoch
        found = job.of_this_run(records.SUPERVISOR_VIEW)
        # The view of this start goes on over a restart of the runner's command (its restarts and stalls count on) and
        # over a move of the supervision to another node; a runner's word alone (ended, written where no supervisor had
        # looked yet) is no view.
        if found and "nodes" in found:
            self.watch = View.read(found, job.path(records.SUPERVISOR_VIEW))
        else:
            self.watch = View(run_id=job.run_id, nodes=list(job.starters), spares=list(job.spares), since=round(clock(), 3),
                              checkpoint=self.newest_checkpoint())
        self.watch.ended = False  # its runner's word once it has ended: this supervisor runs again
        self.watch.holder, self.watch.epoch = job.node, epoch
        # {node: ((attempt, beat) last read, when it was first read so)}, and when silent nodes were last probed.
        self.beats: dict[str, tuple[tuple, float]] = {}
        self.probed = 0.0
        # Set once this supervisor's epoch is over (another node took the supervision) or its runner has ended.
        self.done = threading.Event()
        if taken_from:
            self.take_over(taken_from)

    def take_over(self, silent: str) -> None:
        """The supervision taken from a silent node: said in the job record, its request numbers going on from the last
        one written (its last request may have gone out after its last view), and that node probed at the first look (its
        lease silent already for train_supervisor_silence) rather than after LOST_AFTER more."""
        watch = self.watch
        watch.requests = max(watch.requests, int((self.job.of_this_run(records.CONTROL_REQUEST) or {}).get("id") or 0))
        beat = self.job.of_this_run(self.job.node_path("alive", silent)) or {}
        self.beats[silent] = ((beat.get("attempt"), beat.get("beat")), self.clock() - LOST_AFTER)
        why = "the supervisor on %s silent for %d s (train_supervisor_silence)" % (silent, self.job.conf.supervisor_silence)
        self.event(event=Event.SUPERVISION_MOVED, node=self.job.node, replaces=silent, epoch=self.epoch, why=why)
        print("%s: %s takes the supervision (epoch %d)" % (why, self.job.node, self.epoch), flush=True)

    def hold(self) -> None:
        """The lease renewed every succession.BEAT seconds until this supervisor ends; where its epoch is over (another
        node took the supervision while this one was cut off), it steps down: no request or view of it is written again."""
        beat = 0
        while not self.done.is_set():
            beat += 1
            try:
                if not succession.renewal(self.job, self.epoch, beat):
                    print("the supervision moved on (epoch %d claimed): %s steps down" % (self.epoch + 1, self.job.node), flush=True)
                    self.done.set()
                    return
            except OSError:
                pass  # shared storage away a moment: the next beat is written
            self.done.wait(succession.BEAT)

    def progresses(self) -> list:
        return [p for p in (self.job.of_this_run(self.job.node_path("progress", n)) for n in self.job.members) if p]

    def ended(self) -> dict:
        """{node: its exit record} of the nodes whose part of the current attempt has ended."""
        found = {n: self.job.exit_record(n) for n in self.watch.nodes}
        return {n: r for n, r in found.items() if r and r.get("attempt", 0) == self.watch.attempt}

    def checkpoints(self) -> tuple[list, dict] | None:
        """The files of the job's checkpoint directory and their assessment (the newest complete one, its step), or None
        where the command resumes from none."""
        resume = self.job.conf.resume or {}
        if not resume.get("dir"):
            return None
        entries = _checkpoints.listing(resume["dir"])
        return entries, _checkpoints.assess(entries, self.job.rank_counts())

    def newest_checkpoint(self) -> int | None:
        """The step of the newest complete checkpoint the job's command resumes from, or None."""
        found = self.checkpoints()
        return found[1]["step"] if found else None

    def diagnoses(self, stall: int, wait: float = DIAGNOSIS_WAIT) -> dict:
        """Every node's answer to the stall, waiting up to wait seconds; None for a node that did not answer."""
        nodes, answers, deadline = self.watch.nodes, {}, time.monotonic() + wait
        while True:
            for node in nodes:
                found = self.job.of_this_run(self.job.node_path("diagnosis", node))
                if found and found.get("stall") == stall:
                    answers[node] = found
            if len(answers) == len(nodes) or time.monotonic() >= deadline:
                return {node: answers.get(node) for node in nodes}
            self.sleep(1)

    def event(self, **event: Any) -> None:
        self.job.add_event(event, self.clock())

    def request(self, action: str, **details: Any) -> None:
        """The word every node's runner reads (control request): stop, or restart on the nodes named; with this
        supervisor's epoch (a runner ignores the word of an epoch that is over), and never once it is over."""
        if succession.over(self.job, self.epoch):
            self.done.set()
            return
        self.watch.requests += 1
        self.job.write(records.CONTROL_REQUEST, dict(details, run_id=self.job.run_id, action=action, id=self.watch.requests,
                                                     epoch=self.epoch))

    def act(self, stall: tuple, seconds: float) -> None:
        """A stall: recorded, diagnosed on every node, and acted on as train_on_stall says."""
        job, watch = self.job, self.watch
        watch.stalls += 1
        step, idle = stall
        self.event(event=Event.STALL, step=step, idle_seconds=idle, stall_seconds=seconds)
        job.write(records.STALL_REQUEST, {"run_id": job.run_id, "stall": watch.stalls, "step": step})
        found = verdict.verdict(step, self.diagnoses(watch.stalls), watch.nodes)
        self.event(event=Event.DIAGNOSIS, step=step, verdict=found["text"], culprits=found["culprits"])
        print(found["text"], flush=True)
        if job.conf.on_stall == "restart":
            self.restart("a stall at step %s (train_on_stall: restart)" % step)
        elif job.conf.on_stall == "stop":
            self.event(event=Event.STOP, why="stalled (train_on_stall: stop)")
            self.request("stop")

    def failure(self, now: float) -> None:
        """train_on_failure: restart. A part of the current attempt failed on its own: once every node's part has ended
        (or has not within the time fail fast takes), the supervisor restarts the job or stops it."""
        watch, ended = self.watch, self.ended()
        failed = sorted(n for n, r in ended.items() if not r.get("final", True) and r["rc"] != 0 and not r.get("stopped_by"))
        if not failed or watch.decided == watch.attempt:
            return
        if watch.failed_at is None:
            watch.failed_at = now
        patience = self.job.conf.fail_grace + self.job.conf.stop_grace + 15
        waiting = [n for n in watch.nodes if n not in ended]
        gone = bool(waiting) and self.gone(waiting, now - watch.failed_at)
        if waiting and now - watch.failed_at < patience and not gone:
            return  # the others' parts are still ending (fail fast)
        watch.decided = watch.attempt
        if gone:
            # The nodes that will never end their part (powered off) are what failed: the others' ranks failed because
            # their peer went away, whichever of them ended first.
            self.event(event=Event.FAILURE, attempt=watch.attempt, nodes=failed, first=waiting[0], lost=waiting,
                       rc={n: ended[n]["rc"] for n in failed})
            self.restart("%s lost: unreachable on the training network (train_on_failure: restart)" % waiting[0])
            return
        # The node that failed first, as status names it: a rank killed by a signal, else the peer the others' errors
        # name (Gloo: "Connection closed by peer [addr]"), else the one that ended first.
        logs = {n: report.log_tail(self.job.node_path("log", n)) for n in watch.nodes}
        first = torchrun.first_failed(failed, logs, self.job.conf.addresses, {n: ended[n].get("ended") for n in failed})
        self.event(event=Event.FAILURE, attempt=watch.attempt, nodes=failed, first=first, rc={n: ended[n]["rc"] for n in failed})
        self.restart("%s failed first (train_on_failure: restart)" % first)

    def silent(self, now: float) -> list:
        """The nodes of the attempt (this one apart) whose part has not ended and whose heartbeat has not moved for
        LOST_AFTER seconds of this supervisor's clock (the nodes' clocks are never compared with it)."""
        ended, out = self.ended(), []
        for node in self.watch.nodes:
            if node == self.job.node or node in ended:
                continue
            beat = self.job.of_this_run(self.job.node_path("alive", node)) or {}
            key, last = (beat.get("attempt"), beat.get("beat")), self.beats.get(node)
            if last is None or last[0] != key:
                self.beats[node] = (key, now)
            elif now - last[1] >= LOST_AFTER:
                out.append(node)
        return out

    def lost(self, now: float) -> None:
        """A node lost while the others' ranks wait for it (NCCL waits out its own timeout; a launcher lingers): its
        heartbeat silent and the probe not reaching it or its runner. A failure whatever the launchers do: with
        train_on_failure: restart the job restarts without it (a spare in its place, or fewer nodes where
        train_min_nodes allows); else every part is stopped, the lost node named as the one that failed."""
        watch = self.watch
        silent = self.silent(now)
        if not silent or watch.decided == watch.attempt or now - self.probed < LOST_AFTER:
            return
        self.probed = now
        answers = self.probe(silent)
        lost = [n for n in silent if answers.get(n)]
        if not lost:
            return
        watch.decided = watch.attempt
        why = "%s stopped answering: %s" % (lost[0], answers[lost[0]])
        print(why, flush=True)
        self.event(event=Event.FAILURE, attempt=watch.attempt, nodes=lost, first=lost[0], lost=lost, why=why, rc={})
        if self.job.conf.on_failure == "restart":
            self.restart("%s (train_on_failure: restart)" % why)
            return
        self.event(event=Event.STOP, why=why, guard=True)
        self.request("stop", by=lost[0])

    def slow(self, now: float | None) -> None:
        """What holds the job back (judge.bottleneck: a straggler, else the class that the ranks' stacks show), judged
        while steps come (now), else not judged: the view's slow, and an event when it is first named (or another is).
        A window that could not be judged (a node's stacks not in it yet) keeps what was named, and so do judged windows
        without it until they span SLOW_CLEARED_AFTER, so that status does not flicker between slow and not; steps that
        stopped coming clear it at once, and a restart (another attempt: a scaling run's next size) starts unnamed."""
        watch = self.watch
        perfs = {n: self.job.of_this_run(self.job.node_path("perf", n)) for n in watch.nodes}
        found = judge.bottleneck(perfs, now, watch.attempt) if now else None
        found = dict(found, attempt=watch.attempt) if found else None
        watch.judged = judge.judged(perfs, now, watch.attempt) if now else False
        ours = [p for p in perfs.values() if p and p.get("attempt", 0) == watch.attempt]
        watch.sampled = bool(ours)
        watch.ranks = sum(len(p.get("ranks") or {}) for p in ours) if len(ours) == len(perfs) else None  # every node's counted
        last = watch.slow or {}
        if found and (last.get("kind"), last.get("node")) != (found["kind"], found["node"]):
            self.event(event=Event.SLOW, **found)
            print("slow: %s" % found["text"], flush=True)
        if found or not now or last.get("attempt") != watch.attempt:
            watch.slow, watch.slow_unseen_since = found, None
        elif watch.judged:
            watch.slow_unseen_since = watch.slow_unseen_since or now
            if now - watch.slow_unseen_since >= SLOW_CLEARED_AFTER:
                watch.slow, watch.slow_unseen_since = None, None

    def scaling(self, now: float) -> None:
        """train_action=scale: the command on the first size's nodes, then on each larger size in turn (a restart with
        its nodes; the others stand by until then), each size's throughput measured on the first node's steps: `steps`
        steps after `warmup` (the rendezvous, the first steps). Once every size is measured, or one did not reach its
        steps within `timeout` seconds of its start, every node's part is stopped."""
        watch, plan = self.watch, self.job.conf.scale or {}
        if watch.scaled:
            return
        since, size = watch.restarted_at or watch.since, len(watch.nodes)
        if watch.measured:
            self._scale_bound(now)
            return
        first = self.job.of_this_run(self.job.node_path("progress", self.job.nodes[0])) or {}
        # This size's steps: the last attempt's lines may still arrive after its restart was asked for.
        ours = first.get("attempt", 0) == watch.attempt
        points = [p for p in first.get("points") or [] if ours and p[0] >= first.get("attempt_at", since)]
        warmup, steps = int(plan["warmup"]), int(plan["steps"])
        found = {"world": size, "nodes": list(watch.nodes)}
        # The first point `steps` steps after the warmup's that was read later than it: the tee reads what came at once
        # together (a loaded node's pipe holds several steps), and steps read at one moment measure no time.
        later = [p for p in points[warmup + steps:] if p[0] > points[warmup][0]] if len(points) > warmup + steps else []
        if later:
            (t0, s0), (t1, s1) = points[warmup][:2], later[0][:2]
            found.update(steps=s1 - s0, seconds=round(t1 - t0, 3), steps_per_second=round((s1 - s0) / (t1 - t0), 4))
        elif now - since > float(plan["timeout"]):
            found.update(error="%d of %d steps within %d s (train_scale_timeout)" % (len(points), warmup + steps + 1, plan["timeout"]))
        else:
            return
        watch.measured = dict(found, at=round(now, 3))
        self._scale_bound(now)

    def _scale_bound(self, now: float) -> None:
        """A measured size's class (judge.bottleneck: what held it back, or nothing), once judged: the size runs on for
        up to BOUND_WAIT seconds after its steps (its windows end apart), or until it has run a window and a half
        without any node's window (a command without ranks to sample), then is said not judged. Then the next size."""
        watch, plan = self.watch, self.job.conf.scale or {}
        found = dict(watch.measured or {})
        slow = watch.slow if (watch.slow or {}).get("attempt") == watch.attempt else None  # this size's, not the last one's
        unsampled = not watch.sampled and now - (watch.restarted_at or watch.since) >= 1.5 * perf.WINDOW
        if not (watch.judged or slow or "error" in found or unsampled) and now - found["at"] < BOUND_WAIT:
            return
        watch.measured = None
        del found["at"]
        # Samples per second where each rank's samples per step are known (the controller multiplies).
        found.update(ranks=watch.ranks, samples_per_rank=plan.get("samples_per_rank"))
        # What held it back where that was named; healthy only where every node's stacks were judged; else not judged.
        healthy = _perf_classes.HEALTHY
        healthy_bound = {"kind": healthy.name, "node": None, "text": healthy.doing} if watch.judged else None
        found["bound"] = {k: slow[k] for k in ("kind", "node", "text")} if slow else healthy_bound
        watch.scale.append(found)
        self.event(event=Event.SCALE, **found)
        size = len(watch.nodes)
        larger = [n for n in records.scale_sizes(plan, len(self.job.nodes)) if n > size]
        if larger and "error" not in found:
            nodes = self.job.nodes[:larger[0]]
            watch.restarted_at = round(self.clock(), 3)
            self.request("restart", nodes=nodes, why="train_action=scale: %d nodes" % len(nodes))
            watch.attempt, watch.nodes = watch.requests, nodes
            return
        watch.scaled = True
        self.event(event=Event.SCALED, sizes=[r["world"] for r in watch.scale])
        self.request("stop", by=records.SCALED)

    def gone(self, nodes: list, waited: float) -> bool:
        """Whether every node still to end its part is unreachable on the training network (powered off, say): no part
        of it will end there, so the others' need not wait out the patience. Asked once fail fast had its time."""
        if waited < self.job.conf.fail_grace:
            return False
        others = {n: self.job.conf.addresses[n] for n in nodes if n != self.job.node}
        return len(others) == len(nodes) and all(diagnosis.reach(others).values())

    def restart(self, why: str) -> None:
        """Every node's part started again from the newest complete checkpoint, on the nodes that can take part; or the
        job stopped: at its restart limit, in a crash loop, or with too few nodes left."""
        conf, watch = self.job.conf, self.watch
        limit, newest = int(conf.max_auto_restarts), self.newest_checkpoint()
        if newest is not None and newest > (watch.checkpoint if watch.checkpoint is not None else -1):
            watch.checkpoint, watch.without_progress = newest, 0
        if watch.restarts >= limit:
            self.event(event=Event.RESTART_LIMIT, restarts=watch.restarts, limit=limit)
            return self.stop("the restart limit (%d)" % limit)
        if watch.without_progress >= int(conf.restarts_without_progress):
            text = "crash loop: %d restarts, no checkpoint %s" % (
                watch.without_progress, "after step %s" % watch.checkpoint if watch.checkpoint is not None else "at all")
            self.event(event=Event.CRASH_LOOP, restarts=watch.without_progress, checkpoint=watch.checkpoint, why=text)
            return self.stop(text)
        answers = self.gpu_faults(self.probe(watch.nodes + watch.spares))
        # A world that cannot load the newest checkpoint waits up to train_spare_wait for the nodes it lacks (a spare
        # standing by, a lost node back), probed again every SPARE_POLL seconds; then it is refused, never crash-looped.
        unfit, deadline = self.unfit(answers), self.clock() + conf.spare_wait
        while unfit and self.clock() < deadline:
            self.sleep(SPARE_POLL)
            answers = self.gpu_faults(self.probe(watch.nodes + watch.spares))
            unfit = self.unfit(answers)
        for node in watch.nodes:
            if answers[node]:
                self.event(event=Event.LEFT_OUT, node=node, why=answers[node])
        nodes = self.replaced(watch.nodes, answers)
        if len(nodes) < conf.least_nodes:
            self.event(event=Event.TOO_FEW_NODES, nodes=nodes, min_nodes=conf.least_nodes)
            return self.stop("%d of %d nodes can take part, train_min_nodes is %d" % (len(nodes), len(watch.nodes), conf.least_nodes))
        converted = None
        if unfit:
            # The newest checkpoint converted to DeepSpeed's universal one, where it can be; else the job stops saying why.
            converted, why_not = self.convert()
            if converted is None:
                waited = "" if not conf.spare_wait else " (no node came within train_spare_wait, %d s)" % conf.spare_wait
                stopped = "%s%s; %s" % (unfit, waited, why_not)
                self.event(event=Event.CHECKPOINT_UNFIT, nodes=nodes, waited=conf.spare_wait, why=stopped)
                return self.stop(stopped)
        watch.restarts += 1
        watch.without_progress += 1
        watch.restarted_at = round(self.clock(), 3)
        watch.failed_at = None
        self.request("restart", nodes=nodes, why=why)
        watch.attempt, watch.nodes = watch.requests, nodes
        # The attempt's gradient accumulation where the global batch is kept (train_keep_global_batch), and by how much
        # the batch differs where it cannot be kept exactly: status says it with the start.
        steps, change = batch.accumulation(conf.batch, len(self.job.nodes), len(nodes))
        kept: dict[str, Any] = {"accumulation": steps, "batch_change": change} if conf.batch.get("keep") else {}
        said = {"converted": converted} if converted else {}
        self.event(event=Event.RESTART, attempt=watch.restarts, limit=limit, nodes=nodes, world=len(nodes), why=why,
                   checkpoint=watch.checkpoint, **kept, **said)
        return None

    def convert(self) -> tuple[str | None, str]:
        """The newest complete checkpoint converted to DeepSpeed's universal one (convert.py) for a restart at another world
        size: (what the restart says of it, "") or (None, why not: refused, or the conversion's own failure)."""
        found, job = self.checkpoints(), self.job
        assert found is not None and found[1]["latest"]  # unfit() found a checkpoint that this world cannot load
        entries, latest = found[0], found[1]["latest"]
        plan, step = job.conf.convert, convert.step_folder(entries, latest)
        config, unread = convert.deepspeed_config(plan.get("deepspeed"))
        refused = unread or convert.refusal(plan, _checkpoints.layout(entries, latest), config, job.conf.in_image) or (
            None if step else "no global_stepN folder in %s" % latest)
        if refused or step is None:
            return None, "not converted: %s" % refused
        done, seconds, failed = convert.convert(job, os.path.join(job.conf.resume["dir"], latest), step)
        if not done:
            return None, "its conversion (train_checkpoint_convert) failed after %s s: %s" % (seconds, failed)
        if config is not None:
            convert.write_universal_config(job, config)
        text = "%s converted to DeepSpeed's universal checkpoint in %s s" % (latest, seconds)
        self.event(event=Event.CHECKPOINT_CONVERTED, checkpoint=latest, seconds=seconds, why=text)
        return text, ""

    def unfit(self, answers: dict) -> str | None:
        """Why the restart's world, as the probe's answers make it (every node that answers, a ready spare in place of one
        that does not), cannot load the newest complete checkpoint; None where it can, or where the job resumes from
        none, or where too few nodes answer (the restart's own guard says that)."""
        conf, watch = self.job.conf, self.watch
        lost = sum(1 for n in watch.nodes if answers[n])
        size = len(watch.nodes) - lost + min(lost, sum(1 for s in watch.spares if answers[s] is None))
        found = self.checkpoints() if conf.resume.get("world") and size >= conf.least_nodes else None
        if not found or found[1]["latest"] is None:
            return None
        (entries, assessment), per_node = found, max(1, int(conf.resume["world"]) // len(self.job.nodes))
        return _checkpoints.unfit(_checkpoints.layout(entries, assessment["latest"]), assessment["latest"], size * per_node)

    def replaced(self, nodes: list, answers: dict) -> list:
        """The nodes of the restart: each node that can take part, and in place of one that cannot (in its place, so with
        its NODE_RANK) a spare that answered standing by, while there is one; a spare that did not answer is given up."""
        watch = self.watch
        for spare in watch.spares:
            if answers[spare]:
                self.event(event=Event.SPARE_UNFIT, node=spare, why=answers[spare])
        ready = [s for s in watch.spares if answers[s] is None]
        out = []
        for node in nodes:
            if answers[node] is None:
                out.append(node)
            elif ready:
                out.append(ready.pop(0))
                self.event(event=Event.SPARE_JOINED, node=out[-1], replaces=node)
        watch.spares = ready
        return out

    def stop(self, why: str) -> None:
        """The guard: no restart (its limit, a crash loop, too few nodes); every node's part ends for good."""
        self.event(event=Event.STOP, why=why, guard=True)
        self.request("stop")

    def probe(self, nodes: list) -> dict:
        """{node: None where it can take part, else why not}: reached on the training network (sshd's port, from this
        node), its runner answering over SSH as the training user (its report: alive, the part not ended for good)."""
        others = [n for n in nodes if n != self.job.node]
        reached = diagnosis.reach({n: self.job.conf.addresses[n] for n in others})
        answers: dict[str, Any] = {}

        def ask(node: str) -> None:
            try:
                run = subprocess.run(["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5", node, "/usr/local/bin/trainops-job",
                                      "report", self.job.name], capture_output=True, text=True, timeout=PROBE_TIMEOUT, check=False)
                answers[node] = json.loads(run.stdout) if run.returncode == 0 else (run.stderr.strip().splitlines() or ["ssh failed"])[-1]
            except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
                answers[node] = "no report within %d s" % PROBE_TIMEOUT if isinstance(exc, subprocess.TimeoutExpired) else str(exc)
        threads = [threading.Thread(target=ask, args=(n,)) for n in others if not reached.get(n)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        out: dict[str, str | None] = {self.job.node: None} if self.job.node in nodes else {}
        for node in others:
            answer = answers.get(node)
            out[node] = ("unreachable on the training network (%s)" % reached[node] if reached.get(node)
                         else "its runner does not answer (%s)" % answer if not isinstance(answer, dict)
                         else None if answer.get("running") else "its runner has ended (%s)" % answer.get("state"))
        return out

    def gpu_faults(self, answers: dict) -> dict:
        """The probe's answers, with a node whose GPUs failed in the attempt that ended (its exit record: an Xid that takes
        a GPU out of service, new uncorrected ECC errors) left out too."""
        found = {n: (self.job.exit_record(n) or {}).get("gpu_faults") for n, why in answers.items() if why is None}
        return dict(answers, **{n: "a GPU fault in the last attempt: %s" % "; ".join(f) for n, f in found.items() if f})

    def check(self, judged: tuple | None) -> tuple | None:
        """One look at every node's progress; returns the stall judged last, as (its last step's time, restarts)."""
        watch, now = self.watch, self.clock()
        seen = self.progresses()
        seconds = stall_seconds(self.job.conf, seen)
        stall = stalled(seen, seconds, now, watch.restarted_at)
        last_step_at = max((p["step_at"] for p in seen if p.get("step_at")), default=None)
        state = Watch.PROGRESSING if last_step_at else Watch.WAITING
        # A new stall needs a new step or a restart since the last one judged.
        if stall and judged != (last_step_at, watch.restarts) and not self.ended():
            judged = (last_step_at, watch.restarts)
            self.act(stall, seconds)
        if stall and judged == (last_step_at, watch.restarts):
            state = Watch.STALLED
        self.slow(now if last_step_at and not stall else None)
        if self.job.conf.scale:
            self.scaling(now)
        elif self.job.conf.on_failure == "restart":
            self.failure(now)
        if not self.job.conf.scale:
            self.lost(now)
        note = None if last_step_at else unknown(watch.since, now, float(self.job.conf.stall_floor))
        watch.state, watch.stall_seconds, watch.last_step_at, watch.checked, watch.note = state, seconds, last_step_at, round(now, 3), note
        if not self.done.is_set():  # a supervisor that stepped down writes no view
            self.job.write(records.SUPERVISOR_VIEW, watch.as_dict())
        return judged

    def run(self, runner_pid: int) -> int:
        """Until the runner that started it ends, or another node takes the supervision: a look every 2 s, the lease
        renewed beside."""
        judged = None
        holding = threading.Thread(target=self.hold, daemon=True)
        holding.start()
        try:
            while _alive(runner_pid) and not self.done.is_set():
                judged = self.check(judged)
                self.sleep(2)
        finally:
            self.done.set()
            holding.join()
        return 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # the runner is root's
    return True


def wait(job: records.Job, seconds: float, sleep: Callable[[float], object] = time.sleep) -> str:
    """train_action=watch: until every node's part has ended for good, the supervisor says stalled, or seconds pass."""
    deadline = time.monotonic() + seconds
    while True:
        view = job.of_this_run(records.SUPERVISOR_VIEW) or {}
        # A node a restart went on without (powered off, say) may never record its end: the nodes of the last start count.
        if all((job.exit_record(n) or {}).get("final", False) for n in view.get("nodes") or job.nodes):
            return WatchEnd.ENDED
        if view.get("state") == Watch.STALLED:
            return WatchEnd.STALLED
        if time.monotonic() >= deadline:
            return WatchEnd.WATCHING
        sleep(2)


def main(job: records.Job, runner_pid: int, epoch: int = 1, taken_from: str | None = None) -> int:
    """The supervisor's output (each verdict) goes to the job's supervisor log."""
    with open(job.path(records.SUPERVISOR_LOG), "a") as log:
        sys.stdout = log
        return Supervisor(job, epoch=epoch, taken_from=taken_from).run(runner_pid)
