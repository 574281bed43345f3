# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""This node's part of a stall's diagnosis, as root: each process of the job (inside the image too) with its state,
every rank's Python stack (py-spy) or, where ptrace is denied, what the kernel shows of it and what to grant, each
NCCL rank's flight recorder (asked through its pipe), the GPUs, and whether this node still reaches its peers on the
training network. Written to the node's diagnosis record, which the supervisor waits for."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
import time
from typing import Any, Callable, Literal, overload

from . import _ptrace, processes, records
from ._flight_recorder import ask_dump, flight_paths, flight_recorder, mtime

# Seconds py-spy may take for one process (it reads a stopped process's memory without waking it: --nonblocking).
STACK_TIMEOUT = 15
PY_SPY = "/opt/trainops/tools/bin/py-spy"
# How a node sees its peers on the training network: sshd's port on each peer's cluster_ip (the training user's SSH
# between nodes needs it open), answered (even refused) or not within REACH_TIMEOUT seconds.
REACH_PORT, REACH_TIMEOUT = 22, 3.0
_STATES = {"R": "running", "S": "sleeping", "D": "in the kernel (uninterruptible)", "T": "stopped", "t": "stopped (traced)",
           "Z": "zombie", "X": "dead", "I": "idle"}


@overload
def _read(path: str, mode: Literal["r"] = "r") -> str | None: ...


@overload
def _read(path: str, mode: Literal["rb"]) -> bytes | None: ...


def _read(path: str, mode: str = "r") -> Any:
    try:
        with open(path, mode) as handle:
            return handle.read()
    except OSError:
        return None


def environ(pid: int) -> dict:
    raw = _read("/proc/%d/environ" % pid, "rb") or b""
    return dict(p.decode("utf-8", "replace").split("=", 1) for p in raw.split(b"\0") if b"=" in p)


def state(pid: int) -> str:
    """The state letter and its word, from /proc/PID/stat (the field after the command's parenthesis)."""
    try:
        letter = (_read("/proc/%d/stat" % pid) or "").rsplit(")", 1)[1].split()[0]
    except IndexError:
        return "?"
    return "%s (%s)" % (letter, _STATES.get(letter, "unknown"))


def cmdline(pid: int) -> str:
    return (_read("/proc/%d/cmdline" % pid, "rb") or b"").replace(b"\0", b" ").decode("utf-8", "replace").strip()


def py_spy() -> str | None:
    """Where this node's py-spy is (train_py_spy_version installs it), or None."""
    return PY_SPY if os.access(PY_SPY, os.X_OK) else shutil.which("py-spy")


def stack_of(pid: int, tool: str | None, timeout: float = STACK_TIMEOUT) -> tuple:
    """(py-spy's JSON dump of pid, or None, and why not). --nonblocking: a stopped rank stays as it is."""
    if not tool:
        return None, "py-spy is not installed on this node (train_py_spy_version)"
    try:
        run = subprocess.run([tool, "dump", "--pid", str(pid), "--json", "--nonblocking"], capture_output=True, text=True,
                             timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return None, "py-spy took over %d s" % timeout
    if run.returncode != 0:
        return None, (run.stderr.strip().splitlines() or ["py-spy failed"])[-1][:300]
    try:
        return json.loads(run.stdout), None
    except ValueError:
        return None, "py-spy printed no JSON"


def kernel_view(pid: int) -> dict:
    """What the kernel shows of a rank without tracing it, read as the rank's own user where root may not (a node
    without CAP_SYS_PTRACE): a child process takes its uid to read /proc. Called with no other thread running."""
    seen, owner = _ptrace.kernel_view(pid), os.stat("/proc/%d" % pid)
    if seen["wchan"] or os.geteuid() != 0 or owner.st_uid == 0:
        return seen
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child writes what it read
        os.close(read)
        try:
            os.setgid(owner.st_gid)
            os.setuid(owner.st_uid)
            os.write(write, json.dumps(_ptrace.kernel_view(pid)).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        data = pipe.read()
    os.waitpid(child, 0)
    return json.loads(data) if data else {}


def gpus() -> list:
    """Each GPU's utilization and memory now (nvidia-smi), or [] where there is none."""
    if not shutil.which("nvidia-smi"):
        return []
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index,uuid,utilization.gpu,memory.used,memory.total",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=20, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    rows = [[f.strip() for f in line.split(",")] for line in out.splitlines() if line.count(",") == 4]
    return [{"index": int(r[0]), "uuid": r[1], "utilization_percent": int(r[2]), "memory_used_mib": int(r[3]),
             "memory_total_mib": int(r[4])} for r in rows if r[0].isdigit() and r[2].isdigit()]


def reach(peers: dict, port: int = REACH_PORT, timeout: float = REACH_TIMEOUT) -> dict:
    """{peer: None when it answered on the training network (a refusal is an answer), else why not}, all at once."""
    found: dict[str, str | None] = {}

    def probe(peer: str, address: str) -> None:
        try:
            socket.create_connection((address, port), timeout=timeout).close()
            found[peer] = None
        except ConnectionRefusedError:
            found[peer] = None
        except OSError as exc:
            found[peer] = "timed out" if isinstance(exc, socket.timeout) else (exc.strerror or str(exc)).lower()

    threads = [threading.Thread(target=probe, args=item) for item in peers.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return found


# --- this node's answer --------------------------------------------------------------------------------------------

def diagnose(job: records.Job, stall: int, clock: Callable[[], float] = time.time) -> dict:
    """This node's part of the stall's diagnosis."""
    tool = py_spy()
    reached: dict[str, str | None] = {}
    prober = threading.Thread(target=lambda: reached.update(reach(job.peers)))
    prober.start()
    found = [(p["pid"], environ(p["pid"])) for p in processes.find("TRAINOPS_RUN_ID", job.run_id, having="TRAINOPS_NODE=" + job.node)]
    ranks = [(pid, env) for pid, env in found if "RANK" in env and "LOCAL_RANK" in env]
    asked: dict[int, tuple[str, float | None, str | None]] = {}
    stacks: dict[int, tuple] = {}
    # The flight recorders first: each dump is written while py-spy reads the stacks.
    for pid, env in ranks:
        pipe, dump = flight_paths(pid, env, int(env["RANK"]))
        if dump:
            stopped = state(pid).startswith(("T", "t"))
            asked[int(env["RANK"])] = (dump, mtime(dump), "not asked: the rank is stopped" if stopped
                                       else ask_dump(pipe) if pipe else "not asked: no TORCH_NCCL_DEBUG_INFO_PIPE_FILE")
    # Every rank at once: py-spy reads each in well under a second, but a stuck one may take its timeout.
    threads = [threading.Thread(target=lambda pid=pid: stacks.update({pid: stack_of(pid, tool)})) for pid, dummy in ranks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    prober.join()  # a child process that reads as a rank's user is forked below: no thread of ours runs then
    listed = []
    for pid, env in found:
        entry = {"pid": pid, "state": state(pid), "command": cmdline(pid)[:300]}
        if pid in stacks:
            entry.update(rank=int(env["RANK"]), local_rank=int(env["LOCAL_RANK"]), world_size=int(env.get("WORLD_SIZE") or 0),
                         stack=stacks[pid][0], stack_error=stacks[pid][1])
            if stacks[pid][0] is None:
                entry["kernel"] = kernel_view(pid)
        listed.append(entry)
    dumps = flight_recorder(asked, clock=clock)
    for entry in listed:
        if entry.get("rank") in dumps:
            entry["flight_recorder"] = dumps[entry["rank"]]
    access = _ptrace.access()
    return {"node": job.node, "run_id": job.run_id, "stall": stall, "at": round(clock(), 3), "processes": listed,
            "gpus": gpus(), "unreached": {p: w for p, w in reached.items() if w}, "access": dict(access, grant=_ptrace.grant(access))}
