# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""train_action=collect: the destination, what is copied, the comparison of sha256 and what is said at the end."""

import pytest

from ansible_collections.trainops.cluster.plugins.plugin_utils import collect

LOCAL = {"kind": "local", "path": "/srv/results/ddp1", "host": None, "display": "/srv/results/ddp1", "problem": None}
REMOTE = {"kind": "remote", "path": "/archive/ddp1", "host": "backup@nas", "display": "backup@nas:/archive/ddp1", "problem": None}
DDP = {"dir": "/mnt/shared/jobs/ddp1/checkpoints", "latest": "step-000020.pt", "incomplete": {}}
# rsync 3.2.7's --stats after a copy that found a partial file at the destination (recorded on the demo cluster).
STATS = """
Number of files: 5 (reg: 4, dir: 1)
Number of created files: 3 (reg: 3)
Number of deleted files: 0
Number of regular files transferred: 4
Total file size: 5,208 bytes
Total transferred file size: 5,208 bytes
Literal data: 3,808 bytes
Matched data: 1,400 bytes
File list size: 153
Total bytes sent: 157
Total bytes received: 4,155
""".splitlines()


@pytest.mark.parametrize("value, kind, path, host", [
    ("/srv/results/ddp1/", "local", "/srv/results/ddp1", None),
    ("results/ddp1", "local", "/home/me/results/ddp1", None),
    ("/data/a:b", "local", "/data/a:b", None),
    ("backup@nas:/archive/ddp1/", "remote", "/archive/ddp1", "backup@nas"),
    ("nas.example.com:archive", "remote", "archive", "nas.example.com"),
])
def test_a_destination_is_read_as_rsync_reads_it(value, kind, path, host):
    dest = collect.destination(value, "/home/me", "/usr/bin/rsync")
    assert (dest["kind"], dest["path"], dest["host"], dest["problem"]) == (kind, path, host, None)


@pytest.mark.parametrize("value, rsync, message", [
    ("", "/usr/bin/rsync", "train_collect_dest is empty"),
    (None, "/usr/bin/rsync", "train_collect_dest is empty"),
    ("nas::archive", "/usr/bin/rsync", "train_collect_dest nas::archive is an rsync daemon"),
    ("rsync://nas/archive", "/usr/bin/rsync", "is an rsync daemon"),
    ("no host:/x", "/usr/bin/rsync", "train_collect_dest no host:/x is not [user@]host:/path"),
    ("nas:", "/usr/bin/rsync", "is not [user@]host:/path"),
    ("/srv/results", None, "train_collect_dest /srv/results is a directory of the controller, which has no rsync"),
])
def test_an_unusable_destination_is_named(value, rsync, message):
    assert message in collect.destination(value, "/home/me", rsync)["problem"]


def test_a_remote_destination_needs_no_rsync_on_the_controller():
    assert collect.destination("nas:/archive", "/", None)["problem"] is None


def files(root, names, size=10):
    return [{"path": "%s/%s" % (root, name), "size": size} for name in names]


def test_the_final_model_is_whole_with_its_trainer_state():
    found = files("/out", ["adapter_model.safetensors", "adapter_config.json", "trainer_state.json", "all_results.json",
                           "checkpoint-10/adapter_model.safetensors"])
    output = collect.final_output(found, "/out/")
    assert output == {"files": ["adapter_config.json", "adapter_model.safetensors", "all_results.json", "trainer_state.json"],
                      "size": 40, "problems": []}


def test_a_final_model_without_its_state_or_a_shard_is_incomplete():
    found = files("/out", ["model-00001-of-00002.safetensors", "model.safetensors.index.json"])
    assert collect.final_output(found, "/out")["problems"] == [
        "no trainer_state.json (LLaMA-Factory writes it after the model: the training did not finish)",
        "weight shard 2 of 2 missing"]


def test_no_weights_at_the_top_is_no_final_model():
    assert collect.final_output(files("/out", ["checkpoint-10/model.safetensors", "runs/events"]), "/out") is None


# The names of the job's records, as the first node's report gives them.
RECORDS = {"job.json": "job record", "node1.log": "log", "node1.exit": "exit record"}


def test_a_train_ddp_checkpoint_is_one_file_of_its_directory():
    chosen = collect.plan("/mnt/shared/jobs/ddp1", DDP, None, True, False, LOCAL, RECORDS)
    records, checkpoint = chosen["parts"]
    assert records["filters"] == ["--include=/job.json", "--include=/node1.log", "--include=/node1.exit", "--exclude=*"]
    assert records["patterns"] == sorted(RECORDS)
    assert (records["source"], records["into"], records["recurse"]) == ("/mnt/shared/jobs/ddp1/", "/srv/results/ddp1", False)
    assert checkpoint["filters"] == ["--include=/step-000020.pt", "--exclude=*"]
    assert checkpoint["patterns"] == ["step-000020.pt"]
    assert (checkpoint["source"], checkpoint["into"]) == ("/mnt/shared/jobs/ddp1/checkpoints/", "/srv/results/ddp1/checkpoints")
    assert chosen["result"]["at"] == "checkpoints/step-000020.pt" and chosen["problem"] is None and chosen["prepare"] is None


def test_a_trainer_checkpoint_directory_goes_whole_into_checkpoints():
    resume = {"dir": "/mnt/shared/out", "latest": "checkpoint-40",
              "incomplete": {"checkpoint-60": ["rng_state of rank 3 missing"]}}
    chosen = collect.plan("/mnt/shared/jobs/lf", resume, None, True, True, LOCAL, RECORDS)
    part = chosen["result"]
    # No trailing slash: rsync makes checkpoint-40/ inside checkpoints/ (one missing level, which it can make).
    assert (part["source"], part["into"], part["to"]) == (
        "/mnt/shared/out/checkpoint-40", "/srv/results/ddp1/checkpoints", "/srv/results/ddp1/checkpoints/checkpoint-40")
    assert part["recurse"] and part["filters"] == []
    assert chosen["notes"] == ["/mnt/shared/out/checkpoint-60 is incomplete (rng_state of rank 3 missing): not collected"]


def test_a_finished_llamafactory_run_gives_its_final_model():
    resume = {"dir": "/mnt/shared/out", "latest": "checkpoint-40", "incomplete": {}}
    output = {"files": ["adapter_model.safetensors", "trainer_state.json"], "size": 20, "problems": []}
    part = collect.plan("/mnt/shared/jobs/lf", resume, output, True, True, LOCAL, RECORDS)["result"]
    assert (part["what"], part["source"], part["into"], part["filters"]) == (
        "final model", "/mnt/shared/out/", "/srv/results/ddp1/output", ["--exclude=*/"])


def test_nothing_to_collect_says_why_and_how_to_get_the_records():
    resume = {"dir": "/mnt/shared/jobs/x/checkpoints", "latest": None, "incomplete": {"step-000010.pt.tmp": ["a save"]}}
    problem = collect.plan("/mnt/shared/jobs/x", resume, None, True, False, LOCAL, RECORDS)["problem"]
    assert problem == ("no complete checkpoint in /mnt/shared/jobs/x/checkpoints; /mnt/shared/jobs/x/checkpoints/"
                       "step-000010.pt.tmp is incomplete (a save): not collected (a LLaMA-Factory job keeps them in its "
                       "output_dir: give its -e train_config); to collect its records alone: "
                       "-e train_collect_checkpoint=false")


def test_records_alone_leave_the_checkpoint_behind():
    chosen = collect.plan("/mnt/shared/jobs/ddp1", DDP, None, False, False, LOCAL, RECORDS)
    assert [part["what"] for part in chosen["parts"]] == ["records"] and chosen["problem"] is None
    assert chosen["left"] == "its checkpoint step-000020.pt was not collected (train_collect_checkpoint=false)"


def test_a_remote_destination_is_made_ready_by_one_command():
    prepare = collect.plan("/j", DDP, None, True, False, dict(REMOTE, path="/archive/it's"), RECORDS)["prepare"]
    assert prepare.startswith("mkdir -p -- '/archive/it'\"'\"'s' && command -v rsync >/dev/null || ")
    assert "echo 'sha256sum is not installed on backup@nas' >&2; exit 127;" in prepare
    assert collect.sums_command(REMOTE, ["node1.log", "a b"]) == "cd -- /archive/ddp1 && sha256sum -- 'a b' node1.log"


def test_files_found_on_the_node_are_keyed_by_their_place_at_the_destination():
    chosen = collect.plan("/mnt/shared/jobs/lf", {"dir": "/out", "latest": "checkpoint-40", "incomplete": {}}, None, True,
                          True, LOCAL, RECORDS)
    records, checkpoint = chosen["parts"]
    found = collect.files_found([
        (records, [{"path": "/mnt/shared/jobs/lf/job.json", "size": 5, "checksum": "aa"}]),
        (checkpoint, [{"path": "/out/checkpoint-40/global_step40/shard.pt", "size": 7, "checksum": "bb"}])])
    assert found == {"job.json": {"size": 5, "sha256": "aa"},
                     "checkpoints/checkpoint-40/global_step40/shard.pt": {"size": 7, "sha256": "bb"}}


def test_sha256sum_output_is_read_with_its_escapes():
    text = "aa  node1.log\nbb *binary.pt\n\\cc  new\\nline\\\\x\n"
    assert collect.sha256sum_output(text) == {"node1.log": "aa", "binary.pt": "bb", "new\nline\\x": "cc"}


SENT = {"job.json": {"size": 5, "sha256": "aa"}, "node1.log": {"size": 9, "sha256": "bb"},
        "checkpoints/step-000020.pt": {"size": 100, "sha256": "cc"}}


def test_what_arrived_as_it_left_is_verified():
    checked = collect.verify(SENT, {"job.json": "aa", "node1.log": "bb", "checkpoints/step-000020.pt": "cc"}, set())
    assert checked == {"files": {"job.json": 5, "node1.log": 9, "checkpoints/step-000020.pt": 100}, "bytes": 114,
                       "mismatched": [], "changed": []}


def test_a_mismatch_or_a_missing_file_is_named():
    checked = collect.verify(SENT, {"job.json": "aa", "node1.log": "bb", "checkpoints/step-000020.pt": "dd"}, set())
    assert checked["mismatched"] == ["checkpoints/step-000020.pt: sha256 dd at the destination, cc on the node"]
    assert collect.verify(SENT, {"job.json": "aa", "node1.log": "bb"}, set())["mismatched"] == [
        "checkpoints/step-000020.pt: not at the destination after the copy"]


def test_a_running_jobs_records_may_change_but_not_its_checkpoint():
    checked = collect.verify(SENT, {"job.json": "aa", "node1.log": "b2", "checkpoints/step-000020.pt": "c2"}, {"job.json", "node1.log"})
    assert checked["changed"] == ["node1.log"] and len(checked["mismatched"]) == 1


def test_rsync_stats_are_summed_over_the_parts():
    assert collect.rsync_stats([STATS, STATS, None]) == {"total": 10416, "transferred": 10416, "literal": 7616, "matched": 2800}


@pytest.mark.parametrize("size, text", [(12, "12 B"), (2048, "2.0 KiB"), (3 * 2 ** 20, "3.0 MiB"), (2 ** 30, "1.0 GiB")])
def test_human_sizes(size, text):
    assert collect.human(size) == text


def summed(chosen, sent=None, stats=None, running=(), dest=None, addresses=None):
    sent = SENT if sent is None else sent
    dest = dest or LOCAL
    checked = collect.verify(sent, {path: entry["sha256"] for path, entry in sent.items()}, set())
    stats = stats or {"total": 0, "transferred": 0, "literal": 0, "matched": 0}
    return collect.summary("ddp1", dest, chosen, checked, stats, list(running),
                           ["/mnt/shared/jobs/ddp1", "/mnt/shared/jobs/ddp1/checkpoints"], addresses or {"node1": "10.0.0.1"})


def test_the_summary_says_what_where_and_that_it_is_safe_to_release():
    said = summed(collect.plan("/mnt/shared/jobs/ddp1", DDP, None, True, False, LOCAL, RECORDS))
    assert said["safe"] and said["lines"] == [
        "job ddp1: 3 files (114 B) copied to /srv/results/ddp1, each verified by sha256 on the node and at the destination",
        "checkpoint step-000020.pt: 1 file (100 B) -> /srv/results/ddp1/checkpoints/step-000020.pt",
        "records: job.json, 1 log, 0 exit records -> /srv/results/ddp1/",
        "safe to release: the job has ended and its results are verified at /srv/results/ddp1. Nothing on the cluster was "
        "deleted: /mnt/shared/jobs/ddp1 stays there until you remove it"]


def test_a_resumed_copy_says_how_much_was_already_there():
    stats = {"total": 2 ** 30, "transferred": 2 ** 30, "literal": 2 ** 29, "matched": 2 ** 29}
    lines = summed(collect.plan("/j", DDP, None, True, False, LOCAL, RECORDS), stats=stats)["lines"]
    assert "reused 512.0 MiB already at the destination (an earlier or interrupted copy), sent 512.0 MiB" in lines


def test_a_running_job_is_not_safe_to_release():
    said = summed(collect.plan("/j", DDP, None, True, False, LOCAL, RECORDS), running=["node1", "node2"])
    assert not said["safe"]
    assert said["lines"][-1] == ("NOT safe to release: job ddp1 is still running on node1, node2: stop it "
                                 "(-e train_action=stop) and collect again")


def test_a_destination_on_a_node_of_the_cluster_is_not_safe_to_release():
    dest = dict(REMOTE, host="train@10.0.0.1", display="train@10.0.0.1:/archive/ddp1")
    said = summed(collect.plan("/j", DDP, None, True, False, dest, RECORDS), dest=dest)
    assert said["lines"][-1] == "NOT safe to release: the destination is on node1, a node of this cluster"


def test_records_alone_are_not_safe_to_release():
    sent = {path: entry for path, entry in SENT.items() if "/" not in path}
    said = summed(collect.plan("/j", DDP, None, False, False, LOCAL, RECORDS), sent=sent)
    assert not said["safe"] and len(said["lines"]) == 3
    assert said["lines"][-1] == "NOT safe to release: its checkpoint step-000020.pt was not collected (train_collect_checkpoint=false)"


def test_beside_a_final_model_an_incomplete_checkpoint_is_no_loss():
    resume = {"dir": "/out", "latest": "checkpoint-40", "incomplete": {"checkpoint-60": ["no trainer_state.json"]}}
    output = {"files": ["model.safetensors", "trainer_state.json"], "size": 20, "problems": []}
    assert collect.plan("/j", resume, output, True, True, LOCAL, RECORDS)["notes"] == []


def test_a_running_jobs_changed_records_are_not_counted_as_verified():
    sent = dict(SENT)
    checked = collect.verify(sent, {"job.json": "aa", "node1.log": "b2", "checkpoints/step-000020.pt": "cc"}, {"job.json", "node1.log"})
    stats = {"total": 0, "transferred": 0, "literal": 0, "matched": 0}
    lines = collect.summary("ddp1", LOCAL, collect.plan("/j", DDP, None, True, False, LOCAL, RECORDS), checked, stats, ["node1"], ["/j"],
                            {})["lines"]
    assert lines[0].endswith("copied to /srv/results/ddp1, 2 verified by sha256 on the node and at the destination")
    assert "changed while copied (the job runs), copied as they were: node1.log" in lines
