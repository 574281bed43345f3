# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""end_run with real processes: one of the run, one of another run, one that ignores SIGTERM."""

from __future__ import annotations

import os
import subprocess
import time

from ansible_collections.trainops.cluster.plugins.modules import end_run
import helpers.modules


def start(run_id, command="echo ready; exec sleep 60"):
    """A process of the run, once it says it is ready (for the stubborn one: once SIGTERM is ignored)."""
    env = dict(os.environ, TRAINOPS_RUN_ID=run_id)
    process = subprocess.Popen(["sh", "-c", command], env=env, stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline() == "ready\n"
    time.sleep(0.1)  # sh's exec is done: the marker is in the final process's environment
    return process


def test_only_the_runs_processes_end_and_sigkill_is_named(capsys):
    ours, theirs = start("trainops-e1"), start("trainops-e2")
    stubborn = start("trainops-e1", "exec python3 -c 'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                                    "print(\"ready\", flush=True); time.sleep(60)'")
    try:
        out = helpers.modules.run_module(end_run, capsys, run_id="trainops-e1", grace=0.5)
        assert out["changed"]
        assert sorted(p["pid"] for p in out["found"]) == sorted([ours.pid, stubborn.pid])
        assert [p["pid"] for p in out["killed"]] == [stubborn.pid] and out["left"] == []
        assert ours.wait(5) is not None and stubborn.wait(5) is not None
        assert theirs.poll() is None
    finally:
        for process in (ours, theirs, stubborn):
            process.kill()
            process.wait()


def test_check_mode_finds_and_signals_nothing(capsys):
    ours = start("trainops-e3")
    try:
        out = helpers.modules.run_module(end_run, capsys, run_id="trainops-e3", _ansible_check_mode=True)
        assert out["changed"] and [p["pid"] for p in out["found"]] == [ours.pid] and out["killed"] == []
        assert ours.poll() is None
    finally:
        ours.kill()
        ours.wait()


def test_nothing_of_the_run_is_no_change(capsys):
    out = helpers.modules.run_module(end_run, capsys, run_id="trainops-none")
    assert not out["changed"] and out == dict(out, found=[], killed=[], left=[])


def test_an_empty_marker_is_refused(capsys):
    out = helpers.modules.run_module(end_run, capsys, run_id="")
    assert out["failed"] and "run_id must not be empty" in out["msg"]
