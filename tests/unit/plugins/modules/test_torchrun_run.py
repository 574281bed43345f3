# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""torchrun_run end to end: fake launchers (real processes) and a real socket as the master."""

from __future__ import annotations

import time

from ansible_collections.trainops.cluster.plugins.modules import torchrun_run
import helpers.modules
from helpers.modules import script
from helpers.sockets import free_ports, serving


def run_module(capsys, **args):
    return helpers.modules.run_module(torchrun_run, capsys, **args)


def launch_env(tmp_path, port):
    path = tmp_path / "launch.env"
    path.write_text("NNODES=2\nNODE_RANK=1\nNPROC_PER_NODE=1\nMASTER_ADDR=127.0.0.1\nMASTER_PORT=%d\n" % port)
    return str(path)


def test_a_launch_that_rendezvouses_reports_its_records_and_the_master_it_reached(tmp_path, capsys):
    port = free_ports(1)[0]
    launcher = script(tmp_path / "launcher",
                      'echo "[default0]:TRAINOPS {\\"event\\": \\"start\\", \\"rank\\": 1}"\n'
                      'echo "[default0]:TRAINOPS {\\"event\\": \\"result\\", \\"run\\": \\"$TRAINOPS_RUN_ID\\"}"')
    with serving("127.0.0.1", port):
        out = run_module(capsys, argv=[launcher], run_id="trainops-t1", launch_env=launch_env(tmp_path, port), rendezvous_timeout=3)
    assert out["rc"] == 0 and out["stopped"] is None and not out["failed"]
    assert out["launch"]["NODE_RANK"] == "1"
    assert out["probe"]["ok"] and out["probe"]["port"] == port
    assert out["parsed"]["records"][1] == {"event": "result", "run": "trainops-t1"}
    assert out["cleanup"] == {"found": [], "killed": [], "left": []}


def test_a_launch_whose_workers_never_start_is_stopped_at_the_rendezvous_limit(tmp_path, capsys):
    port = free_ports(1)[0]
    launcher = script(tmp_path / "launcher", "echo agent waiting; sleep 60")
    start = time.monotonic()
    out = run_module(capsys, argv=[launcher], run_id="trainops-t2", launch_env=launch_env(tmp_path, port), rendezvous_timeout=2)
    assert out["stopped"] == "not ready" and out["timed_out"]
    assert not out["probe"]["ok"] and out["probe"]["error"] == "refused"
    assert time.monotonic() - start < 8


def test_processes_left_by_the_launch_are_ended(tmp_path, capsys):
    port = free_ports(1)[0]
    # A daemon of its own session outlives the launcher's process group, as a container's processes do.
    launcher = script(tmp_path / "launcher", 'echo "TRAINOPS {\\"event\\": \\"start\\"}"; setsid sleep 60 </dev/null >/dev/null 2>&1 & sleep 0.5')
    out = run_module(capsys, argv=[launcher], run_id="trainops-t3", launch_env=launch_env(tmp_path, port), rendezvous_timeout=1)
    assert [p["comm"] for p in out["cleanup"]["found"]] == ["sleep"] and out["cleanup"]["left"] == []


def test_a_missing_launch_env_is_reported_not_fatal(tmp_path, capsys):
    launcher = script(tmp_path / "launcher", 'echo "TRAINOPS {\\"event\\": \\"start\\"}"')
    out = run_module(capsys, argv=[launcher], run_id="trainops-t4", launch_env=str(tmp_path / "none"), rendezvous_timeout=1)
    assert out["launch"] is None and out["probe"]["error"] == "MASTER_ADDR or MASTER_PORT not set"


def test_bad_arguments_fail(tmp_path, capsys):
    out = run_module(capsys, argv=["true"], run_id="x", timeout=0)
    assert out["failed"] and "at least 1 second" in out["msg"]
    out = run_module(capsys, argv=["true"], run_id="x", environment={"A": True})
    assert out["failed"] and "not True" in out["msg"]
