# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The stage on the controller (plugin_utils/job_stage.py): status's line of what each node staged, from the node
program's records (tests/unit/train/test_stage.py makes real ones); a LLaMA-Factory config's paths read from the stage
and the hub left alone once model and data are staged; train_stage and train_stage_dir refused naming the variable."""

from __future__ import annotations

from ansible_collections.trainops.cluster.plugins.plugin_utils import job_stage, llamafactory

COPIED = {"dir": "/var/tmp/trainops-stage/j1", "files": 4, "bytes": 1073741824, "copied": 1073741824, "copied_files": 4,
          "kept": 0, "damaged": [], "removed": [], "seconds": 2.6, "mb_per_s": 412.9}
KEPT = dict(COPIED, copied=0, copied_files=0, kept=1073741824, seconds=1.1, mb_per_s=None)


def test_status_says_each_nodes_staged_bytes_and_rate():
    assert job_stage.said({"node1": None, "node2": None}) is None
    assert job_stage.said({"node2": KEPT, "node1": COPIED, "node3": dict(COPIED, copied=1000, damaged=["data/a.jsonl"], mb_per_s=0.4)}) == (
        "staged on every node's disk (/var/tmp/trainops-stage/j1), each file checked against one manifest (sha256): "
        "node1 1.07 GB (1.07 GB copied at 413 MB/s), node2 1.07 GB (kept: unchanged), "
        "node3 1.07 GB (1 kB copied at 400 kB/s; 1 damaged or changed, copied again)")


def test_a_llamafactory_configs_paths_are_read_from_the_stage():
    config = {"model_name_or_path": "/mnt/shared/models/qwen", "dataset_dir": "/mnt/shared/data", "tokenized_path": "/mnt/shared/tok/q",
              "output_dir": "/mnt/shared/out"}
    found = llamafactory.stage_overrides(config, ["/mnt/shared/models/qwen/", "/mnt/shared/data"], "/var/tmp/stage")
    assert found == {"overrides": {"model_name_or_path": "/var/tmp/stage/qwen", "dataset_dir": "/var/tmp/stage/data"}, "offline": True}
    # The data alone staged: the model still comes from the hub or shared storage, and the hub is not cut off.
    assert llamafactory.stage_overrides(config, ["/mnt/shared/tok"], "/s") == {"overrides": {"tokenized_path": "/s/tok/q"}, "offline": False}
    hub = dict(config, model_name_or_path="Qwen/Qwen2-0.5B")
    assert llamafactory.stage_overrides(hub, ["/mnt/shared/data"], "/s")["offline"] is False


def test_a_stage_neither_on_shared_storage_nor_on_the_controller_or_into_it_is_refused_naming_the_variable():
    assert job_stage.refused(["/mnt/shared/data"], "/var/tmp/stage/j1", "/mnt/shared") == []
    assert job_stage.refused(["/home/me/data", "/mnt/shared/data", "/mnt/sharedx"], "/var/tmp/stage", "/mnt/shared") == [
        "train_stage holds /home/me/data, /mnt/sharedx: give paths on shared storage (under /mnt/shared) that every node "
        "reads, or on the controller"]
    # A path off shared storage that the controller has is copied from there.
    assert job_stage.refused(["/home/me/data/", "relative"], "/var/tmp/stage", "/mnt/shared", ["/home/me/data"]) == [
        "train_stage holds relative: give paths on shared storage (under /mnt/shared) that every node reads, or on the controller"]
    for folder in ("/mnt/shared/stage", "stage", "/", "/mnt/shared"):
        assert job_stage.refused([], folder, "/mnt/shared") == [
            "train_stage_dir is %s: give an absolute folder on each node's own disk, not on shared storage" % folder]


def test_the_controllers_paths_are_read_from_their_copy_on_shared_storage():
    found = job_stage.sources(["/mnt/shared/data", "/home/me/model/", "/home/me/vocab.json"], "/mnt/shared", "/mnt/shared/jobs/j1/stage-sources")
    assert found == {"controller": ["/home/me/model", "/home/me/vocab.json"],
                     "paths": ["/mnt/shared/data", "/mnt/shared/jobs/j1/stage-sources/model", "/mnt/shared/jobs/j1/stage-sources/vocab.json"]}
    assert job_stage.sources([], "/mnt/shared", "/x") == {"controller": [], "paths": []}
