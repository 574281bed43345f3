# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run an external command from a module with a hard time limit."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time

# timeout(1)'s exit codes: 124 after SIGTERM, 137 when it had to send SIGKILL (as seen by a shell); the
# SIGKILL goes to its whole process group, timeout(1) included, which run_command then reports as -9.
TIMED_OUT = (124, 137, -9)
# Seconds between timeout(1)'s SIGTERM and its SIGKILL.
KILL_AFTER = 2


def environment_of(module, environment):
    """A module's O(environment) dict as strings; fails on values that would not reach NCCL as meant (a boolean
    would arrive as True, which NCCL reads as 0)."""
    result = {}
    for name, value in (environment or {}).items():
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            module.fail_json(msg="environment %s: give a string or a number, not %r" % (name, value))
        result[str(name)] = str(value)
    return result


def run_bounded(module, argv, timeout, environ_update=None, umask=None):
    """Run argv under coreutils timeout(1), which kills the command's whole process group at the deadline.

    umask: the command's umask (None: the module's). Returns (rc, stdout, stderr, timed_out). A process the kernel cannot kill (an nvidia-smi on a GPU that
    fell off the bus) still holds the module; roles bound such modules with the task keyword `timeout`.
    """
    timeout_bin = module.get_bin_path("timeout", required=True, opt_dirs=["/usr/bin", "/bin"])
    start = time.monotonic()
    rc, out, err = module.run_command([timeout_bin, "-k", str(KILL_AFTER), str(timeout)] + list(argv),
                                      environ_update=environ_update or {}, expand_user_and_vars=False, umask=umask)
    return rc, out, err, rc in TIMED_OUT and time.monotonic() - start >= timeout


def _stop_group(process, grace):
    """SIGTERM the process group, SIGKILL it after grace seconds."""
    for signum in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, signum)
        except OSError:  # the group is gone
            return
        try:
            process.wait(grace)
            return
        except subprocess.TimeoutExpired:
            continue


def run_watched(argv, environ, timeout, ready, ready_timeout, clock=time.monotonic):
    """Run argv in a process group of its own, stdout and stderr as one stream, watching for a line.

    Stops the group (SIGTERM, SIGKILL KILL_AFTER seconds later) at timeout seconds, or at ready_timeout seconds when
    no line has matched the regular expression ready by then: a launch that never gets past its rendezvous is
    stopped at the rendezvous limit, not at the whole run's. Returns (rc, output, stopped) with stopped None,
    "timeout" or "not ready".
    """
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               env=dict(os.environ, **environ), start_new_session=True)
    lines, seen = [], threading.Event()
    pattern = re.compile(ready)

    def read():
        for raw in iter(process.stdout.readline, b""):
            line = raw.decode("utf-8", "replace")
            lines.append(line)
            if pattern.search(line):
                seen.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    start, stopped = clock(), None
    while process.poll() is None:
        elapsed = clock() - start
        if elapsed >= timeout:
            stopped = "timeout"
        elif elapsed >= ready_timeout and not seen.is_set():
            stopped = "not ready"
        if stopped:
            _stop_group(process, KILL_AFTER)
            break
        time.sleep(0.1)
    process.wait()
    reader.join(KILL_AFTER)
    return process.returncode, "".join(lines), stopped
