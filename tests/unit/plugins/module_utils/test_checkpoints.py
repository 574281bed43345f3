# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Which checkpoint a start resumes from: train_ddp.py's files and the Hugging Face Trainer's directories."""

from ansible_collections.trainops.cluster.plugins.module_utils._checkpoints import assess, layout, messages, unfit

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


def test_a_checkpoint_of_a_restart_on_fewer_ranks_is_whole_for_its_own_size():
    two = [name for name in HF_FILES if name != "rng_state_2.pth"]
    three = HF_FILES + ["rng_state_2.pth"]
    # Written by 3 ranks, then by the 2 of a restart: each whole for the size that wrote it, judged by the job's sizes.
    assert assess(hf(10, three) + hf(20, two), [3, 2])["latest"] == "checkpoint-20"
    assert assess(hf(10, three) + hf(20, two), 3)["incomplete"] == {"checkpoint-20": ["rng_state of rank 2 missing"]}
    # Rank 1's state missing is no size's whole checkpoint: the first size's reasons are said.
    assert assess(hf(20, [name for name in three if name != "rng_state_1.pth"]), [3, 2])["incomplete"] == {
        "checkpoint-20": ["rng_state of rank 1 missing"]}


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


# DeepSpeed's names for a step's files (deepspeed/checkpoint/utils.py: get_zero_ckpt_name_for_rank,
# get_model_ckpt_name_for_rank): an optimizer shard per data-parallel rank and model-parallel rank; the model's states
# per model-parallel rank, or under ZeRO-3 per data-parallel rank too. bf16_ where the bf16 optimizer wrote them.
def deepspeed(step, dp, stage=2, mp=1, universal=False):
    names = ["trainer_state.json", "adapter_model.safetensors", "global_step%d/zero_to_fp32.py" % step]
    names += ["rng_state_%d.pth" % rank for rank in range(dp * mp)]
    for m in range(mp):
        names += ["global_step%d/bf16_zero_pp_rank_%d_mp_rank_%02d_optim_states.pt" % (step, d, m) for d in range(dp)]
        names += (["global_step%d/zero_pp_rank_%d_mp_rank_%02d_model_states.pt" % (step, d, m) for d in range(dp)] if stage == 3
                  else ["global_step%d/mp_rank_%02d_model_states.pt" % (step, m)])
    if universal:
        names += ["global_step%d_universal/mp_rank_00_model_states.pt" % step]
    return hf(step, names)


def test_a_deepspeed_checkpoint_loads_only_at_the_data_parallel_size_that_wrote_it():
    entries = deepspeed(200, dp=3)
    latest = assess(entries, 3)["latest"]
    shape = layout(entries, latest)
    assert shape == {"format": "deepspeed", "zero_stage": "1/2", "data_parallel": 3, "model_parallel": 1, "universal": False}
    assert unfit(shape, latest, 3) is None
    assert unfit(shape, latest, 2) == (
        "checkpoint-200 holds DeepSpeed ZeRO-1/2 shards of 3 data-parallel ranks; 2 ranks (2 data-parallel) cannot load them: "
        "convert it with DeepSpeed's ds_to_universal and load it with load_universal, or restart on as many nodes as wrote it")


def test_zero_3_model_parallel_and_a_universal_checkpoint():
    entries = deepspeed(100, dp=2, stage=3, mp=2)
    shape = layout(entries, "checkpoint-100")
    assert (shape["zero_stage"], shape["data_parallel"], shape["model_parallel"]) == (3, 2, 2)
    # 4 ranks over 2 model-parallel ranks are the 2 data-parallel ranks that wrote it; 6 are 3.
    assert unfit(shape, "checkpoint-100", 4) is None and "6 ranks (3 data-parallel)" in unfit(shape, "checkpoint-100", 6)
    converted = layout(deepspeed(100, dp=2, universal=True), "checkpoint-100")
    assert converted["universal"] and unfit(converted, "checkpoint-100", 3) is None


def test_a_single_file_dcp_and_the_trainers_ddp_checkpoint_load_at_any_size():
    files = [{"path": "step-000030.pt", "size": 7}]
    assert layout(files, "step-000030.pt")["format"] == "file" and unfit(layout(files, "step-000030.pt"), "step-000030.pt", 1) is None
    dcp = hf(40, ["trainer_state.json", "pytorch_model_fsdp_0/.metadata", "pytorch_model_fsdp_0/__0_0.distcp", "optimizer.pt"])
    assert layout(dcp, "checkpoint-40")["format"] == "dcp" and unfit(layout(dcp, "checkpoint-40"), "checkpoint-40", 5) is None
    assert layout(hf(10), "checkpoint-10")["format"] == "trainer" and unfit(layout(hf(10), "checkpoint-10"), "checkpoint-10", 1) is None
