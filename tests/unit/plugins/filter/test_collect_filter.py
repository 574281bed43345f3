# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The collect filters read what the tasks registered: find's files, async_status over a find loop, sha256sum's output."""

from ansible_collections.trainops.cluster.plugins.filter import collect as filters

DDP = {"dir": "/mnt/shared/jobs/ddp1/checkpoints", "latest": "step-000020.pt", "incomplete": {}}


def test_a_relative_destination_is_the_controllers_working_directory(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(filters.shutil, "which", lambda name: "/usr/bin/" + name)
    assert filters.train_collect_destination("results/ddp1")["path"] == "%s/results/ddp1" % tmp_path


def test_a_controller_without_rsync_is_named(monkeypatch):
    monkeypatch.setattr(filters.shutil, "which", lambda name: None)
    assert "has no rsync" in filters.train_collect_destination("/srv/results")["problem"]


def test_the_final_model_is_looked_for_only_with_a_llamafactory_config():
    found = {"files": [{"path": "/out/%s" % name, "size": 1} for name in ("model.safetensors", "trainer_state.json")]}
    dest = {"kind": "local", "path": "/srv/r", "host": None, "display": "/srv/r", "problem": None}
    resume = {"dir": "/out", "latest": None, "incomplete": {}}
    records = {"job.json": "job record"}
    assert filters.train_collect_plan("/j", resume, found, True, dest, records)["result"]["what"] == "final model"
    assert filters.train_collect_plan("/j", resume, None, True, dest, records)["problem"].startswith("no complete checkpoint in /out (a LLaMA")


def test_the_nodes_sums_come_from_async_status_over_the_find_loop():
    dest = {"kind": "remote", "path": "/archive", "host": "nas", "display": "nas:/archive", "problem": None}
    chosen = filters.train_collect_plan("/mnt/shared/jobs/ddp1", DDP, None, True, dest, {"job.json": "job record"})
    hashed = {"results": [
        {"item": {"ansible_job_id": "1.1", "item": chosen["parts"][0]},
         "files": [{"path": "/mnt/shared/jobs/ddp1/job.json", "size": 5, "checksum": "aa"}]},
        {"item": {"ansible_job_id": "1.2", "item": chosen["parts"][1]},
         "files": [{"path": "/mnt/shared/jobs/ddp1/checkpoints/step-000020.pt", "size": 9, "checksum": "bb"}]}]}
    sent = filters.train_collect_sent(hashed, dest)
    assert sent["paths"] == ["checkpoints/step-000020.pt", "job.json"]
    assert sent["at"] == ["/archive/checkpoints/step-000020.pt", "/archive/job.json"]
    assert sent["sums"] == "cd -- /archive && sha256sum -- checkpoints/step-000020.pt job.json"
    remote = filters.train_collect_verify(sent, "bb  checkpoints/step-000020.pt\nff  job.json\n", [])
    assert remote["mismatched"] == ["job.json: sha256 ff at the destination, aa on the node"]
    # The records of a job still running may grow while they are copied.
    assert filters.train_collect_verify(sent, {"checkpoints/step-000020.pt": "bb", "job.json": "zz"}, ["node1"])["changed"] == ["job.json"]


def test_the_summary_reads_rsyncs_stats_from_the_copies():
    dest = {"kind": "local", "path": "/srv/r", "host": None, "display": "/srv/r", "problem": None}
    chosen = filters.train_collect_plan("/j", DDP, None, True, dest, {"job.json": "job record"})
    verified = {"files": {"checkpoints/step-000020.pt": 2 ** 20}, "bytes": 2 ** 20, "mismatched": [], "changed": []}
    copies = {"results": [{"stdout_lines": ["Literal data: 524,288 bytes", "Matched data: 524,288 bytes"]}, {"skipped": True}]}
    said = filters.train_collect_summary(verified, "ddp1", dest, chosen, copies, [], ["/j"], {"node1": "10.0.0.1"})
    assert "reused 512.0 KiB already at the destination (an earlier or interrupted copy), sent 512.0 KiB" in said["lines"]
