# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Whether root may read a rank's stack (Yama, CAP_SYS_PTRACE), py-spy's trial, and the kernel's view of a process."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from ansible_collections.trainops.cluster.plugins.module_utils import _ptrace


def proc_tree(tmp_path, scope, cap_eff):
    (tmp_path / "sys" / "kernel" / "yama").mkdir(parents=True)
    if scope is not None:
        (tmp_path / "sys" / "kernel" / "yama" / "ptrace_scope").write_text("%d\n" % scope)
    (tmp_path / "self").mkdir()
    (tmp_path / "self" / "status").write_text("Name:\tpython3\nCapInh:\t0000000000000000\nCapEff:\t%s\n" % cap_eff)
    return str(tmp_path)


def test_a_container_without_cap_sys_ptrace_and_a_locked_yama_are_named_with_what_to_grant(tmp_path):
    # A default Docker container's effective set (no CAP_SYS_PTRACE, bit 19) under Yama's mode 3.
    found = _ptrace.access(proc_tree(tmp_path, 3, "00000000a80425fb"))
    assert found == {"ptrace_scope": 3, "cap_sys_ptrace": False}
    assert _ptrace.grant(found) == (
        "kernel.yama.ptrace_scope is 3 (no tracing at all; it is lowered only by a reboot): boot with it at 1 or less; "
        "root here lacks CAP_SYS_PTRACE (a container started without it): start the node's container with --cap-add SYS_PTRACE")


def test_root_with_every_capability_and_no_yama_needs_nothing(tmp_path):
    found = _ptrace.access(proc_tree(tmp_path, None, "000001ffffffffff"))
    assert found == {"ptrace_scope": None, "cap_sys_ptrace": True} and _ptrace.grant(found) is None


def test_the_kernels_view_of_a_waiting_process():
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        time.sleep(0.5)
        seen = _ptrace.kernel_view(sleeper.pid)
    finally:
        sleeper.kill()
        sleeper.wait()
    # Asleep in the kernel: every thread sleeping; the syscall (where the kernel lets this user read it) is a sleep.
    assert set(seen["threads"]) == {"S"} and seen["syscall"] in (None, "clock_nanosleep", "nanosleep", "select", "pselect6")


def run(argv):
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=30)
    return done.returncode, done.stdout, done.stderr


def test_py_spys_trial_says_why_it_could_not_read_a_stack(tmp_path):
    denied = tmp_path / "py-spy"
    denied.write_text("#!/bin/sh\necho 'Error: Permission denied (os error 13)' >&2\nexit 1\n")
    denied.chmod(0o755)
    assert _ptrace.trial(str(denied), run) == "Error: Permission denied (os error 13)"
    assert _ptrace.trial(str(tmp_path / "missing"), run) == "py-spy is not installed (%s)" % (tmp_path / "missing")
    reads = tmp_path / "reads"
    reads.write_text("#!/bin/sh\necho 'Thread 1 (idle): \"MainThread\"'\n")
    reads.chmod(0o755)
    assert _ptrace.trial(str(reads), run) is None and os.access(str(reads), os.X_OK)
