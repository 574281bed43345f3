# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The job's files: this node's settings, the job's folder on shared storage, and this node's marks in /run.

Every file's name, every state a node's part is in and every reason it was stopped are defined here, once. JSON is
read and written whole (atomically: a reader on another node never sees half a file), and written as the training
user: the files are the user's, and shared storage may squash root.
"""

from __future__ import annotations

import datetime
import json
import os
import pwd
import re
from typing import Any, Callable

from . import _oom
from ._job_events import Event, StopReason, Watch
from .settings import Settings

# Where the role writes each job's settings (NAME.json), and this node's runner keeps its pid and marks. Moved for
# tests and unusual layouts through these variables.
CONF_DIR = os.environ.get("TRAINOPS_JOB_CONF_DIR", "/etc/trainops/jobs")
RUN_DIR = os.environ.get("TRAINOPS_JOB_RUN_DIR", "/run/trainops/jobs")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")

# Why a node's part was stopped (its exit record's stopped_by): the name of the node that failed first, or one of the
# reasons the controller reads too (_job_events.StopReason).
USER_STOP = StopReason.USER
STALL_STOP = StopReason.STALL
# A restart went on without this node (it did not answer the supervisor's probe, or its GPU failed).
LEFT_OUT = StopReason.LEFT_OUT
# A spare's standby ended with the job's supervision, no restart having brought it in.
NOT_NEEDED = StopReason.NOT_NEEDED
# train_action=scale: every size measured (or one could not be), the supervisor ended the run.
SCALED = StopReason.SCALED
# Why a failed part ended for good with no restart (its exit record's not_restarted): no node took the supervision in
# every node's turn (succession: each waits train_supervisor_silence and its place), so no restart can come.
SUPERVISOR_SILENT = "the supervisor is silent"

# The job's folder: the job record (the first node writes it, its supervisor adds events), the supervisor's view and
# its requests (a stall every node answers, a stop or restart every node's part obeys), and each node's own files.
JOB_RECORD = "job.json"
SUPERVISOR_VIEW = "watch.json"
STALL_REQUEST = "stall.json"
CONTROL_REQUEST = "control.json"
SUPERVISOR_LOG = "supervisor.log"
# Who supervises the job (succession): the lease its holder renews, and the claim of each epoch after the first (one
# file per epoch, its name with the start's run id, so that an earlier start's claims never count).
LEASE = "supervisor.lease.json"
# The stage's manifest (train_stage: every file's size and sha256, made once by the first node), against which every
# node stages and checks its local copies.
STAGE_MANIFEST = "stage-manifest.json"
CLAIM_PREFIX = "supervisor.claim-"
# The job's DeepSpeed config with checkpoint.load_universal on (convert.py): an attempt that resumes from a checkpoint
# converted to DeepSpeed's universal one loads it through this copy.
UNIVERSAL_CONFIG = "deepspeed-universal.json"
FLIGHT_RECORDER = "flight-recorder"
# alive: the node's heartbeat while its part runs (the supervisor tells a lost node by its silence).
NODE_FILES = {"log": "%s.log", "exit": "%s.exit", "progress": "%s.progress.json", "diagnosis": "%s.diagnosis.json", "perf": "%s.perf.json",
              "stopped_by": "%s.stopped-by", "alive": "%s.alive.json", "stage": "%s.stage.json"}


# A node's part, as its report says it. A spare (group cluster_spare) stands by until a restart brings it in.
RUNNING = "running"
STANDBY = "standby (a spare)"
SCALE_STANDBY = "standby (for a larger size of the scaling run)"
NOT_STARTED = "not started"
LOST = "failed: its runner ended without a record"


def now_iso() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def state(exit_record: dict | None, running: bool, lost: bool = False, standby: str | None = None) -> str:
    """How a node's part stands: running (standby: how it waits, a spare's or a scaling run's node, where it has not been
    brought in yet), not started, or how it ended (its exit record; lost: its runner ended without one, killed say; an
    attempt's end that is not final waits for the supervisor's restart)."""
    if running and not exit_record:
        return standby or RUNNING
    if exit_record is None:
        return LOST if lost else NOT_STARTED
    by = exit_record.get("stopped_by")
    said: dict[str, str] = {USER_STOP: "stopped", STALL_STOP: "stopped: %s" % Watch.STALLED, LEFT_OUT: "stopped: left out of the restart",
                            NOT_NEEDED: "standby ended: " + NOT_NEEDED, SCALED: "stopped: scaling measured"}
    shown = said.get(by or "") or (
        "stopped: %s failed" % by if by else "exited 0" if exit_record["rc"] == 0 else "failed: exited %s" % exit_record["rc"])
    if exit_record.get("oom_kills"):
        shown += "; " + _oom.said(exit_record["oom_kills"])
    if exit_record.get("not_restarted"):
        return shown + "; not restarted: %s" % exit_record["not_restarted"]
    return shown if exit_record.get("final", True) else shown + "; restart pending"


def scale_sizes(scale: dict, nodes: int) -> list:
    """The world sizes of train_action=scale, smallest first: the sizes asked for, else 1, 2, 4, ... below the node
    count, and the node count."""
    if scale.get("sizes"):
        return sorted(set(int(size) for size in scale["sizes"]))
    return [2 ** i for i in range(nodes.bit_length()) if 2 ** i < nodes] + [nodes]


def record_kind(name: str, nodes: list) -> str | None:
    """What a file at the top of the job's folder is, for collect (which copies these, not the checkpoints nor the
    flight recorder's dumps): the job record, a log, an exit record, another record; None for none of the job's, and for a
    node's heartbeat (it says only that the node was alive)."""
    if name == JOB_RECORD:
        return "job record"
    if name == SUPERVISOR_LOG:
        return "log"
    if name in (SUPERVISOR_VIEW, STALL_REQUEST, CONTROL_REQUEST, LEASE, STAGE_MANIFEST):
        return "record"
    kind = next((kind for kind, pattern in NODE_FILES.items() for node in nodes if name == pattern % node), None)
    if kind in (None, "alive"):
        return None
    return {"log": "log", "exit": "exit record"}.get(kind, "record")


def read_json(path: str, default: Any = None) -> Any:
    try:
        with open(path) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return default


def write_json(path: str, data: Any) -> None:
    tmp = "%s.tmp-%d" % (path, os.getpid())
    with open(tmp, "w") as handle:
        json.dump(data, handle)
        handle.write("\n")
    os.replace(tmp, path)


class Job:
    """One job as this node knows it: its settings (NAME.json, written by the role, as one typed record) and its files."""

    def __init__(self, conf: Settings | dict):
        self.conf = conf if isinstance(conf, Settings) else Settings.read(conf)
        conf = self.conf
        self.name: str = conf.job
        self.node: str = conf.node
        self.run_id: str = conf.run_id
        self.dir: str = conf.job_dir
        # The world of the first start, and the spares that a restart may bring in (group cluster_spare).
        self.nodes: list[str] = conf.nodes
        self.spares: list[str] = conf.spares or []
        self.members: list[str] = self.nodes + self.spares
        self.first = self.node == self.nodes[0]
        # train_action=scale: the nodes of the first size start; the others stand by until a larger size names them.
        scale = conf.scale
        self.starters = self.nodes[:scale_sizes(scale, len(self.nodes))[0]] if scale else self.nodes
        self.user = pwd.getpwnam(conf.user)

    @classmethod
    def load(cls, name: str) -> Job:
        if not NAME_RE.match(name or ""):
            raise ValueError("bad job name %s" % name)
        path = os.path.join(CONF_DIR, name + ".json")
        with open(path) as handle:
            return cls(Settings.read(json.load(handle), path))

    # --- paths -----------------------------------------------------------------------------------------------------

    def path(self, name: str) -> str:
        return os.path.join(self.dir, name)

    def node_path(self, kind: str, node: str | None = None) -> str:
        return self.path(NODE_FILES[kind] % (node or self.node))

    def run_path(self, kind: str) -> str:
        """This node's marks, named by node too: the test harness's namespace nodes share one /run."""
        return os.path.join(RUN_DIR, "%s.%s.%s" % (self.name, self.node, kind))

    # --- reading -----------------------------------------------------------------------------------------------------

    def read(self, name: str, default: Any = None) -> Any:
        return read_json(self.path(name), default)

    def of_this_run(self, name: str) -> dict | None:
        """A record of the folder, if it belongs to this start."""
        found = read_json(name if name.startswith("/") else self.path(name))
        return found if isinstance(found, dict) and found.get("run_id") == self.run_id else None

    def exit_record(self, node: str | None = None) -> dict | None:
        return self.of_this_run(self.node_path("exit", node))

    def failed_peer(self, attempt: int = 0) -> str | None:
        """The first peer whose part of this attempt failed on its own (its exit record)."""
        for peer in self.members:
            found = self.exit_record(peer) if peer != self.node else None
            if found and found.get("attempt", 0) == attempt and found["rc"] != 0 and not found.get("stopped_by"):
                return peer
        return None

    @property
    def peers(self) -> dict:
        """The other nodes' addresses on the training network."""
        return {node: address for node, address in self.conf.addresses.items() if node != self.node}

    def stopped_by_mark(self) -> str | None:
        """The node whose failure stopped this node's part (a peer said so: stop-local)."""
        return _text(self.node_path("stopped_by")) or None

    def attempt(self) -> int:
        """The attempt this node's runner runs: 0, then each restart's (the supervisor's request id)."""
        return int(_text(self.run_path("attempt")) or 0)

    def stopping(self) -> bool:
        """train_action=stop marked this node's part (before any node was stopped) for this start."""
        return _text(self.run_path("stopping")) == self.run_id

    def standing_by(self) -> bool:
        """This node is a spare whose runner waits for a restart to bring it in (this start's)."""
        return _text(self.run_path("standby")) == self.run_id

    # --- writing, as the training user ---------------------------------------------------------------------------

    def as_user(self, work: Callable[..., object], *args: Any) -> None:
        """work(*args) as the training user: in a child process when this one is root (its ids stay root's)."""
        if os.geteuid() != 0 or self.user.pw_uid == 0:
            work(*args)
            return
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child; its exit status says how it went
            code = 1
            try:
                os.initgroups(self.user.pw_name, self.user.pw_gid)
                os.setgid(self.user.pw_gid)
                os.setuid(self.user.pw_uid)
                work(*args)
                code = 0
            except BaseException as exc:  # noqa: B902 - reported by the status
                os.write(2, ("trainops-job: as %s: %s\n" % (self.user.pw_name, exc)).encode())
            finally:
                os._exit(code)
        if os.waitpid(pid, 0)[1] != 0:
            raise OSError("could not write as %s in %s" % (self.user.pw_name, self.dir))

    def write(self, name: str, data: Any) -> None:
        self.as_user(write_json, name if name.startswith("/") else self.path(name), data)

    def write_text(self, path: str, text: str, mode: str = "w") -> None:
        self.as_user(_put, path, text, mode)

    def remove(self, *paths: str) -> None:
        def work() -> None:
            for path in paths:
                _remove(path)
        self.as_user(work)

    def makedirs(self, *paths: str) -> None:
        def work() -> None:
            for path in paths:
                os.makedirs(path, exist_ok=True)
        self.as_user(work)

    def user_env(self) -> dict[str, str]:
        """The training user's HOME, USER and LOGNAME, for what runs as that user from a runner started as root."""
        return {"HOME": self.user.pw_dir, "USER": self.user.pw_name, "LOGNAME": self.user.pw_name}

    def rank_counts(self) -> list[int]:
        """The ranks of each start of this run so far, the first start's first (resume's world), then every restart's (its
        nodes times the ranks a node runs): a checkpoint written by any of them is whole with that many ranks' files."""
        world = int((self.conf.resume or {}).get("world") or 1)
        per_node = max(1, world // len(self.nodes))
        events = [e for e in self.read(JOB_RECORD, {}).get("events") or [] if e.get("run_id") == self.run_id]
        restarts = [len(e["nodes"]) * per_node for e in events if e.get("event") == Event.RESTART and e.get("nodes")]
        return [world] + [n for n in dict.fromkeys(restarts) if n != world]

    def add_event(self, event: dict, at: float) -> dict:
        """One event in the job record: what the supervisor saw and did, for status and the page."""
        record = self.read(JOB_RECORD, {})
        event = dict(event, run_id=self.run_id, at=round(at, 3))
        record["events"] = (record.get("events") or []) + [event]
        self.write(JOB_RECORD, record)
        return event

    def mark(self, kind: str, text: str) -> None:
        """A mark of this node's in /run (root's)."""
        os.makedirs(RUN_DIR, exist_ok=True)
        _put(self.run_path(kind), text + "\n")

    def unmark(self, kind: str) -> None:
        _remove(self.run_path(kind))


def _text(path: str) -> str | None:
    try:
        with open(path) as handle:
            return handle.read().strip()
    except OSError:
        return None


def _put(path: str, text: str, mode: str = "w") -> None:
    with open(path, mode) as handle:
        handle.write(text)


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
