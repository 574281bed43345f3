# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ending a run's processes by the variable in their environment, on real processes."""

import os
import signal
import subprocess
import sys
import time

import pytest

from ansible_collections.trainops.cluster.plugins.module_utils import processes


def start(run_id, ignore_term=False):
    code = "import signal, time\n%ssignal.pause()" % ("signal.signal(signal.SIGTERM, signal.SIG_IGN)\n" if ignore_term else "")
    process = subprocess.Popen([sys.executable, "-c", code], env=dict(os.environ, TRAINOPS_RUN_ID=run_id))
    time.sleep(0.3)  # the interpreter has set its handler
    return process


@pytest.fixture(name="run_id")
def run_id_fixture():
    return "trainops-test-%d-%d" % (os.getpid(), time.monotonic_ns())


def test_finds_only_the_runs_processes(run_id):
    ours, other = start(run_id), start(run_id + "-other")
    try:
        assert [p["pid"] for p in processes.find("TRAINOPS_RUN_ID", run_id)] == [ours.pid]
    finally:
        ours.kill(), other.kill(), ours.wait(), other.wait()


def test_find_can_ask_for_a_second_variable(run_id):
    plain = start(run_id)
    worker = subprocess.Popen([sys.executable, "-c", "import signal; signal.pause()"],
                              env=dict(os.environ, TRAINOPS_RUN_ID=run_id, LOCAL_RANK="0"))
    time.sleep(0.3)
    try:
        assert [p["pid"] for p in processes.find("TRAINOPS_RUN_ID", run_id, having="LOCAL_RANK")] == [worker.pid]
        assert len(processes.find("TRAINOPS_RUN_ID", run_id)) == 2
    finally:
        plain.kill(), worker.kill(), plain.wait(), worker.wait()


def test_sigterm_ends_a_run_that_listens(run_id):
    process = start(run_id)
    ended = processes.end_run("TRAINOPS_RUN_ID", run_id, grace=3)
    assert [p["pid"] for p in ended["found"]] == [process.pid]
    assert ended["killed"] == [] and ended["left"] == []
    assert process.wait(2) == -signal.SIGTERM


def test_sigkill_after_the_grace_for_a_process_that_ignores_sigterm(run_id):
    process = start(run_id, ignore_term=True)
    start_time = time.monotonic()
    ended = processes.end_run("TRAINOPS_RUN_ID", run_id, grace=1)
    assert [p["pid"] for p in ended["killed"]] == [process.pid] and ended["left"] == []
    assert process.wait(2) == -signal.SIGKILL and time.monotonic() - start_time < 3


def test_a_stopped_process_is_reported_as_stopped_and_killed(run_id):
    process = start(run_id)
    os.kill(process.pid, signal.SIGSTOP)
    deadline = time.monotonic() + 5
    while processes.find("TRAINOPS_RUN_ID", run_id)[0]["state"] != "stopped" and time.monotonic() < deadline:
        time.sleep(0.05)
    found = processes.find("TRAINOPS_RUN_ID", run_id)
    assert found[0]["state"] == "stopped" and found[0]["comm"] == os.path.basename(sys.executable)[:15]
    ended = processes.end_run("TRAINOPS_RUN_ID", run_id, grace=0.5)
    assert ended["killed"] and process.wait(2) == -signal.SIGKILL


def test_nothing_to_end(run_id):
    assert processes.end_run("TRAINOPS_RUN_ID", run_id) == {"found": [], "killed": [], "left": []}
