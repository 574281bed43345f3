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

# /proc/<pid>/status State letters.
STATES = {"R": "running", "S": "sleeping", "D": "uninterruptible", "T": "stopped", "t": "traced", "Z": "zombie"}


def _read(path, mode="r"):
    try:
        with open(path, mode) as handle:
            return handle.read()
    except OSError:  # the process ended, or is not ours to read
        return None


def _state(proc, pid):
    status = _read(os.path.join(proc, pid, "status")) or ""
    for line in status.splitlines():
        if line.startswith("State:"):
            letter = line.split()[1]
            return STATES.get(letter, letter)
    return "gone"


def find(name, value, proc="/proc", having=None):
    """Processes whose environment holds name=value (and a variable named having, when given): [{pid, state, comm}],
    zombies left out (they hold nothing)."""
    marker = ("%s=%s" % (name, value)).encode()
    prefix = ("%s=" % having).encode() if having else None
    found = []
    for pid in sorted((entry for entry in os.listdir(proc) if entry.isdigit()), key=int):
        if int(pid) == os.getpid():
            continue
        environ = _read(os.path.join(proc, pid, "environ"), "rb")
        variables = environ.split(b"\0") if environ is not None else []
        if marker not in variables or (prefix and not any(v.startswith(prefix) for v in variables)):
            continue
        state = _state(proc, pid)
        if state not in ("zombie", "gone"):
            found.append({"pid": int(pid), "state": state, "comm": (_read(os.path.join(proc, pid, "comm")) or "?").strip()})
    return found


# The container engine's own processes (the client, podman's container monitor and the cleanup it runs, Docker's
# shim): they inherit the launch's environment, so they carry the run's variable too. They end with the container,
# and record its end and remove it (--rm) as they go.
ENGINE = ("podman", "conmon", "docker", "containerd-shim")


def _signal(processes, signum):
    for process in processes:
        try:
            os.kill(process["pid"], signum)
        except OSError:  # ended meanwhile
            pass


def _wait_gone(name, value, seconds, proc, clock, sleep):
    deadline = clock() + seconds
    left = find(name, value, proc)
    while left and clock() < deadline:
        sleep(0.2)
        left = find(name, value, proc)
    return left


def end_run(name, value, grace=5.0, engine_grace=5.0, proc="/proc", clock=time.monotonic, sleep=time.sleep):
    """SIGTERM every process of the run, SIGKILL what is left after grace seconds, and say what happened.

    SIGTERM first: a container engine's client passes it on to the container, which then ends and is removed. After
    the grace the run's own processes are killed first and the engine's get engine_grace seconds to see their
    container end: killed with it, podman's monitor leaves a container listed as running that nothing backs and that
    not even `podman rm -f` removes (podman 5.4: "conmon exited prematurely"). Returns {found, killed, left}: what
    was still running, what needed SIGKILL, and what survived it a second later (a process stuck in the kernel, on a
    lost GPU say).
    """
    found = find(name, value, proc)
    if not found:
        return {"found": [], "killed": [], "left": []}
    _signal(found, signal.SIGTERM)
    after_grace = _wait_gone(name, value, grace, proc, clock, sleep)
    killed = [p for p in after_grace if not p["comm"].startswith(ENGINE)]
    _signal(killed, signal.SIGKILL)
    engine = _wait_gone(name, value, engine_grace, proc, clock, sleep) if after_grace else []
    _signal(engine, signal.SIGKILL)
    killed += [p for p in engine if p["pid"] not in {k["pid"] for k in killed}]
    left = _wait_gone(name, value, 1.0, proc, clock, sleep) if engine else []
    return {"found": found, "killed": killed, "left": left}
