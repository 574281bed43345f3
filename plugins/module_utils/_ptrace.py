# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Whether this node's root may read another user's process (py-spy reads a rank's Python stack from its memory, as
ptrace allows), why not, and what the kernel still shows of a process where it may not.

Node side: the module stack_access (the doctor, train's pre-flight) and the job runner's stall diagnosis (which links
this file: standard library only).
"""

from __future__ import annotations

import os
import platform
import signal
import sys
import time
from typing import Callable

YAMA = "/proc/sys/kernel/yama/ptrace_scope"
CAP_SYS_PTRACE = 19
# The syscalls a waiting rank sits in, by number (x86_64, aarch64): what /proc/PID/syscall names.
SYSCALLS = {
    "x86_64": {0: "read", 7: "poll", 16: "ioctl", 23: "select", 24: "sched_yield", 35: "nanosleep", 45: "recvfrom",
               47: "recvmsg", 61: "wait4", 202: "futex", 230: "clock_nanosleep", 232: "epoll_wait", 270: "pselect6",
               271: "ppoll", 281: "epoll_pwait"},
    "aarch64": {22: "epoll_pwait", 29: "ioctl", 63: "read", 72: "pselect6", 73: "ppoll", 98: "futex", 101: "nanosleep",
                115: "clock_nanosleep", 124: "sched_yield", 207: "recvfrom", 212: "recvmsg", 260: "wait4"},
}


def _read(path: str) -> str | None:
    try:
        with open(path) as handle:
            return handle.read().strip()
    except OSError:
        return None


def access(proc: str = "/proc") -> dict:
    """{ptrace_scope: Yama's setting or None without Yama, cap_sys_ptrace: whether this process may trace another user's}."""
    scope = _read(YAMA.replace("/proc", proc, 1))
    status = _read(os.path.join(proc, "self", "status")) or ""
    effective = next((line.split()[1] for line in status.splitlines() if line.startswith("CapEff:")), None)
    return {"ptrace_scope": int(scope) if scope and scope.isdigit() else None,
            "cap_sys_ptrace": bool(int(effective, 16) >> CAP_SYS_PTRACE & 1) if effective else None}


def grant(found: dict) -> str | None:
    """What to grant so that root reads the ranks' stacks, or None where nothing stands in the way."""
    needs = []
    if found.get("ptrace_scope") == 3:
        needs.append("kernel.yama.ptrace_scope is 3 (no tracing at all; it is lowered only by a reboot): boot with it at "
                     "1 or less")
    if found.get("cap_sys_ptrace") is False:
        needs.append("root here lacks CAP_SYS_PTRACE (a container started without it): start the node's container with "
                     "--cap-add SYS_PTRACE")
    return "; ".join(needs) or None


def kernel_view(pid: int, proc: str = "/proc") -> dict:
    """What the kernel tells of a process without tracing it: {wchan, syscall, threads: {state letter: count}}; None
    where it is not readable (wchan needs the process's own user, syscall more under Yama)."""
    base = os.path.join(proc, str(pid))
    wchan = _read(os.path.join(base, "wchan"))
    call = (_read(os.path.join(base, "syscall")) or "").split()
    number = int(call[0]) if call and call[0].lstrip("-").isdigit() else None
    names = SYSCALLS.get(platform.machine(), {})
    threads: dict[str, int] = {}
    for tid in os.listdir(os.path.join(base, "task")) if os.path.isdir(os.path.join(base, "task")) else []:
        stat = _read(os.path.join(base, "task", tid, "stat")) or ""
        letter = stat.rsplit(")", 1)[-1].split()[:1]
        if letter:
            threads[letter[0]] = threads.get(letter[0], 0) + 1
    return {"wchan": wchan if wchan not in (None, "", "0") else None,
            "syscall": "running" if call[:1] == ["running"] else names.get(number, "syscall %d" % number) if number is not None and number >= 0 else None,
            "threads": threads}


def _sleeper(user: tuple[int, int] | None) -> int:
    """A sleeping Python process (of user (uid, gid), where root starts it, as the ranks run): its pid."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child becomes the sleeper
        try:
            if user and os.geteuid() == 0:
                os.setgroups([])
                os.setgid(user[1])
                os.setuid(user[0])
            os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(60)"])
        finally:
            os._exit(127)
    return pid


def trial(py_spy: str | None, run: Callable[[list[str]], tuple[int, str, str]], user: tuple[int, int] | None = None) -> str | None:
    """py-spy dump of a sleeping Python process of user: None when it read the stack, else why not (py-spy's own last
    line). run(argv) -> (rc, stdout, stderr) runs py-spy (the module's run_command)."""
    if not py_spy or not os.access(py_spy, os.X_OK):
        return "py-spy is not installed (%s)" % py_spy
    sleeper = _sleeper(user)
    try:
        time.sleep(0.3)  # the interpreter is up
        rc, out, err = run([py_spy, "dump", "--pid", str(sleeper), "--nonblocking"])
    finally:
        os.kill(sleeper, signal.SIGKILL)
        os.waitpid(sleeper, 0)
    return None if rc == 0 else ((err or out).strip().splitlines() or ["py-spy failed"])[-1][:300]
