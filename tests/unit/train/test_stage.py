# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The stage (train_stage) in the node program: one manifest from shared storage, each node's local copy checked
against it, kept when whole (a second start copies nothing), copied again when changed or damaged, refused where it
cannot fit; the command sees it, and a stop removes it unless kept. Real files, real processes (the node harness)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import wait_for
from trainops_job import stage


def dataset(root: Path) -> tuple[Path, Path]:
    """A dataset folder of three files (one nested) and a model file, on "shared storage"."""
    data = root / "shared" / "data"
    (data / "part").mkdir(parents=True)
    (data / "a.jsonl").write_bytes(b"a" * 1000)
    (data / "b.jsonl").write_bytes(os.urandom(5000))
    (data / "part" / "c.jsonl").write_bytes(b"c" * 10)
    model = root / "shared" / "model.safetensors"
    model.write_bytes(os.urandom(3000))
    return data, model


def test_a_second_stage_copies_nothing_and_a_damaged_copy_is_copied_again(tmp_path):
    data, model = dataset(tmp_path)
    wanted = stage.manifest([str(data), str(model)])
    assert sorted(wanted["files"]) == ["data/a.jsonl", "data/b.jsonl", "data/part/c.jsonl", "model.safetensors"]
    assert wanted["bytes"] == 9010 and wanted["hashed"] == 9010
    listed, local = stage.listing([str(data), str(model)]), tmp_path / "local" / "stage"
    first = stage.stage(listed, str(local), lambda: wanted)
    assert (first["copied"], first["copied_files"], first["kept"], first["damaged"]) == (9010, 4, 0, [])
    assert (local / "data" / "part" / "c.jsonl").read_bytes() == b"c" * 10
    again = stage.stage(listed, str(local), lambda: wanted)
    assert (again["copied"], again["kept"], again["mb_per_s"]) == (0, 9010, None)
    # A local copy damaged (same size, other bytes) and one cut short: both copied again; a stray file removed.
    with open(local / "data" / "b.jsonl", "r+b") as handle:
        handle.write(b"X")
    (local / "model.safetensors").write_bytes(b"short")
    (local / "data" / "old.jsonl").write_text("an earlier stage's")
    fixed = stage.stage(listed, str(local), lambda: wanted)
    assert (fixed["copied"], sorted(fixed["damaged"]), fixed["removed"]) == (8000, ["data/b.jsonl", "model.safetensors"], ["data/old.jsonl"])
    assert stage.sha256(str(local / "data" / "b.jsonl")) == wanted["files"]["data/b.jsonl"]["sha256"]


def test_several_files_are_copied_and_hashed_at_once(tmp_path, monkeypatch):
    """WORKERS files at a time, hashed in chunks: the copies are the sources' bytes across chunk boundaries (a file of
    exactly one chunk, several, a part of one), nothing left under a temporary name."""
    monkeypatch.setattr(stage, "CHUNK", 1000)
    monkeypatch.setattr(stage, "WORKERS", 3)
    data, model = dataset(tmp_path)
    wanted = stage.manifest([str(data), str(model)])
    listed, local = stage.listing([str(data), str(model)]), tmp_path / "local"
    done = stage.stage(listed, str(local), lambda: wanted)
    assert (done["copied"], done["copied_files"], done["damaged"], done["removed"]) == (9010, 4, [], [])
    for name, (source, _size) in listed.items():
        assert (local / name).read_bytes() == Path(source).read_bytes(), name
    assert sorted(str(p.relative_to(local)) for p in local.rglob("*") if p.is_file()) == sorted(listed)
    assert {n: stage.sha256(str(local / n)) for n in listed} == {n: f["sha256"] for n, f in wanted["files"].items()}


def test_a_source_rewritten_after_the_manifest_is_refused_and_leaves_no_file_under_its_name(tmp_path, monkeypatch):
    """The digest checked is the copy's: a source rewritten between the manifest and its copy (same size, so nothing
    but the bytes tells) is refused, the other files staged whole; the next start, with a new manifest, copies it alone."""
    data, model = dataset(tmp_path)
    wanted = stage.manifest([str(data), str(model)])
    listed, local = stage.listing([str(data), str(model)]), tmp_path / "local"
    copyfile = stage.shutil.copyfile

    def rewritten_first(source, dest):
        if source == str(model):
            model.write_bytes(os.urandom(3000))
        return copyfile(source, dest)

    monkeypatch.setattr(stage.shutil, "copyfile", rewritten_first)
    with pytest.raises(stage.StageError, match="model.safetensors changed on shared storage while it was staged"):
        stage.stage(listed, str(local), lambda: wanted)
    assert not (local / "model.safetensors").exists() and not list(local.rglob("*.trainops-part"))
    assert (local / "data" / "b.jsonl").read_bytes() == (data / "b.jsonl").read_bytes()
    monkeypatch.setattr(stage.shutil, "copyfile", copyfile)
    again = stage.stage(listed, str(local), lambda: stage.manifest([str(data), str(model)], wanted))
    assert (again["copied"], again["copied_files"], again["kept"]) == (3000, 1, 6010)
    assert (local / "model.safetensors").read_bytes() == model.read_bytes()


def test_the_manifest_hashes_only_what_changed(tmp_path):
    data, model = dataset(tmp_path)
    first = stage.manifest([str(data), str(model)])
    assert stage.manifest([str(data), str(model)], first)["hashed"] == 0
    (data / "a.jsonl").write_bytes(b"b" * 1001)
    again = stage.manifest([str(data), str(model)], first)
    assert again["hashed"] == 1001 and again["files"]["data/a.jsonl"]["sha256"] != first["files"]["data/a.jsonl"]["sha256"]


def test_what_cannot_be_staged_is_refused_saying_why(tmp_path):
    data, model = dataset(tmp_path)
    with pytest.raises(stage.StageError, match="train_stage path .*/nothing does not exist"):
        stage.manifest([str(data), str(tmp_path / "nothing")])
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "data").mkdir()
    with pytest.raises(stage.StageError, match="two paths of the same name"):
        stage.sources([str(data), str(tmp_path / "other" / "data")])
    wanted, listed = stage.manifest([str(data), str(model)]), stage.listing([str(data), str(model)])
    with pytest.raises(stage.StageError, match=r"the stage needs 8.8 KiB in .*local and 1.0 MiB is free there"):
        stage.stage(listed, str(tmp_path / "local"), lambda: wanted, free=lambda path: 1 << 20)
    assert not (tmp_path / "local").exists()
    # A source written while it is staged: its copy is not the manifest's, and is not kept.
    model.write_bytes(os.urandom(3000))
    with pytest.raises(stage.StageError, match="changed on shared storage while it was staged"):
        stage.stage(listed, str(tmp_path / "local"), lambda: wanted)
    assert not (tmp_path / "local" / "model.safetensors").exists()
    # A file added meanwhile: the manifest and this node's listing differ.
    (data / "d.jsonl").write_text("new")
    with pytest.raises(stage.StageError, match=r"changed while they were staged \(5 listed here, 4 in the manifest\)"):
        stage.stage(stage.listing([str(data), str(model)]), str(tmp_path / "local"), lambda: wanted)


def test_every_node_stages_against_the_first_nodes_manifest_the_command_sees_it_and_a_stop_removes_it(cluster, tmp_path):
    data, model = dataset(tmp_path)
    # A trainer that takes key=value arguments (LLaMA-Factory's form): the stage's overrides go on its command line.
    command = 'sh -c \'echo "stage $TRAINOPS_STAGE_DIR offline ${HF_HUB_OFFLINE:-no} args $*"; ls "$TRAINOPS_STAGE_DIR"; exec sleep 60\' trainer'
    nodes = cluster(command, nodes=2, stage={"paths": [str(data), str(model)], "dir": "", "keep": False, "offline": True,
                                             "overrides": {"dataset_dir": "/stage/data"}})
    for node in nodes:
        node.write(stage=dict(node.conf["stage"], dir=str(tmp_path / ("disk-" + node.name) / "stage")))
    # A job's first start: the stage comes before prepare, so no folder of the job yet.
    shutil.rmtree(nodes[0].conf["job_dir"])
    # node2 first: it copies, then waits for the manifest that node1 makes beside its own copies.
    waiting = subprocess.Popen([sys.executable, "-m", "trainops_job", "stage", "j1"], env=nodes[1].env, stdout=subprocess.PIPE, text=True)
    run = nodes[0].run("stage")
    assert run.returncode == 0 and json.loads(run.stdout)["copied"] == 9010, run.stderr
    assert waiting.wait(timeout=30) == 0 and json.loads(waiting.stdout.read())["copied"] == 9010
    manifest = json.loads((Path(nodes[0].conf["job_dir"]) / "stage-manifest.json").read_text())
    assert (len(manifest["files"]), manifest["bytes"], manifest["hashed"]) == (4, 9010, 9010)
    for node in nodes:
        assert (Path(node.conf["stage"]["dir"]) / "data" / "a.jsonl").stat().st_uid == os.getuid()
    assert nodes[1].report()["stage"]["copied"] == 9010 and nodes[1].report()["stage"]["node"] == "node2"
    again = nodes[1].run("stage")
    assert json.loads(again.stdout)["copied"] == 0
    # The command: the stage's folder, the hub left alone, LLaMA-Factory's path read from the stage.
    node = nodes[1]
    assert node.run("start").returncode == 0
    log = wait_for(lambda: "model.safetensors" in node.report()["log"] and node.report()["log"], 20, "the command's output")
    assert log[:3] == ["stage %s offline 1 args dataset_dir=/stage/data" % node.conf["stage"]["dir"], "data", "model.safetensors"], log
    stopped = json.loads(node.run("stop").stdout)
    assert stopped["unstaged"] and not Path(node.conf["stage"]["dir"]).exists()
    # Kept by choice (train_stage_keep): the next start copies nothing.
    nodes[0].write(stage=dict(nodes[0].conf["stage"], keep=True))
    assert json.loads(nodes[0].run("stop").stdout)["unstaged"] is False and Path(nodes[0].conf["stage"]["dir"]).exists()


def test_a_path_that_is_not_there_is_refused_on_every_node_naming_it(cluster, tmp_path):
    """The first node cannot make the manifest: it says why, and a node waiting for the manifest says it too at once."""
    nodes = cluster("true", nodes=2, stage={"paths": ["/nothing"], "dir": str(tmp_path / "stage"), "keep": False, "timeout": 30})
    run = nodes[0].run("stage")
    assert run.returncode == 1 and run.stderr.strip() == "trainops-job: node1: train_stage path /nothing does not exist", run.stderr
    nodes[1].write(stage=dict(nodes[1].conf["stage"], paths=[str(tmp_path)]))  # a path node2 finds: it waits for node1's
    run = nodes[1].run("stage")
    assert run.returncode == 1 and run.stderr.strip() == ("trainops-job: node2: the first node could not make the stage's manifest: "
                                                          "node1: train_stage path /nothing does not exist"), run.stderr


def test_the_stage_imports_only_what_it_needs(cluster, tmp_path):
    """The node program's start-up is part of every stage's time (issue 50): the stage action imports neither the runner
    nor the supervisor nor the diagnosis (the whole package took ~0.2 s to import)."""
    data, model = dataset(tmp_path)
    (node,) = cluster("true", nodes=1, stage={"paths": [str(data), str(model)], "dir": str(tmp_path / "stage"), "keep": False})
    code = ("import json, sys; from trainops_job.cli import main; status = main(['stage', 'j1']); "
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('trainops_job'))), file=sys.stderr); sys.exit(status)")
    run = subprocess.run([sys.executable, "-c", code], env=node.env, capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 0 and json.loads(run.stdout)["copied"] == 9010, run.stderr
    loaded = json.loads(run.stderr.strip().splitlines()[-1])
    assert "trainops_job.stage" in loaded and not {"trainops_job.runner", "trainops_job.supervisor", "trainops_job.diagnosis",
                                                   "trainops_job.lifecycle", "trainops_job.report"} & set(loaded), loaded
