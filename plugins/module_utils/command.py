# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run an external command from a module with a hard time limit."""

from __future__ import annotations

import time

# timeout(1)'s exit codes: 124 after SIGTERM, 137 when it had to send SIGKILL (as seen by a shell); the
# SIGKILL goes to its whole process group, timeout(1) included, which run_command then reports as -9.
TIMED_OUT = (124, 137, -9)
# Seconds between timeout(1)'s SIGTERM and its SIGKILL.
KILL_AFTER = 2


def run_bounded(module, argv, timeout, environ_update=None):
    """Run argv under coreutils timeout(1), which kills the command's whole process group at the deadline.

    Returns (rc, stdout, stderr, timed_out). A process the kernel cannot kill (an nvidia-smi on a GPU that
    fell off the bus) still holds the module; roles bound such modules with the task keyword `timeout`.
    """
    timeout_bin = module.get_bin_path("timeout", required=True, opt_dirs=["/usr/bin", "/bin"])
    start = time.monotonic()
    rc, out, err = module.run_command([timeout_bin, "-k", str(KILL_AFTER), str(timeout)] + list(argv),
                                      environ_update=environ_update or {}, expand_user_and_vars=False)
    return rc, out, err, rc in TIMED_OUT and time.monotonic() - start >= timeout
