# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""End every process of one run, found by a variable in its environment (inside containers too).

Node side: shipped to the nodes inside the modules that import it (end_run, torchrun_run).
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any, Callable, Literal, overload

# /proc/<pid>/status State letters.
STATES = {"R": "running", "S": "sleeping", "D": "uninterruptible", "T": "stopped", "t": "traced", "Z": "zombie"}


@overload
def read(path: str, mode: Literal["r"] = "r") -> str | None: ...


@overload
def read(path: str, mode: Literal["rb"]) -> bytes | None: ...


def read(path: str, mode: str = "r") -> Any:
    """A file's contents (bytes with mode "rb"), or None once the process it describes has ended."""
    try:
        with open(path, mode) as handle:
            return handle.read()
    except OSError:  # the process ended, or is not ours to read
        return None


def _status(proc: str, pid: str) -> tuple[str, int | None]:
    """(state, parent pid) from /proc/<pid>/status."""
    fields = dict(line.split(":", 1) for line in (read(os.path.join(proc, pid, "status")) or "").splitlines() if ":" in line)
    if "State" not in fields:
        return "gone", None
    letter = fields["State"].split()[0]
    return STATES.get(letter, letter), int(fields.get("PPid", "0").strip() or 0)


def find(name: str, value: str, proc: str = "/proc", having: str | None = None) -> list[dict[str, Any]]:
    """Processes whose environment holds name=value (and a variable named having, or having's NAME=VALUE, when given):
    [{pid, state, comm, parent}], zombies left out (they hold nothing)."""
    marker = ("%s=%s" % (name, value)).encode()
    pair = having.encode() if having and "=" in having else None
    prefix = ("%s=" % having).encode() if having and not pair else None
    found: list[dict[str, Any]] = []
    for pid in sorted((entry for entry in os.listdir(proc) if entry.isdigit()), key=int):
        if int(pid) == os.getpid():
            continue
        environ = read(os.path.join(proc, pid, "environ"), "rb")
        variables = environ.split(b"\0") if environ is not None else []
        if marker not in variables or (pair and pair not in variables) or (prefix and not any(v.startswith(prefix) for v in variables)):
            continue
        state, parent = _status(proc, pid)
        if state not in ("zombie", "gone"):
            found.append({"pid": int(pid), "state": state, "comm": (read(os.path.join(proc, pid, "comm")) or "?").strip(),
                          "parent": parent})
    return found


# The container engine's own processes (the client, podman's container monitor and the cleanup it runs, its
# storage and network helpers, Docker's shim, the OCI runtime): they inherit the launch's environment, so they carry
# the run's variable too. They end with the container, and record its end and remove it (--rm) as they go; signalled
# with the job, the storage helper (fuse-overlayfs) took the container's files away from ranks still ending ("Transport
# endpoint is not connected", then "Bus error").
ENGINE = ("podman", "conmon", "docker", "containerd-shim", "fuse-overlayfs", "slirp4netns", "pasta", "rootlessport", "runc",
          "crun")


def _signal(processes: list[dict[str, Any]], *signums: int) -> None:
    for process in processes:
        for signum in signums:
            try:
                os.kill(process["pid"], signum)
            except OSError:  # ended meanwhile
                pass


def _wait_gone(name: str, value: str, seconds: float, proc: str, clock: Callable[[], float], sleep: Callable[[float], object],
               having: str | None = None, among: set[int] | None = None) -> list[dict[str, Any]]:
    """What is left of the run after at most seconds (of among's pids, where given)."""
    deadline = clock() + seconds
    while True:
        left = [p for p in find(name, value, proc, having) if among is None or p["pid"] in among]
        if not left or clock() >= deadline:
            return left
        sleep(0.2)


def end_run(name: str, value: str, grace: float = 5.0, engine_grace: float = 5.0, proc: str = "/proc",
            clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], object] = time.sleep,
            having: str | None = None, spare: int | None = None) -> dict[str, list[dict[str, Any]]]:
    """End every process of the run, its own before the container engine's, and say what happened.

    The run's own processes (the launcher and its ranks, inside the image too) get SIGTERM (and SIGCONT: a stopped
    process would hold it) and grace seconds to end: a trainer saves, torchrun ends its workers and reports. The
    engine is left alone meanwhile; once its container's processes have ended it ends by itself. What of the run's own
    is left after the grace gets SIGKILL, and the engine's engine_grace seconds more to see its container end: killed
    with it, podman's monitor leaves a container listed as running that nothing backs and that not even `podman rm -f`
    removes (podman 5.4: "conmon exited prematurely"). having: as find's. spare: a pid whose children get no SIGTERM
    (a runner's own shell around the command: it ends with the command and passes on its exit status). Returns {found, killed, left}: what was
    running, what needed SIGKILL, and what survived it a second later (a process stuck in the kernel, on a lost GPU).
    """
    found = find(name, value, proc, having)
    if not found:
        return {"found": [], "killed": [], "left": []}
    own = [p for p in found if not p["comm"].startswith(ENGINE) and (spare is None or p["parent"] != spare)]
    _signal(own, signal.SIGTERM, signal.SIGCONT)
    killed = _wait_gone(name, value, grace, proc, clock, sleep, having, {p["pid"] for p in own}) if own else []
    _signal(killed, signal.SIGKILL)
    engine = _wait_gone(name, value, engine_grace, proc, clock, sleep, having)
    _signal(engine, signal.SIGKILL)
    killed += [p for p in engine if p["pid"] not in {k["pid"] for k in killed}]
    left = _wait_gone(name, value, 1.0, proc, clock, sleep, having) if engine else []
    return {"found": found, "killed": killed, "left": left}
