# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The node program (roles/train/files/trainops_job) as the nodes run it: imported from there, and started as
`python3 -m trainops_job` with its settings and marks in the test's own directories (TRAINOPS_JOB_CONF_DIR,
TRAINOPS_JOB_RUN_DIR) and its commands run on this machine as they are (no image: launcher `env`)."""

from __future__ import annotations

import getpass
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

PACKAGE_DIR = Path(__file__).resolve().parents[3] / "roles" / "train" / "files"
sys.path.insert(0, str(PACKAGE_DIR))
# No __pycache__ next to the program: the role copies its folder to the nodes.
sys.dont_write_bytecode = True


class Node:
    """One node of a job in the test's directories: its settings, and the program run as that node."""

    def __init__(self, root: Path, name: str, conf: dict):
        self.name, self.conf = name, conf
        self.conf_dir, self.run_dir = root / ("conf-" + name), root / ("run-" + name)
        self.conf_dir.mkdir(exist_ok=True)
        self.env = dict(os.environ, TRAINOPS_JOB_CONF_DIR=str(self.conf_dir), TRAINOPS_JOB_RUN_DIR=str(self.run_dir),
                        PYTHONPATH=str(PACKAGE_DIR), PYTHONDONTWRITEBYTECODE="1")
        self.write()

    def write(self, **changes):
        self.conf.update(changes)
        (self.conf_dir / ("%s.json" % self.conf["job"])).write_text(json.dumps(self.conf))

    def run(self, *args, **kwargs) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "trainops_job", args[0], self.conf["job"]] + list(args[1:]), env=self.env,
                              capture_output=True, text=True, timeout=kwargs.pop("timeout", 60), check=False, **kwargs)

    def report(self) -> dict:
        return json.loads(self.run("report").stdout)

    def file(self, kind: str) -> Path:
        from trainops_job import records
        return Path(self.conf["job_dir"]) / (records.NODE_FILES[kind] % self.name)

    def exit_record(self) -> dict | None:
        path = self.file("exit")
        return json.loads(path.read_text()) if path.exists() else None


def recorded_windows(folder: Path) -> tuple:
    """Every node's window recorded in a folder (its runner's <node>.perf.json as written), and a moment just after the
    last of them: what the supervisor judged them at."""
    perfs = {path.name.split(".")[0]: json.loads(path.read_text()) for path in sorted(folder.glob("*.perf.json"))}
    return perfs, max(window["at"] for window in perfs.values()) + 1.0


def wait_for(check, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    pytest.fail("%s within %s s" % (what, seconds))


@pytest.fixture(name="cluster")
def cluster_fixture(tmp_path):
    """make(command, nodes=1, spares=0, **settings) -> [Node]: a job's nodes on this machine (the world's, then the
    spares'), sharing one job folder; every runner started is stopped and swept at the end."""
    made = []

    def make(command: str, nodes: int = 1, spares: int = 0, **settings) -> list:
        names = ["node%d" % (i + 1) for i in range(nodes + spares)]
        job_dir, run_id = tmp_path / "jobs" / "j1", "run-%d-%d" % (os.getpid(), time.monotonic_ns())
        for name in names:
            conf = {"job": "j1", "node": name, "nodes": names[:nodes], "spares": names[nodes:], "addresses": {n: "127.0.0.1" for n in names},
                    "master_addr": "127.0.0.1", "user": getpass.getuser(),
                    "job_dir": str(job_dir),
                    "run_id": run_id, "in_image": False, "launcher": ["env"], "run_opts": [], "command": command,
                    "supervisor": "detached", "max_restarts": 0, "checkpoint_dir": str(job_dir / "checkpoints"),
                    "resume": {"dir": str(job_dir / "checkpoints"), "world": nodes, "argument": False},
                    "on_failure": "stop", "restarts_without_progress": 3, "min_nodes": nodes,
                    "stop_grace": 3, "stop_timeout": 15, "fail_grace": 1, "supervisor_silence": 120,
                    "on_stall": "report", "stall_seconds": 0,
                    "stall_floor": 120, "stall_factor": 10, "max_auto_restarts": 1, "flight_recorder_entries": 10,
                    "progress_pattern": None, "record": {"name": "j1", "command": command, "nodes": names[:nodes], "spares": names[nodes:]}}
            conf.update(settings)
            made.append(Node(tmp_path, name, conf))
        for node in made[-len(names):]:
            assert node.run("prepare").returncode == 0
        return made[-len(names):]

    yield make
    for node in made:
        node.run("stop")
