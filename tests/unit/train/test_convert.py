# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A restart on fewer nodes than wrote a DeepSpeed checkpoint: the supervisor converts it to DeepSpeed's universal
checkpoint through the job's launcher (here a stand-in for ds_to_universal that writes what it writes: the step's
_universal folder and latest_universal), the restart says so, and the next attempt's LLaMA-Factory command loads it
through a copy of the job's DeepSpeed config with load_universal on; a plain command is told by its environment. Where
it cannot be converted (round_robin_gradients, a failing conversion) the job stops saying why, at once. The conversion
itself, its flags and the loss after it were measured on the GPU test machine (tests/device/deepspeed)."""

from __future__ import annotations

import json
import sys
import time

from test_verdict import Waited, deepspeed_checkpoint, stalled_job
from trainops_job import _checkpoints, convert, runner

LOST = "node3 failed first (train_on_failure: restart)"
# ds_to_universal's command line as the runner writes it, and what it leaves: the step's universal folder with the
# model states and one parameter's fp32 weights, and latest_universal beside it.
STAND_IN = r'''
import os, sys
args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
assert sys.argv[-1] == "--inject_missing_state", sys.argv
out = args["--output_folder"]
os.makedirs(os.path.join(out, "zero", "lora_A.weight"))
for name in ("mp_rank_00_model_states.pt", "zero/lora_A.weight/fp32.pt"):
    open(os.path.join(out, name), "w").close()
open(os.path.join(os.path.dirname(out), "latest_universal"), "w").write(os.path.basename(out))
open(os.path.join(out, "home"), "w").write(os.environ["HOME"])
print("*** Done!")
'''


def converting_job(tmp_path, **convert_plan):
    """A job of 3 nodes whose LLaMA-Factory DeepSpeed checkpoint-200 was written by 3 ranks, node3 lost with no spare,
    train_min_nodes 2; its launcher runs the conversion on this host (env), the stand-in as its command."""
    deepspeed_checkpoint(tmp_path / "out", 200, 3)
    (tmp_path / "convert.py").write_text(STAND_IN)
    (tmp_path / "ds_z2.json").write_text(json.dumps({"zero_optimization": {"stage": 2, "round_robin_gradients": False}}))
    plan = dict({"command": "%s %s" % (sys.executable, tmp_path / "convert.py"), "timeout": 60,
                 "deepspeed": str(tmp_path / "ds_z2.json"), "optim": None}, **convert_plan)
    (tmp_path / "job").mkdir()
    return stalled_job(tmp_path / "job", min_nodes=2, max_auto_restarts=3, launcher=["env"], convert=plan, master_addr="10.0.0.1",
                       addresses={"node1": "10.0.0.1", "node2": "10.0.0.2", "node3": "10.0.0.3"},
                       command="llamafactory-cli train /shared/lf.yaml", resume={"dir": str(tmp_path / "out"), "world": 3, "argument": True})


def restarted(job, tmp_path):
    Waited.turns = [{"node3": "unreachable on the training network (timed out)"}]
    started = time.monotonic()
    Waited(job).restart(LOST)
    return json.loads((tmp_path / "job" / "job.json").read_text())["events"], time.monotonic() - started


def test_the_checkpoint_is_converted_and_the_restart_on_fewer_nodes_loads_it(tmp_path, monkeypatch):
    job = converting_job(tmp_path)
    monkeypatch.setenv("HOME", "/nonexistent")  # the runner's, root's: not the training user's
    events, _seconds = restarted(job, tmp_path)
    assert [e["event"] for e in events] == ["left out", "checkpoint converted", "restart"]
    assert events[1]["checkpoint"] == "checkpoint-200" and events[2]["nodes"] == ["node1", "node2"]
    assert events[2]["converted"].startswith("checkpoint-200 converted to DeepSpeed's universal checkpoint in ")
    assert (tmp_path / "out" / "checkpoint-200" / "latest_universal").read_text() == "global_step200_universal"
    # In the training user's home (DeepSpeed writes ~/.triton), not the runner's.
    assert (tmp_path / "out" / "checkpoint-200" / "global_step200_universal" / "home").read_text() == job.user.pw_dir
    # The layout now loads at any size: a later restart does not convert again.
    entries = _checkpoints.listing(str(tmp_path / "out"))
    assert _checkpoints.layout(entries, "checkpoint-200")["universal"]
    # The job's DeepSpeed config, with load_universal on, for the attempts that resume from the conversion.
    copy = json.loads((tmp_path / "job" / "deepspeed-universal.json").read_text())
    assert copy["checkpoint"] == {"load_universal": True} and copy["zero_optimization"]["stage"] == 2
    # The restart's command (2 of 3 nodes) resumes from it through that config, with the unfused AdamW.
    text = runner.command(job, ["node1", "node2"])
    assert text.endswith("llamafactory-cli train /shared/lf.yaml resume_from_checkpoint=%s/checkpoint-200 deepspeed=%s "
                         "optim=adamw_torch" % (tmp_path / "out", tmp_path / "job" / "deepspeed-universal.json")), text
    assert runner.job_env(job, 1, ["node1", "node2"])["TRAINOPS_UNIVERSAL_CHECKPOINT"] == "%s/checkpoint-200" % (tmp_path / "out")


def test_a_config_of_its_own_optimizer_keeps_it_and_a_plain_checkpoint_loads_as_it_is(tmp_path):
    job = converting_job(tmp_path, optim="sgd")
    restarted(job, tmp_path)
    assert runner.command(job, ["node1", "node2"]).endswith("deepspeed=%s" % (tmp_path / "job" / "deepspeed-universal.json"))
    # checkpoint-210, written by the 2 ranks of the restart (their RNG states and shards alone), is whole for them and
    # newer: the next attempt loads it as it is (load_universal on would look for its latest_universal and fail).
    folder = tmp_path / "out" / "checkpoint-210"
    (folder / "global_step210").mkdir(parents=True)
    for name in ["trainer_state.json", "adapter_model.safetensors", "rng_state_0.pth", "rng_state_1.pth"] + [
            "global_step210/bf16_zero_pp_rank_%d_mp_rank_00_optim_states.pt" % r for r in range(2)]:
        (folder / name).write_bytes(b"x")
    assert job.rank_counts() == [3, 2]
    text = runner.command(job, ["node1", "node2"])
    assert text.endswith("resume_from_checkpoint=%s/checkpoint-210" % (tmp_path / "out")) and "deepspeed=" not in text
    assert runner.job_env(job, 2, ["node1", "node2"])["TRAINOPS_UNIVERSAL_CHECKPOINT"] == ""


def test_shards_written_with_round_robin_are_not_converted_and_the_job_stops_at_once_saying_why(tmp_path):
    job = converting_job(tmp_path)
    (tmp_path / "ds_z2.json").write_text(json.dumps({"zero_optimization": {"stage": 2, "round_robin_gradients": True}}))
    events, seconds = restarted(job, tmp_path)
    assert [e["event"] for e in events] == ["left out", "checkpoint unfit", "stop"]
    assert events[-1]["why"].endswith("; not converted: it was written with round_robin_gradients (%s), whose order of the "
                                      "parameters DeepSpeed's conversion does not keep: loaded by another number of ranks "
                                      "the weights would come back scrambled; set it false for the next run" % (tmp_path / "ds_z2.json"))
    assert not (tmp_path / "out" / "checkpoint-200" / "global_step200_universal").exists() and seconds < 10


def test_a_conversion_that_fails_stops_the_job_with_its_last_words(tmp_path):
    job = converting_job(tmp_path, command="%s -c 'import deepspeed'" % sys.executable)
    events, seconds = restarted(job, tmp_path)
    assert [e["event"] for e in events] == ["left out", "checkpoint unfit", "stop"]
    assert "; its conversion (train_checkpoint_convert) failed after " in events[-1]["why"]
    assert events[-1]["why"].endswith("exit status 1: ModuleNotFoundError: No module named 'deepspeed'"), events[-1]["why"]
    assert seconds < 10


def test_what_is_not_converted_is_named():
    shape = {"format": "deepspeed", "zero_stage": "1/2", "data_parallel": 3, "model_parallel": 1, "universal": False}
    plan = {"command": "python3 -m deepspeed.checkpoint.ds_to_universal", "deepspeed": "/shared/ds.json"}
    assert convert.refusal(plan, shape, {"zero_optimization": {"stage": 2}}, False) is None
    assert convert.refusal(plan, shape, None, False) is None  # a plain command's config is its own: not read
    assert convert.refusal(dict(plan, command=""), shape, None, False) == "train_checkpoint_convert is empty"
    assert convert.refusal(plan, shape, None, True).startswith("the job runs in its training image")
    # ZeRO-3 shards are partitioned by name, not by round robin's order.
    assert convert.refusal(plan, dict(shape, zero_stage=3), {"zero_optimization": {"round_robin_gradients": True}}, False) is None
    entries = [{"path": "checkpoint-100/%s/mp_rank_00_model_states.pt" % step} for step in ("global_step20", "global_step100")]
    assert convert.step_folder(entries, "checkpoint-100") == "global_step100"
    assert convert.deepspeed_config("ds.json")[1] == ("its DeepSpeed config ds.json is a relative path (the restarted command "
                                                      "could not be told where it is)")
    assert convert.command(plan, "/ck/checkpoint-20", "global_step20") == (
        "python3 -m deepspeed.checkpoint.ds_to_universal --input_folder '/ck/checkpoint-20/global_step20' "
        "--output_folder '/ck/checkpoint-20/global_step20_universal' --inject_missing_state")
