# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Which checkpoint a start resumes from: train_ddp.py's files and the Hugging Face Trainer's directories."""

from ansible_collections.trainops.cluster.plugins.module_utils._checkpoints import assess, messages

# What transformers' Trainer writes for a LoRA run of 2 ranks (LLaMA-Factory's output_dir/checkpoint-N).
HF_FILES = ["adapter_config.json", "adapter_model.safetensors", "optimizer.pt", "scheduler.pt", "rng_state_0.pth",
            "rng_state_1.pth", "trainer_state.json", "training_args.bin", "tokenizer.json"]


def hf(step, files=None, size=10):
    return [{"path": "checkpoint-%d/%s" % (step, name), "size": size} for name in (HF_FILES if files is None else files)]


def test_the_newest_complete_trainer_checkpoint_is_chosen():
    found = assess(hf(10) + hf(20) + [{"path": "runs/events.out", "size": 1}], 2)
    assert found["latest"] == "checkpoint-20" and found["step"] == 20
    assert found["complete"] == ["checkpoint-10", "checkpoint-20"] and found["incomplete"] == {}
    assert found["size"] == 10 * len(HF_FILES)


def test_a_ranks_missing_rng_state_makes_a_checkpoint_incomplete():
    partial = [name for name in HF_FILES if name != "rng_state_1.pth"]
    found = assess(hf(10) + hf(20, partial), 2)
    assert found["latest"] == "checkpoint-10"
    assert found["incomplete"] == {"checkpoint-20": ["rng_state of rank 1 missing"]}


def test_one_rank_writes_no_per_rank_rng_file():
    single = [name for name in HF_FILES if not name.startswith("rng_state_")] + ["rng_state.pth"]
    assert assess(hf(5, single), 1)["latest"] == "checkpoint-5"


def test_a_save_cut_short_before_the_trainer_state():
    partial = ["adapter_model.safetensors", "adapter_config.json"]
    found = assess(hf(10) + hf(20, partial), 2)
    assert found["latest"] == "checkpoint-10"
    assert found["incomplete"]["checkpoint-20"] == [
        "no trainer_state.json (the Trainer writes it last: the save did not finish)", "no optimizer.pt",
        "rng_state of rank 0, 1 missing"]


def test_sharded_weights_and_deepspeed_optimizer_shards():
    files = ["model-00001-of-00002.safetensors", "model.safetensors.index.json", "trainer_state.json",
             "rng_state_0.pth", "rng_state_1.pth", "global_step30/bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt",
             "global_step30/zero_pp_rank_0_mp_rank_00_model_states.pt"]
    found = assess(hf(30, files), 2)
    assert found["latest"] is None
    assert found["incomplete"]["checkpoint-30"] == ["weight shard 2 of 2 missing", "the optimizer shard of rank 1 missing"]


def test_older_broken_checkpoints_are_not_named():
    partial = [name for name in HF_FILES if name != "trainer_state.json"]
    assert assess(hf(10, partial) + hf(20), 2)["incomplete"] == {}


def test_train_ddp_files_and_a_save_in_progress():
    entries = [{"path": "step-000010.pt", "size": 7}, {"path": "step-000020.pt", "size": 7},
               {"path": "step-000030.pt.tmp", "size": 3}]
    found = assess(entries, 3)
    assert found["latest"] == "step-000020.pt" and found["step"] == 20 and found["size"] == 7
    assert found["incomplete"] == {"step-000030.pt.tmp": ["a save that did not finish (only step-000030.pt.tmp)"]}
    assert messages(found, "/mnt/shared/ckpt") == [
        "/mnt/shared/ckpt/step-000030.pt.tmp is incomplete (a save that did not finish (only step-000030.pt.tmp)): not loaded",
        "resuming from /mnt/shared/ckpt/step-000020.pt (step 20)"]


def test_nothing_to_resume_from():
    found = assess([], 2)
    assert found["latest"] is None and found["step"] is None and messages(found, "/x") == []
