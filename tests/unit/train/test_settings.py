# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The job's settings as one typed record (trainops_job.settings): the role writes exactly its keys, its defaults are
the role's, every NAME.json recorded on the train cluster reads, and a key unknown, missing or of another type is refused
naming the file and the key. The supervisor's view (trainops_job.view) likewise."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
import yaml

from trainops_job import records, view
from trainops_job.settings import Settings

ROOT = Path(__file__).resolve().parents[3]
ROLE = ROOT / "roles" / "train"
REQUIRED = {"job": "j1", "node": "node1", "nodes": ["node1", "node2"], "run_id": "r1", "job_dir": "/nonexistent", "user": "train"}


def test_the_role_writes_exactly_the_records_keys():
    template = (ROLE / "templates" / "job.json.j2").read_text()
    written = set(re.findall(r'^\s*"(\w+)":', template, re.M))
    assert written == {f.name for f in dataclasses.fields(Settings)}


def test_the_defaults_are_the_roles():
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    fields = {f.name: f for f in dataclasses.fields(Settings)}
    # The settings the role passes through as the user left them (the others it derives: the world, the paths).
    same = ["max_restarts", "stop_grace", "stop_timeout", "fail_grace", "supervisor_silence", "on_stall", "on_failure",
            "restarts_without_progress", "stall_floor", "stall_factor", "max_auto_restarts", "flight_recorder_entries",
            "nccl_debug", "collective_timing", "progress_pattern", "run_opts", "min_nodes"]
    ours = {name: fields[name].default if fields[name].default is not dataclasses.MISSING else fields[name].default_factory()
            for name in same}
    assert ours == {name: defaults["train_" + name] for name in same}


def test_every_recorded_nodes_settings_read():
    paths = sorted((ROOT / "tests" / "fixtures" / "train").glob("*/conf/*.json"))
    assert len(paths) > 20
    for path in paths:
        conf = Settings.read(json.loads(path.read_text()), str(path))
        assert conf.node in conf.nodes + conf.spares and conf.least_nodes <= len(conf.nodes), path


@pytest.mark.parametrize("values, said", [
    (dict(REQUIRED, stall_seconds="15"), "/etc/trainops/jobs/j1.json: stall_seconds is '15', not a number"),
    (dict(REQUIRED, max_restarts=True), "max_restarts is True, not a whole number"),
    (dict(REQUIRED, nodes="node1"), "nodes is 'node1', not a list"),
    (dict(REQUIRED, progress_pattern=3), "progress_pattern is 3, not a string or null"),
    (dict(REQUIRED, on_stal="restart"), "unknown key on_stal (known: addresses, "),
    ({k: v for k, v in REQUIRED.items() if k != "run_id"}, "/etc/trainops/jobs/j1.json: missing run_id"),
    (["job"], "not a JSON object"),
])
def test_a_key_unknown_missing_or_of_another_type_is_refused_naming_it(values, said):
    with pytest.raises(ValueError) as refused:
        Settings.read(values, "/etc/trainops/jobs/j1.json")
    assert said in str(refused.value)


def test_a_job_is_loaded_through_the_record(tmp_path, monkeypatch):
    monkeypatch.setattr(records, "CONF_DIR", str(tmp_path))
    (tmp_path / "j1.json").write_text(json.dumps(dict(REQUIRED, user="root", stall_seconds=15, min_nodes=None)))
    job = records.Job.load("j1")
    assert isinstance(job.conf, Settings) and job.conf.stall_seconds == 15 and job.conf.least_nodes == 2
    assert job.conf.on_stall == "report" and job.conf.as_dict()["nodes"] == ["node1", "node2"]
    (tmp_path / "j1.json").write_text(json.dumps(dict(REQUIRED, user="root", train_on_stall="restart")))
    with pytest.raises(ValueError, match=r"j1.json: unknown key train_on_stall .*run train.yml again"):
        records.Job.load("j1")


def test_the_supervisors_view_is_written_and_read_back_whole():
    seen = view.View(run_id="r1", nodes=["node1", "node2"], spares=["node3"], since=1000.0, checkpoint=40)
    seen.restarts, seen.scale = 1, [{"world": 1, "steps_per_second": 2.0}]
    again = view.View.read(json.loads(json.dumps(seen.as_dict())))
    assert again == seen
    with pytest.raises(ValueError, match="unknown key restart_count"):
        view.View.read(dict(seen.as_dict(), restart_count=1))
