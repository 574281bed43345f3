# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""container_image against a fake engine CLI that keeps its images in a directory."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PROJECT = Path(__file__).parents[4]
DIGEST = "sha256:" + "cd" * 32
REPO = "10.0.0.1:5000/train"
FAKE = r'''#!/usr/bin/env python3
import json, os, sys
state = os.environ["FAKE_ENGINE_STATE"]
def path(ref): return os.path.join(state, ref.replace("/", "_").replace(":", "_").replace("@", "_"))
args = sys.argv[1:]
with open(os.path.join(state, "calls"), "a") as log: log.write(" ".join(args) + "\n")
registry = json.load(open(os.path.join(state, "registry.json")))
if args[:2] == ["image", "inspect"]:
    ref = args[2]
    if not os.path.exists(path(ref)): print("[]"); sys.exit(1)
    image_id = open(path(ref)).read()
    print(json.dumps([{"Id": image_id, "RepoDigests": [d for d, i in registry.items() if "@" in d and i == image_id]}])); sys.exit(0)
if args[0] == "pull":
    ref = args[-1]
    if ref not in registry: print("manifest unknown", file=sys.stderr); sys.exit(125)
    open(path(ref), "w").write(registry[ref]); sys.exit(0)
if args[:2] == ["load", "-i"]:
    for line in open(args[2]):
        ref, image_id = line.split(); open(path(ref), "w").write(image_id)
    sys.exit(0)
if args[0] == "tag":
    image_id, ref = args[1], args[2]; open(path(ref), "w").write(image_id); sys.exit(0)
sys.exit(2)
'''


@pytest.fixture(name="engine")
def engine_fixture(tmp_path, monkeypatch):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name in ("podman", "docker"):
        (bindir / name).write_text(FAKE)
        (bindir / name).chmod(0o755)
    state = tmp_path / "state"
    state.mkdir()
    (state / "registry.json").write_text(json.dumps({REPO + "@" + DIGEST: "sha256:good", REPO + ":1": "sha256:good"}))
    monkeypatch.setenv("FAKE_ENGINE_STATE", str(state))
    monkeypatch.setenv("PATH", "%s:%s" % (bindir, os.environ["PATH"]))
    return state


def run(args, check_mode=False):
    payload = {"ANSIBLE_MODULE_ARGS": dict(args, _ansible_check_mode=check_mode)}
    env = dict(os.environ, PYTHONPATH=str(PROJECT / ".collections"))
    proc = subprocess.run([sys.executable, "-m", "ansible_collections.trainops.cluster.plugins.modules.container_image"],
                          input=json.dumps(payload), capture_output=True, text=True, env=env, timeout=60, check=False)
    return json.loads(proc.stdout)


def calls(state):
    return (state / "calls").read_text().splitlines()


def test_pinned_image_pulled_once(engine):
    first = run({"name": REPO + "@" + DIGEST, "insecure": True})
    assert (first["changed"], first["action"], first["id"], first["previous_id"]) == (True, "pulled", "sha256:good", None)
    assert "pull --tls-verify=false %s@%s" % (REPO, DIGEST) in calls(engine)
    again = run({"name": REPO + "@" + DIGEST})
    assert (again["changed"], again["action"]) == (False, "present")
    assert sum(c.startswith("pull") for c in calls(engine)) == 1


def test_check_mode_pulls_nothing(engine):
    result = run({"name": REPO + "@" + DIGEST}, check_mode=True)
    assert (result["changed"], result["action"]) == (True, "pulled")
    assert not any(c.startswith("pull") for c in calls(engine))


def test_other_image_under_the_tag_is_retagged(engine):
    (engine / ("10.0.0.1_5000_train_1")).write_text("sha256:impostor")
    result = run({"name": REPO + "@" + DIGEST, "tag": REPO + ":1", "engine": "docker"})
    assert (result["changed"], result["action"], result["previous_id"]) == (True, "pulled", "sha256:impostor")
    assert "tag sha256:good %s:1" % REPO in calls(engine)
    fixed = run({"name": REPO + "@" + DIGEST, "tag": REPO + ":1", "engine": "docker"})
    assert (fixed["changed"], fixed["action"]) == (False, "present")


def test_archive_loaded_only_when_missing_or_different(engine, tmp_path):
    archive = tmp_path / "train.tar"
    archive.write_text("localhost/train:1 sha256:archived\n")
    args = {"name": "localhost/train:1", "source": "archive", "archive": str(archive), "expected_id": "sha256:archived"}
    assert run(args)["action"] == "loaded"
    assert run(args)["changed"] is False
    (engine / "localhost_train_1").write_text("sha256:other")
    result = run(args)
    assert (result["changed"], result["action"], result["previous_id"]) == (True, "loaded", "sha256:other")


def test_failed_pull_names_the_reference(engine):
    result = run({"name": REPO + ":missing"})
    assert result["failed"] and "pull %s:missing failed: manifest unknown" % REPO in result["msg"]
