# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A node's state from an exit record that holds the kernel's OOM kills of the attempt (the runner reads them from the
kernel log before and after it: _oom.new): the kill said after how the part ended, not left as an exit status."""

from __future__ import annotations

from trainops_job import records

KILL = {"pid": 4242, "task": "python3", "uid": 2000, "memcg": False, "rss_kb": 31 * 2 ** 20}


def test_the_kill_is_said_after_the_exit_status():
    assert records.state({"rc": -9, "oom_kills": [KILL]}, False) == (
        "failed: exited -9; killed by the kernel's OOM killer: python3 (pid 4242) held 31.0 GiB (the node's memory ran out)")
    # A part stopped by the supervisor after it, and one whose restart is pending, keep their words after the kill's.
    assert records.state({"rc": 1, "oom_kills": [KILL], "final": False}, False).endswith("ran out); restart pending")
    assert records.state({"rc": 1, "oom_kills": []}, False) == "failed: exited 1"
