# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A node's state from an exit record that holds the kernel's OOM kills of the attempt (the runner reads them from the
kernel log before and after it: _oom.new): the kill said after how the part ended, not left as an exit status."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from trainops_job import _oom, perf, records

KILL = {"pid": 4242, "task": "python3", "uid": 2000, "memcg": False, "rss_kb": 31 * 2 ** 20}


def test_the_kill_is_said_after_the_exit_status():
    assert records.state({"rc": -9, "oom_kills": [KILL]}, False) == (
        "failed: exited -9; killed by the kernel's OOM killer: python3 (pid 4242) held 31.0 GiB (the node's memory ran out)")
    # A part stopped by the supervisor after it, and one whose restart is pending, keep their words after the kill's.
    assert records.state({"rc": 1, "oom_kills": [KILL], "final": False}, False).endswith("ran out); restart pending")
    assert records.state({"rc": 1, "oom_kills": []}, False) == "failed: exited 1"


def test_the_sampler_keeps_the_rank_of_a_process_gone_for_the_kills_record():
    """A rank killed between two looks is gone from /proc when the runner reads the kernel log: the sampler still knows
    which rank its pid was (perf.Sampler.ranks, every pid seen as a rank of the attempt)."""
    run_id = "oom-%d" % os.getpid()
    env = dict(os.environ, TRAINOPS_RUN_ID=run_id, TRAINOPS_NODE="node2", RANK="3", LOCAL_RANK="0")
    process = subprocess.Popen([sys.executable, "-c", "import time\ntime.sleep(60)"], env=env)
    try:
        time.sleep(0.3)
        sampler = perf.Sampler(run_id, "node2")
        sampler.sample()
    finally:
        process.kill()
        process.wait()
    sampler.sample()
    assert process.pid not in sampler.known and sampler.ranks == {process.pid: 3}
    killed = _oom.ranked([dict(KILL, pid=process.pid)], sampler.ranks)
    assert records.state({"rc": -9, "oom_kills": killed}, False).startswith(
        "failed: exited -9; killed by the kernel's OOM killer: rank 3, python3 (pid %d) held 31.0 GiB" % process.pid)
