# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Run an external command from a module with a hard time limit.

Node side: shipped to the nodes inside the modules that import it (allreduce_run, comm_facts, container_image,
dcgm_diag, gpu_facts, image_facts, nccl_tests_state, nft_table, ssh_mesh, torchrun_run).
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

if TYPE_CHECKING:
    from subprocess import Popen

    from ansible.module_utils.basic import AnsibleModule

# timeout(1)'s exit codes: 124 after SIGTERM, 137 when it had to send SIGKILL (as seen by a shell); the
# SIGKILL goes to its whole process group, timeout(1) included, which run_command then reports as -9.
TIMED_OUT = (124, 137, -9)
# Seconds between timeout(1)'s SIGTERM and its SIGKILL.
KILL_AFTER = 2


def environment_of(module: AnsibleModule, environment: Mapping[str, Any] | None) -> dict[str, str]:
    """A module's O(environment) dict as strings; fails on values that would not reach NCCL as meant (a boolean
    would arrive as True, which NCCL reads as 0)."""
    result: dict[str, str] = {}
    for name, value in (environment or {}).items():
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            module.fail_json(msg="environment %s: give a string or a number, not %r" % (name, value))
        result[str(name)] = str(value)
    return result


def run_bounded(module: AnsibleModule, argv: Sequence[str], timeout: float, environ_update: dict[str, str] | None = None,
                umask: int | None = None) -> tuple[int, str, str, bool]:
    """Run argv under coreutils timeout(1), which kills the command's whole process group at the deadline.

    umask: the command's umask (None: the module's). Returns (rc, stdout, stderr, timed_out). A process the kernel cannot kill (an nvidia-smi on a GPU that
    fell off the bus) still holds the module; roles bound such modules with the task keyword `timeout`.
    """
    timeout_bin = module.get_bin_path("timeout", required=True, opt_dirs=["/usr/bin", "/bin"])
    start = time.monotonic()
    rc, out, err = module.run_command([timeout_bin, "-k", str(KILL_AFTER), str(timeout)] + list(argv),
                                      environ_update=environ_update or {}, expand_user_and_vars=False, umask=umask)
    return rc, out, err, rc in TIMED_OUT and time.monotonic() - start >= timeout


def run_watched(module: AnsibleModule, argv: Sequence[str], environ: dict[str, str] | None, timeout: float,
                ready: Callable[[], bool], ready_timeout: float, stop: Callable[[], object],
                clock: Callable[[], float] = time.monotonic) -> tuple[int, str, str, str | None]:
    """Run argv with run_command while a watchdog stops it at timeout seconds, or at ready_timeout seconds when ready()
    is still false then (a launch that never gets past its rendezvous is stopped at the rendezvous limit, not the run's).

    stop() must end the command and everything it started (the caller knows them: e.g. processes.end_run by the
    run's variable, which also reaches a container's processes). Returns (rc, stdout, stderr, stopped) with stopped
    None, "timeout" or "not ready".
    """
    state: dict[str, str | None] = {"stopped": None}

    def watch(process: Popen[bytes]) -> None:
        start, seen = clock(), False
        while process.poll() is None:
            elapsed = clock() - start
            # Once ready, always: a launch whose workers have ended (a rank failed) is not stopped as never ready.
            seen = seen or ready()
            if elapsed >= timeout:
                state["stopped"] = "timeout"
            elif elapsed >= ready_timeout and not seen:
                state["stopped"] = "not ready"
            if state["stopped"]:
                stop()
                return
            time.sleep(0.5)

    def start_watchdog(process: Popen[bytes]) -> None:
        threading.Thread(target=watch, args=(process,), daemon=True).start()

    rc, out, err = module.run_command(list(argv), environ_update=environ, expand_user_and_vars=False,
                                      before_communicate_callback=start_watchdog)
    return rc, out, err, state["stopped"]
