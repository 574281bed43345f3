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

PYTHON = os.path.basename(sys.executable)[:15]  # the name /proc gives this interpreter's processes


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
    assert process.wait(2) == -signal.SIGKILL and time.monotonic() - start_time < 4  # the 1 s grace, not the default 5 s


def test_a_stopped_process_is_reported_as_stopped_and_killed(run_id):
    process = start(run_id)
    os.kill(process.pid, signal.SIGSTOP)
    deadline = time.monotonic() + 5
    while processes.find("TRAINOPS_RUN_ID", run_id)[0]["state"] != "stopped" and time.monotonic() < deadline:
        time.sleep(0.05)
    found = processes.find("TRAINOPS_RUN_ID", run_id)
    assert found[0]["state"] == "stopped" and found[0]["comm"] == PYTHON
    # SIGCONT with the SIGTERM, as systemd sends them: the stopped process ends on the SIGTERM, without a SIGKILL.
    ended = processes.end_run("TRAINOPS_RUN_ID", run_id, grace=2)
    assert ended["killed"] == [] and process.wait(2) == -signal.SIGTERM


# A container engine's monitor (its name as podman's), deaf to SIGTERM like a container's processes that ignore it:
# it ends by itself, with 0, once the "container" process it started has ended.
MONITOR = """import signal, subprocess, sys
signal.signal(signal.SIGTERM, signal.SIG_IGN)
with open("/proc/self/comm", "w") as comm:
    comm.write("conmon")
container = subprocess.Popen([sys.executable, "-c", "import signal\\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\\nsignal.pause()"])
if sys.argv[1] == "outlive":
    signal.pause()
sys.exit(container.wait() and 0)
"""


def start_monitor(run_id, script, arg):
    """The monitor, once it and its container are both found, the container under its own name: forked but not yet
    exec'd, the container still bears the monitor's name "conmon" and would be left alone as the engine's."""
    monitor = subprocess.Popen([sys.executable, "-c", script, arg], env=dict(os.environ, TRAINOPS_RUN_ID=run_id))
    deadline = time.monotonic() + 5
    while sorted(p["comm"] for p in processes.find("TRAINOPS_RUN_ID", run_id)) != ["conmon", PYTHON] \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    return monitor


def test_the_container_is_killed_before_the_engine_which_then_ends_by_itself(run_id):
    monitor = start_monitor(run_id, MONITOR, "end")
    ended = processes.end_run("TRAINOPS_RUN_ID", run_id, grace=0.5)
    assert sorted(p["comm"] for p in ended["found"]) == ["conmon", PYTHON]
    assert [p["comm"] for p in ended["killed"]] == [PYTHON] and ended["left"] == []
    assert monitor.wait(2) == 0


def test_an_engine_process_that_outlives_its_container_is_killed_after_the_engine_grace(run_id):
    monitor = start_monitor(run_id, MONITOR, "outlive")
    start_time = time.monotonic()
    ended = processes.end_run("TRAINOPS_RUN_ID", run_id, grace=0.5, engine_grace=1)
    assert sorted(p["comm"] for p in ended["killed"]) == ["conmon", PYTHON]
    assert monitor.wait(2) == -signal.SIGKILL and ended["left"] == []
    assert 1.5 <= time.monotonic() - start_time < 6  # both graces, and no hang


# An engine's monitor that notes a SIGTERM: its container ends on its own SIGTERM, and the monitor with it.
NOTING_MONITOR = """import signal, subprocess, sys
signal.signal(signal.SIGTERM, lambda *a: open(sys.argv[1], "w").write("signalled"))
with open("/proc/self/comm", "w") as comm:
    comm.write("conmon")
sys.exit(subprocess.call([sys.executable, "-c", "import signal; signal.pause()"]) and 0)
"""


def test_the_engine_is_left_alone_while_the_jobs_own_processes_end(run_id, tmp_path):
    noted = tmp_path / "monitor"
    monitor = start_monitor(run_id, NOTING_MONITOR, str(noted))
    ended = processes.end_run("TRAINOPS_RUN_ID", run_id, grace=2)
    assert monitor.wait(2) == 0 and ended["killed"] == [] and ended["left"] == []
    assert not noted.exists()


def test_find_can_ask_for_a_variables_value(run_id):
    here = start(run_id)
    there = subprocess.Popen([sys.executable, "-c", "import signal; signal.pause()"],
                             env=dict(os.environ, TRAINOPS_RUN_ID=run_id, TRAINOPS_NODE="node2"))
    time.sleep(0.3)  # the interpreter has started
    try:
        assert [p["pid"] for p in processes.find("TRAINOPS_RUN_ID", run_id, having="TRAINOPS_NODE=node2")] == [there.pid]
    finally:
        here.kill(), there.kill(), here.wait(), there.wait()


def test_nothing_to_end(run_id):
    assert processes.end_run("TRAINOPS_RUN_ID", run_id) == {"found": [], "killed": [], "left": []}
