# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""This node's part of a job: its command run (in the image, or on the host) with its output read into the node's log,
a failed peer's or the supervisor's word acted on, a stop that lets the command end, and how it ended, recorded.

Runs as root (systemd's unit, Slurm's task, or detached from the caller where there is no systemd): the engine needs
it, and the job's processes inside the image are found and ended by their environment. The command itself, its log and
its records are the training user's.
"""

from __future__ import annotations

import os
import pwd
import select
import shutil
import signal
import subprocess
import sys
import time
from types import FrameType
from typing import Any, Callable

from . import _checkpoints, _oom, batch, convert, diagnosis, gpu_reader, health, perf, processes, records, succession

# Seconds between two heartbeats of a node's runner while its part runs (supervisor.LOST_AFTER: six missed).
HEARTBEAT = 5.0
# Where the package is imported from: its folder's parent, or on the nodes the archive it is installed as.
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def program(*args: str) -> list[str]:
    """This program's own command line (python3 -m trainops_job ...), on the nodes as in the tests."""
    return [sys.executable, "-m", "trainops_job"] + list(args)


def helper_env() -> dict:
    """The environment of this program's helpers (tee, supervisor, diagnosis): no run id, so no stop or sweep of the
    job's processes ends them (the log's last lines still arrive; the supervisor outlives a restart)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINOPS_RUN")}
    env["PYTHONPATH"] = PACKAGE_DIR
    return env


def checkpoint_dir(job: records.Job, nodes: list) -> str:
    """Where the command checkpoints: the job's directory; train_action=scale gives each size one of its own, so that
    every size starts afresh (a checkpoint of another world size is not resumed)."""
    return "%s/scale-%d-nodes" % (job.conf.checkpoint_dir, len(nodes)) if job.conf.scale else job.conf.checkpoint_dir


def accumulation(job: records.Job, nodes: list) -> int:
    """The gradient accumulation of an attempt on these nodes (batch.accumulation; a scaling run measures each size as
    it is)."""
    return batch.accumulation(job.conf.batch, len(job.nodes), len(job.nodes) if job.conf.scale else len(nodes))[0]


def job_env(job: records.Job, attempt: int, nodes: list) -> dict:
    """What the command gets on top of its node's launch environment (trainops-run and trainops-env add that)."""
    conf, node = job.conf, job.node
    recorder = "%s/%s/%s-rank" % (job.dir, records.FLIGHT_RECORDER, node)
    # NCCL's choice of network and transports, logged as each communicator is set up (train_nccl_debug): the node's
    # log carries it, tee sums it up for status.
    nccl = {"NCCL_DEBUG": conf.nccl_debug} if conf.nccl_debug else {}
    # The flight recorder times each collective (CUDA events around its kernel); the sampler reads the times from a dump
    # it asks for once a window (perf.Sampler): train_collective_timing.
    if conf.collective_timing and conf.flight_recorder_entries > 0:
        nccl["TORCH_NCCL_ENABLE_TIMING"] = "1"
    # The stage (train_stage): its folder on this node's disk; the hub left alone where the model and data are staged.
    plan = conf.stage or {}
    staged = {"TRAINOPS_STAGE_DIR": plan["dir"]} if plan.get("paths") else {}
    if staged and plan.get("offline"):
        staged.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    return dict(nccl, **staged, **{
        "TRAINOPS_RUN_ID": job.run_id, "TRAINOPS_NODE": node, "TRAINOPS_JOB": job.name, "TRAINOPS_ATTEMPT": str(attempt),
        "TRAINOPS_CHECKPOINT_DIR": checkpoint_dir(job, nodes),
        # LLaMA-Factory reads RDZV_ID and MAX_RESTARTS (the c10d elastic launch); without FORCE_TORCHRUN it runs a node
        # with one GPU as a job of its own instead of a part of this one.
        "RDZV_ID": job.run_id, "MAX_RESTARTS": str(conf.max_restarts), "FORCE_TORCHRUN": "1",
        # The gradient accumulation of this attempt, for a command that takes it from here (train_keep_global_batch).
        "TRAINOPS_GRAD_ACCUM": str(accumulation(job, nodes)),
        # The checkpoint this attempt resumes from where the supervisor converted it to DeepSpeed's universal one (empty
        # otherwise): a command of the user's own sets checkpoint.load_universal from it.
        "TRAINOPS_UNIVERSAL_CHECKPOINT": universal_resume(job) or "",
        # Unbuffered Python: the ranks write to a pipe, block-buffered otherwise, so steps would reach the log (and the
        # stall judge) in bursts of kilobytes.
        "PYTHONUNBUFFERED": "1",
        # NCCL's flight recorder keeps the last collectives of every rank and dumps them to shared storage when NCCL's
        # watchdog times out (torch >= 2.2), or when a stall's diagnosis writes to the rank's pipe (torch >= 2.3). torch
        # 2.8 renamed two of its variables and still reads the old names: both are set, so that every version reads them.
        # The pipes are on the node's own /tmp (inside the image, its own): a FIFO on shared storage may be impossible,
        # and torch ends the rank when it cannot make one.
        "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
        "TORCH_FR_BUFFER_SIZE": str(conf.flight_recorder_entries), "TORCH_NCCL_TRACE_BUFFER_SIZE": str(conf.flight_recorder_entries),
        "TORCH_FR_DUMP_TEMP_FILE": recorder, "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": recorder,
        "TORCH_NCCL_DEBUG_INFO_PIPE_FILE": "/tmp/trainops-%s-%s-rank" % (job.run_id, node),
    })


def universal_resume(job: records.Job) -> str | None:
    """The newest complete checkpoint the command resumes from where it has been converted to DeepSpeed's universal one
    (its folder), else None: the attempt loads it only then (load_universal on a later, plain checkpoint fails)."""
    resume = job.conf.resume or {}
    if not resume.get("dir"):
        return None
    entries = _checkpoints.listing(resume["dir"])
    latest = _checkpoints.assess(entries, job.rank_counts())["latest"]
    return "%s/%s" % (resume["dir"], latest) if latest and _checkpoints.layout(entries, latest)["universal"] else None


def command(job: records.Job, nodes: list) -> str:
    """The command of an attempt: the start's, resuming from the newest complete checkpoint where the start added that
    (LLaMA-Factory: its Trainer would take the highest-numbered one, complete or not), and on these nodes alone where a
    restart left some out (NNODES, NODE_RANK, WORLD_SIZE and MASTER_ADDR for this attempt only, over the node's launch environment)."""
    conf = job.conf
    text: str = conf.command
    resume = conf.resume or {}
    if resume.get("argument"):
        latest = _checkpoints.assess(_checkpoints.listing(resume["dir"]), job.rank_counts())["latest"]
        text += " resume_from_checkpoint=%s/%s" % (resume["dir"], latest) if latest else ""
        # A checkpoint the supervisor converted for this world size (convert.py): DeepSpeed loads it through the job's
        # config with load_universal on. The fused AdamW (transformers' default on torch >= 2.8) fails the first step
        # after such a load, its step counts loaded to the CPU ("Expected all tensors to be on the same device, but got
        # state_steps is on cpu"): the unfused one does the same arithmetic.
        if universal_resume(job) and conf.convert.get("deepspeed"):
            text += " deepspeed=%s" % convert.universal_config(job)
            text += " optim=adamw_torch" if conf.convert.get("optim") in (None, "", "adamw_torch_fused") else ""
    # LLaMA-Factory's paths that the stage holds, read from the node's local copy (dataset_dir=..., model_name_or_path=...).
    text += "".join(" %s=%s" % (key, path) for key, path in sorted(((conf.stage or {}).get("overrides") or {}).items()))
    steps = accumulation(job, nodes)
    if conf.batch.get("overrides") and steps != int(conf.batch.get("accumulation") or 1):
        text += " gradient_accumulation_steps=%d" % steps  # LLaMA-Factory's, the global batch kept on fewer nodes
    if nodes != job.nodes:
        # The rendezvous master stays where it was unless its node is the one left out: then the first node left serves.
        master = conf.master_addr if conf.master_addr in [conf.addresses[n] for n in nodes] else conf.addresses[nodes[0]]
        text = ('NNODES=%d NODE_RANK=%d MASTER_ADDR=%s WORLD_SIZE=$((%d * ${NPROC_PER_NODE:-1})); '
                'export NNODES NODE_RANK MASTER_ADDR WORLD_SIZE; %s' % (len(nodes), nodes.index(job.node), master, len(nodes), text))
    return text


def engine_options(job: records.Job, attempt: int, nodes: list) -> list[str]:
    """trainops-run's options for an attempt's container (a job in the image): a name of its own (a restart's too: the
    last one may still be being removed), the job's variables passed in (--env NAME: the value from the engine's
    environment), the stage's folder at its own path, read-only (trainops-run mounts shared storage alone: without it
    TRAINOPS_STAGE_DIR and LLaMA-Factory's paths into the stage would name nothing in the container; read-only, the
    copies stay the ones checked against the manifest), then train_run_opts."""
    name = "%s-%s%s" % (job.run_id, job.node, "-%d" % attempt if attempt else "")
    passed = [word for key in sorted(job_env(job, attempt, nodes)) for word in ("--env", key)]
    plan = job.conf.stage or {}
    stage = ["--volume", "%s:%s:ro" % (plan["dir"], plan["dir"])] if plan.get("paths") else []
    return ["--name", name] + passed + stage + list(job.conf.run_opts)


def gpu_free(run_id: str, seconds: float = 60.0, sleep: Callable[[float], object] = time.sleep) -> bool:
    """Before a restart: until no GPU of this node holds memory for a process of the run, or for one that has ended
    (its memory not freed yet); False after seconds. Nodes without nvidia-smi hold none."""
    deadline = time.monotonic() + seconds
    while shutil.which("nvidia-smi"):
        try:
            listed = subprocess.run(["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"], capture_output=True,
                                    text=True, timeout=20, check=False).stdout.split()
        except (OSError, subprocess.TimeoutExpired):
            return True  # the driver does not answer: the restart's own start will say more
        run = {str(p["pid"]) for p in processes.find("TRAINOPS_RUN_ID", run_id)}
        held = [pid for pid in listed if pid.isdigit() and (not os.path.exists("/proc/" + pid) or pid in run)]
        if not held:
            return True
        if time.monotonic() > deadline:
            return False
        sleep(2)
    return True


def exit_status(returncode: int) -> int:
    """A shell's exit status: 128 + N for a command ended by signal N."""
    return 128 - returncode if returncode < 0 else returncode


class Wakeup:
    """SIGTERM and SIGINT asked this runner to stop: noted, and a wait in progress returns at once."""

    def __init__(self) -> None:
        self.asked = False
        self.read, write = os.pipe()
        os.set_blocking(write, False)
        signal.set_wakeup_fd(write)
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._note)

    def _note(self, signum: int, frame: FrameType | None) -> None:
        self.asked = True

    def wait(self, seconds: float) -> None:
        if select.select([self.read], [], [], seconds)[0]:
            os.read(self.read, 512)


class Runner:
    # Set as the runner starts (stop: run) and as each attempt starts (the command and its tee: launch).
    stop: Wakeup
    child: subprocess.Popen[bytes]
    tee: subprocess.Popen[bytes]

    def __init__(self, job: records.Job, clock: Callable[[], float] = time.time):
        self.job, self.clock = job, clock
        self.nodes = list(job.nodes)  # the nodes of the attempt under way
        self.helpers: list[subprocess.Popen[bytes]] = []  # diagnoses under way: reaped as they end
        self.gpus: dict | None = None  # this node's GPUs as an attempt started (health.snapshot), where a restart may follow
        self.ooms: list = []  # the kernel log's OOM kills as the attempt started (_oom.kills)
        self.killed: list = []  # those the attempt added, of the training user's processes, once it failed
        self.sampler: perf.Sampler | None = None  # where this node's ranks spend their time (perf), in the attempt under way
        self.lingered: int | None = None  # a failed rank's status where its launcher lingered after it and was ended
        self.beat, self.beat_at = 0, 0.0  # this node's heartbeat (NODE.alive) while its part runs
        self.supervisor: subprocess.Popen[bytes] | None = None  # the job's supervisor where this node holds the supervision
        self.succession = succession.Watch(job)  # this node's watch on the supervisor's lease

    def _as_user(self) -> dict:
        user = self.job.user
        return {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": os.getgrouplist(user.pw_name, user.pw_gid)} \
            if os.geteuid() == 0 and user.pw_uid != 0 else {}

    def launch(self, attempt: int, nodes: list) -> None:
        """The command, its output through the progress reader into the node's log (tee)."""
        self.job.mark("attempt", str(attempt))
        tool = diagnosis.py_spy()
        stack = (lambda pid: diagnosis.stack_of(pid, tool, perf.STACK_TIMEOUT)) if tool else None
        smi = shutil.which("nvidia-smi")
        self.nodes, self.sampler = nodes, perf.Sampler(self.job.run_id, self.job.node, stack=stack,
                                                       gpus=gpu_reader.Reader(smi) if smi else None,
                                                       inputs=tuple(self.job.conf.input_functions))
        conf, env = self.job.conf, dict(os.environ, **job_env(self.job, attempt, nodes))
        if conf.scale:
            self.job.makedirs(checkpoint_dir(self.job, nodes))
        if "restart" in (conf.on_failure, conf.on_stall):
            self.gpus = health.snapshot()
        self.ooms, self.killed = _oom.kills(health.kernel_log()), []
        argv = list(conf.launcher) + ["sh", "-c", command(self.job, nodes)]
        ids: dict[str, Any] = {}
        if conf.in_image:
            # The engine runs as root, the ranks as the training user (trainops-run --user).
            env["TRAINOPS_RUN_OPTS"] = " ".join(engine_options(self.job, attempt, nodes))
        else:
            ids = self._as_user()
            env.update(self.job.user_env())
        self.child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      env=env, cwd="/", **ids)
        self.tee = subprocess.Popen(program("tee", self.job.name, str(attempt)), stdin=self.child.stdout, env=helper_env(), cwd="/",
                                    **self._as_user())
        assert self.child.stdout is not None  # stdout=PIPE
        self.child.stdout.close()

    def end(self, runner: int | None = None) -> dict:
        """The job's processes on this node ended (inside the image too), its own before the engine's; the runner's
        shell around the command (runner: its pid) gets no SIGTERM: it passes on the command's own exit status."""
        return processes.end_run("TRAINOPS_RUN_ID", self.job.run_id, grace=self.job.conf.stop_grace,
                                 having="TRAINOPS_NODE=%s" % self.job.node, spare=os.getpid() if runner is None else runner)

    def _answer_stall(self, answered: int | None) -> int | None:
        """The supervisor asks every node about a stall (its number, once per start): this node's diagnosis, as root (py-spy
        reads the ranks' memory), in the background while fail fast goes on."""
        asked: int | None = (self.job.of_this_run(records.STALL_REQUEST) or {}).get("stall")
        if asked is None or asked == answered:
            return answered
        self.helpers.append(subprocess.Popen(program("diagnose", self.job.name, str(asked)), env=helper_env(), cwd="/"))
        return asked

    def _sample(self, attempt: int) -> None:
        """One look at where this node's ranks spend their time; each window's shares to the node's perf record."""
        sampler = self.sampler
        if sampler is None:
            return
        try:
            sampler.sample()
            if sampler.due():
                self.job.write(self.job.node_path("perf"), dict(sampler.window(), run_id=self.job.run_id, node=self.job.node,
                                                                attempt=attempt))
        except OSError:
            pass  # a window not written (shared storage away a moment): the next one is
        except Exception as exc:  # pylint: disable=broad-exception-caught
            # Watching how the job runs must never end it: the sampling stops for this attempt, saying why in the log.
            self.sampler = None
            note = "trainops-job: perf sampling stopped on %s: %s: %s\n" % (self.job.node, type(exc).__name__, exc)
            try:
                self.job.write_text(self.job.node_path("log"), note, "a")
            except OSError:
                print(note, end="", file=sys.stderr)

    def _request(self, handled: int | None) -> dict | None:
        """The supervisor's latest request (stop or restart) for this start, if not handled yet; never one of a
        supervision whose epoch is over (its node lost, another took the supervision: succession)."""
        request = self.job.of_this_run(records.CONTROL_REQUEST)
        if not request or request.get("id") == handled or succession.over(self.job, int(request.get("epoch") or 1)):
            return None
        return request

    def _supervise(self) -> tuple[dict, dict] | None:
        """A look at the supervisor's lease (succession), where this node's supervisor does not run: where its holder has
        been silent for this node's turn, the supervision taken, epoch + 1 (this node's claim the only one of that epoch).
        Returns the lease and the view as read (None where this node supervises)."""
        job = self.job
        if self.supervisor is not None and self.supervisor.poll() is None:
            return None
        found, view = self.succession.look(), job.of_this_run(records.SUPERVISOR_VIEW) or {}
        if not self.succession.due(found, view):
            return found, view
        holder, epoch = succession.holder(job, found), self.succession.claimed + 1
        if succession.claim(job, epoch):
            job.write_text(job.node_path("log"), "trainops-job: the supervisor on %s silent for %d s: %s takes the supervision "
                           "(epoch %d)\n" % (holder, self.succession.silent(), job.node, epoch), "a")
            self._start_supervisor(epoch, holder)
        return found, view

    def _start_supervisor(self, epoch: int, taken_from: str | None) -> None:
        """The supervisor watches every node's progress: the stall judge runs on the cluster, not in the controller's
        playbook, and ends with this runner."""
        args = [str(epoch), taken_from] if taken_from else []
        self.supervisor = subprocess.Popen(program("supervise", self.job.name, str(os.getpid()), *args), env=helper_env(), cwd="/",
                                           stdin=subprocess.DEVNULL, **self._as_user())

    def _end_supervision(self) -> None:
        """This runner has ended: its supervisor too (it writes its records whole, renamed into place: nothing is left half
        written). Where the job goes on without this node (left out of a restart), the lease is released and the next
        node takes the supervision at once; else the supervision has ended, said in its view: a spare standing by ends
        too (no restart can bring it in now). Not where this node's epoch is over: the supervision is another's."""
        job, supervisor = self.job, self.supervisor
        if supervisor is None:
            return
        supervisor.terminate()
        supervisor.wait()
        found = succession.lease(job)
        if succession.holder(job, found) != job.node or succession.over(job, int(found.get("epoch") or 1)):
            return
        if (job.exit_record() or {}).get("stopped_by") == records.LEFT_OUT:
            job.write(records.LEASE, dict(found, released=True))
            return
        job.write(records.SUPERVISOR_VIEW, dict(job.of_this_run(records.SUPERVISOR_VIEW) or {"run_id": job.run_id}, ended=True))

    def _outlived(self, seconds: float) -> bool:
        """Whether the command still runs after seconds (a stop may cut the wait short)."""
        deadline = time.monotonic() + seconds
        while self.child.poll() is None and not self.stop.asked and time.monotonic() < deadline:
            self.stop.wait(min(0.5, max(0.0, deadline - time.monotonic())))
        return self.child.poll() is None

    def _watch(self, attempt: int, handled: int | None, answered: int | None) -> tuple[dict | None, str | None, int | None]:
        """Until the command ends, a stop, the supervisor's request or a failed peer: (request, peer that failed)."""
        while self.child.poll() is None and not self.stop.asked:
            answered = self._answer_stall(answered)
            self.helpers = [h for h in self.helpers if h.poll() is None]
            request = self._request(handled)
            if request:
                return request, None, answered
            self._heartbeat(attempt)
            self._supervise()
            if self._lingering(attempt):
                return None, None, answered
            peer = self.job.failed_peer(attempt)
            if peer:
                # Time first for this node's torchrun to report its own ranks' end (its agent looks every 5 s): when this
                # node's rank was the one that died, its part ends on its own, failed, and is not called stopped.
                if not self._outlived(self.job.conf.fail_grace):
                    return None, None, answered
                self.job.write_text(self.job.node_path("stopped_by"), peer + "\n")
                self.end()
                return None, peer, answered
            self.stop.wait(1.0)
            if self.sampler:
                self._sample(attempt)
        # A peer's ranks ended by the supervisor's request may end this node's before this node reads it.
        return (None if self.stop.asked else self._request(handled)), None, answered

    def _heartbeat(self, attempt: int) -> None:
        """This node's word that its runner watches its part (NODE.alive), every HEARTBEAT seconds: the supervisor takes
        a node whose word stops, and which it cannot reach, for lost."""
        if time.monotonic() - self.beat_at < HEARTBEAT:
            return
        self.beat, self.beat_at = self.beat + 1, time.monotonic()
        try:
            self.job.write(self.job.node_path("alive"), {"run_id": self.job.run_id, "node": self.job.node, "attempt": attempt, "beat": self.beat})
        except OSError:
            pass  # shared storage away a moment: the next beat is written

    def _lingering(self, attempt: int) -> bool:
        """Whether this node's launcher said a rank of this attempt failed and has not ended fail_grace after (torchrun's
        agent waiting at its exit barrier, or on a dead peer's store): then its part is ended, failed with the rank's
        status (self.lingered), as the launcher would have ended it. Not where the launcher restarts its ranks itself
        (train_max_restarts)."""
        if self.job.conf.max_restarts:
            return False
        failed = (self.job.of_this_run(self.job.node_path("progress")) or {}).get("ranks_failed") or {}
        if failed.get("attempt") != attempt or not self._outlived(self.job.conf.fail_grace):
            return False
        self.job.write_text(self.job.node_path("log"), "trainops-job: a rank on %s failed (exit status %s) and its launcher did not "
                            "end within %s s (train_fail_grace): the part ends, failed\n" % (
                                self.job.node, failed.get("exitcode"), self.job.conf.fail_grace), "a")
        self.lingered = int(failed.get("exitcode") or 1)
        self.end()
        return True

    def _decision(self, handled: int | None) -> dict:
        """After a failure (train_on_failure: restart): the supervisor's word once every part has ended (restart or stop),
        a user's stop, or no supervisor at all (its node lost and no node took the supervision in its turn: no restart
        can come). This node takes the supervision in its turn (_supervise)."""
        while not self.stop.asked and not self.job.stopping():
            request = self._request(handled)
            if request:
                return request
            looked = self._supervise()
            if looked and self.succession.abandoned(*looked):
                holder = succession.holder(self.job, looked[0])
                self.job.write_text(self.job.node_path("log"), "trainops-job: no node took the supervision from %s (its lease "
                                    "silent for %d s): no restart will come\n" % (holder, self.succession.silent()), "a")
                return {"action": "lost"}
            self.stop.wait(1.0)
        return {"action": "stop", "user": True}

    def _standby(self) -> dict:
        """A spare's part until a restart brings it in: the supervisor's restart that names this node, its stop, a user's
        stop, or the supervision's end (the first node's runner has ended, or its supervisor is silent: no restart can
        come). A restart that goes on without this spare leaves it standing by. It takes the supervision in its turn
        (_supervise), as any node of the world."""
        job, handled = self.job, None
        job.mark("standby", job.run_id)
        try:
            while not self.stop.asked and not job.stopping():
                request = self._request(handled)
                if request and (request["action"] != "restart" or job.node in request.get("nodes", [])):
                    return request
                handled = request["id"] if request else handled
                looked = self._supervise()
                view = looked[1] if looked else job.of_this_run(records.SUPERVISOR_VIEW) or {}
                if view.get("ended") or looked and self.succession.abandoned(*looked):
                    return {"action": "not needed"}
                self.stop.wait(1.0)
            return {"action": "stop", "user": True}
        finally:
            job.unmark("standby")

    def _record(self, attempt: int, started: str, rc: int, by: str | None, final: bool, faults: list | None = None,
                not_restarted: str | None = None, standby: bool = False) -> None:
        """The exit record; gpu_faults: what this node's GPUs went through in the attempt (a restart leaves it out);
        not_restarted: why a failed part that waited for a restart ended for good without one; standby: a spare's part
        that ended with no restart having brought it in."""
        self.job.write(self.job.node_path("exit"), {"node": self.job.node, "rc": rc, "run_id": self.job.run_id, "attempt": attempt,
                                                    "started": started, "ended": records.now_iso(), "stopped_by": by, "final": final,
                                                    "gpu_faults": faults or [], "not_restarted": not_restarted, "standby": standby,
                                                    "oom_kills": self.killed})

    def _uid(self) -> int | None:
        """The training user's uid: its processes' OOM kills are the job's."""
        try:
            return pwd.getpwnam(self.job.conf.user).pw_uid
        except KeyError:
            return None

    def run(self) -> int:
        job = self.job
        self.stop = Wakeup()
        job.mark("pid", str(os.getpid()))
        started = records.now_iso()
        if job.first:
            self._start_supervisor(1, None)
        rc = self._attempts(0, list(job.starters), None, started) if job.node in job.starters else self._spare(started)
        self._end_supervision()
        for name in os.listdir("/tmp"):
            if name.startswith("trainops-%s-%s-rank" % (job.run_id, job.node)) and name.endswith(".pipe"):
                os.remove(os.path.join("/tmp", name))
        job.unmark("pid")
        job.unmark("attempt")
        return rc

    def _spare(self, started: str) -> int:
        """A spare's part (or, in a scaling run, a node of a larger size): it stands by until the supervisor's restart
        brings it in, in place of a node left out (or with its size); or it ends, recorded as a standby that was not
        needed (or that a user stopped)."""
        joined = self._standby()
        if joined["action"] == "restart":
            self._say_restart(joined)
            return self._attempts(joined["id"], joined["nodes"], joined["id"], started)
        self._record(0, started, 0, records.USER_STOP if joined.get("user") else records.NOT_NEEDED, final=True, standby=True)
        return 0

    def _say_restart(self, restart: dict) -> None:
        self.job.write_text(self.job.node_path("log"), "trainops-job: restart %d on %s (%s)\n" % (
            restart["id"], ", ".join(restart["nodes"]), restart.get("why", "the supervisor's restart")), "a")

    def _attempts(self, attempt: int, nodes: list, handled: int | None, started: str) -> int:
        """This node's part, attempt after attempt: each restart the supervisor asks for that names this node."""
        job, answered = self.job, None
        while True:
            self.launch(attempt, nodes)
            request, peer, answered = self._watch(attempt, handled, answered)
            if request or self.stop.asked:  # the supervisor's stop or restart after a stall, or a user's stop
                self.end()
            rc = exit_status(self.child.wait())
            if self.lingered is not None:
                rc, self.lingered = self.lingered, None  # the failed rank's status, not that of the launcher ended after it
            self.tee.wait()
            user = self.stop.asked or job.stopping()
            asked = (request.get("by") or records.STALL_STOP) if request else None  # the supervisor's reason, where it gave one
            by = records.USER_STOP if user else (job.stopped_by_mark() or peer or asked)
            # A part that failed, or was stopped by a peer's failure, waits for the supervisor's word where failures restart.
            failure = not user and not request and (rc != 0 or by) and job.conf.on_failure == "restart"
            restart = request if request and request["action"] == "restart" else None
            if rc != 0 and not user:
                # A rank the kernel killed for memory exits -9 like any SIGKILL: its log says why.
                ranks = self.sampler.ranks if self.sampler else {}
                self.killed = _oom.ranked(_oom.new(self.ooms, _oom.kills(health.kernel_log()), self._uid()), ranks)
            if not restart:
                faults = health.faults(self.gpus, health.snapshot()) if failure else []
                self._record(attempt, started, rc, by, final=not failure, faults=faults)
            if rc != 0 and not by:
                self._tell_peers(attempt)
            if failure:
                decided = self._decision(handled)
                handled = decided.get("id", handled)
                restart = decided if decided["action"] == "restart" else None
                if not restart or job.node not in restart["nodes"]:
                    reason = records.USER_STOP if decided.get("user") else records.LEFT_OUT if restart else None
                    self._record(attempt, started, rc, by or reason, final=True,
                                 not_restarted=records.SUPERVISOR_SILENT if decided["action"] == "lost" else None)
                    break
            elif restart:
                handled = restart["id"]
                if job.node not in restart.get("nodes", job.nodes):
                    self._record(attempt, started, rc, records.LEFT_OUT, final=True)
                    break
            else:
                break
            # The supervisor's restart: every node's part starts again, on the nodes it names.
            restart["nodes"] = restart.get("nodes") or list(job.nodes)
            attempt, nodes = restart["id"], restart["nodes"]
            job.remove(job.node_path("stopped_by"), job.node_path("exit"))  # the new attempt's part has not ended
            if not gpu_free(job.run_id):
                job.write_text(job.node_path("log"), "trainops-job: GPU memory still held after 60 s; restarting anyway\n", "a")
            self._say_restart(restart)
        return rc

    def _tell_peers(self, attempt: int) -> None:
        """This node failed on its own: every peer ends its part now, told over SSH as the training user (quicker than
        its view of shared storage, which the exit record also tells it)."""
        time.sleep(self.job.conf.fail_grace)  # as in _watch, for the peers' own reports
        tells = [subprocess.Popen(["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5", peer, "/usr/local/bin/trainops-job",
                                   "stop-local", self.job.name, self.job.node, str(attempt)],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  env=helper_env(), **self._as_user())
                 for peer in self.nodes if peer != self.job.node]
        for tell in tells:
            try:
                tell.wait(timeout=30)
            except subprocess.TimeoutExpired:
                tell.kill()
