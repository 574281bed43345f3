# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""LLaMA-Factory config traps, on the field guide's multi-node LoRA config."""

from ansible_collections.trainops.cluster.plugins.plugin_utils import llamafactory

SHARED = "/mnt/shared"
GOOD = {
    "model_name_or_path": "/mnt/shared/models/qwen2-0.5b", "stage": "sft", "finetuning_type": "lora",
    "dataset": "alpaca_en_demo", "dataset_dir": "/mnt/shared/data", "tokenized_path": "/mnt/shared/tokenized/alpaca",
    "output_dir": "/mnt/shared/out/qwen-lora", "save_steps": 50, "overwrite_output_dir": False,
}


def present(config, missing=()):
    return {node: {p: (node, p) not in missing for p in llamafactory.node_paths(config)} for node in ("node1", "node2")}


def test_the_guides_config_has_no_findings():
    assert llamafactory.findings(GOOD, SHARED, present(GOOD), []) == []


def test_hub_ids_are_not_paths():
    assert llamafactory.node_paths(dict(GOOD, model_name_or_path="Qwen/Qwen2-0.5B"))[0] == "/mnt/shared/data"


def test_a_model_missing_on_one_node_is_named():
    found = llamafactory.findings(GOOD, SHARED, present(GOOD, [("node2", GOOD["model_name_or_path"])]), [])
    assert found == ["node2: model_name_or_path /mnt/shared/models/qwen2-0.5b does not exist there"]


def test_output_dir_on_a_local_disk():
    found = llamafactory.findings(dict(GOOD, output_dir="/home/train/out"), SHARED, present(GOOD), [])
    assert found[0].startswith("output_dir /home/train/out is not on shared storage (/mnt/shared)")
    assert llamafactory.findings(dict(GOOD, output_dir="/mnt/sharedx/out"), SHARED, present(GOOD), [])


def test_overwrite_output_dir_while_resuming():
    found = llamafactory.findings(dict(GOOD, overwrite_output_dir=True), SHARED, present(GOOD), ["checkpoint-50", "checkpoint-100"])
    assert found == ["overwrite_output_dir is true while /mnt/shared/out/qwen-lora holds checkpoint-100, checkpoint-50: the run "
                     "would start again from step 0 instead of resuming"]
    assert llamafactory.findings(dict(GOOD, overwrite_output_dir=True), SHARED, present(GOOD), []) == []


def test_data_shared_file_system_must_match_the_cache():
    on_shared = dict(GOOD, cache_dir="/mnt/shared/cache")
    assert "every node's first rank preprocesses" in llamafactory.findings(on_shared, SHARED, present(GOOD), [])[0]
    assert llamafactory.findings(dict(on_shared, data_shared_file_system=True), SHARED, present(GOOD), []) == []
    local = dict(GOOD, cache_dir="/var/cache/hf", data_shared_file_system=True)
    assert "the others never see the data" in llamafactory.findings(local, SHARED, present(GOOD), [])[0]


def test_tokenizing_inside_the_barrier_at_the_default_timeout():
    config = {k: v for k, v in GOOD.items() if k != "tokenized_path"}
    found = llamafactory.findings(config, SHARED, present(config), [])
    assert found == ['no tokenized_path and ddp_timeout unset: rank 0 tokenizes the dataset inside a barrier and the other ranks '
                     'give up after 1800 s (the hang at "Loading dataset"); tokenize once into tokenized_path on shared storage, '
                     'or raise ddp_timeout']
    assert llamafactory.findings(dict(config, ddp_timeout=180000), SHARED, present(config), []) == []


GIB = 2 ** 30
NONE_YET = {"latest": None, "size": None, "complete": []}


def test_a_full_fine_tune_that_will_not_fit_is_refused():
    config = dict(GOOD, finetuning_type="full", max_steps=200, save_steps=50)
    finding, note = llamafactory.space(config, 20 * GIB, 1 * GIB, NONE_YET)
    assert finding == ("output_dir /mnt/shared/out/qwen-lora has 20.0 GiB free, but the 4 checkpoints to come take about "
                       "24.0 GiB (each 6.0 GiB, estimated: 6x the model's 1.0 GiB of weights for a full fine-tune)")
    assert note is None


def test_the_measured_checkpoint_and_save_total_limit_count():
    resumed = {"latest": "checkpoint-100", "size": 3 * GIB, "complete": ["checkpoint-50", "checkpoint-100"]}
    config = dict(GOOD, max_steps=1000, save_steps=50, save_total_limit=3)
    finding, note = llamafactory.space(config, 4 * GIB, None, resumed)
    # At most 3 kept, 2 there: one more on disk at a time.
    assert finding is None and note == "checkpoint space: 1 checkpoint of 3.0 GiB (measured from checkpoint-100) fit in 4.0 GiB free"
    finding, dummy = llamafactory.space(dict(config, save_total_limit=None), 4 * GIB, None, resumed)
    assert "the 18 checkpoints to come take about 54.0 GiB (each 3.0 GiB, measured from checkpoint-100)" in finding


def test_what_is_not_judged_is_said():
    assert llamafactory.space(dict(GOOD, num_train_epochs=3), GIB, GIB, NONE_YET) == (
        None, "checkpoint space not judged: with no max_steps and no save_total_limit the number of checkpoints is not known")
    assert llamafactory.space(dict(GOOD, max_steps=100), GIB, GIB, NONE_YET)[1] == (
        "checkpoint space not judged until a first checkpoint shows its size (lora fine-tuning)")
    assert llamafactory.space(dict(GOOD, save_strategy="no"), 0, GIB, NONE_YET) == (None, None)


def test_small_checkpoints_are_sized_in_mib():
    resumed = {"latest": "checkpoint-140", "size": 600 * 1024, "complete": ["checkpoint-120", "checkpoint-140"]}
    assert llamafactory.space(dict(GOOD, max_steps=1000, save_steps=20), 3 * 2 ** 20, None, resumed)[0] == (
        "output_dir /mnt/shared/out/qwen-lora has 3.0 MiB free, but the 48 checkpoints to come take about 28.1 MiB "
        "(each 600.0 KiB, measured from checkpoint-140)")


def test_free_space_of_the_deepest_mount():
    mounts = [{"mount": "/", "size_available": 1}, {"mount": "/mnt/shared", "size_available": 5},
              {"mount": "/mnt/sharedx", "size_available": 9}]
    assert llamafactory.free_bytes(mounts, "/mnt/shared/out") == 5
    assert llamafactory.free_bytes(mounts, "/home/train") == 1
    assert llamafactory.free_bytes([], "/x") is None


def test_every_start_resumes_from_the_newest_complete_checkpoint_unless_told_otherwise():
    assert llamafactory.resume_pinned({}, "llamafactory-cli train x.yaml")
    assert not llamafactory.resume_pinned({}, "llamafactory-cli train x.yaml resume_from_checkpoint=/a")
    assert not llamafactory.resume_pinned({"resume_from_checkpoint": "/a"}, "llamafactory-cli train x.yaml")


def test_samples_per_rank_are_the_batch_times_the_accumulation():
    assert llamafactory.samples_per_rank({"per_device_train_batch_size": 2, "gradient_accumulation_steps": 8}) == 16
    assert llamafactory.samples_per_rank({"per_device_train_batch_size": 4}) == 4 and llamafactory.samples_per_rank({}) is None


GIB = 2 ** 30


def test_a_node_whose_ranks_cannot_load_the_model_into_host_memory_is_named():
    config = {"model_name_or_path": "/mnt/shared/models/qwen2-7b", "finetuning_type": "lora"}
    findings, note = llamafactory.host_memory(config, 15 * GIB, {"node1": 8, "node2": 8, "node3": 1},
                                              {"node1": 200 * GIB, "node2": 100 * GIB, "node3": None})
    assert findings == ["node2: 8 ranks each load the model's 15.0 GiB of weights into host memory at once (120.0 GiB), but "
                        "MemAvailable is 100.0 GiB: the kernel's OOM killer would end the load. Fewer ranks per node "
                        "(NPROC_PER_NODE), DeepSpeed ZeRO-3 (the weights partitioned as they load), or a node with more memory"]
    assert note == "host memory at load not judged on node3: MemAvailable unread"
    assert llamafactory.host_memory(config, 15 * GIB, {"node1": 1}, {"node1": 10 * GIB})[0][0].startswith(
        "node1: 1 rank loads the model's 15.0 GiB of weights into host memory at once (15.0 GiB)")


def test_host_memory_is_not_judged_where_the_load_is_not_every_ranks_whole_model():
    assert llamafactory.host_memory({"deepspeed": "ds_z3_config.json"}, 15 * GIB, {"n": 8}, {"n": GIB}) == (
        [], "host memory at load not judged: DeepSpeed may partition the weights as they load (ZeRO-3)")
    assert llamafactory.host_memory({"quantization_bit": 4}, 15 * GIB, {"n": 8}, {"n": GIB})[0] == []
    assert llamafactory.host_memory({"model_name_or_path": "Qwen/Qwen2-7B"}, None, {"n": 8}, {"n": GIB}) == (
        [], "host memory at load not judged: the model's weights are no local files (a hub id, or none found)")


def test_round_robin_gradients_is_named_where_a_restart_may_shrink():
    """LLaMA-Factory's examples/deepspeed/ds_z2_config.json sets round_robin_gradients: its checkpoints come back scrambled
    from DeepSpeed's universal conversion at another world size (tests/device/deepspeed/round_robin.sh)."""
    config = dict(GOOD, deepspeed="/mnt/shared/ds_z2_config.json")
    z2 = {"zero_optimization": {"stage": 2, "round_robin_gradients": True}}
    assert llamafactory.restart_notes(config, z2, True) == [
        "/mnt/shared/ds_z2_config.json sets round_robin_gradients: a restart on fewer nodes (train_min_nodes) cannot convert "
        "its ZeRO-2 checkpoints to DeepSpeed's universal checkpoint (the conversion does not keep round robin's order of the "
        "parameters) and stops the job instead; set it false"]
    assert llamafactory.restart_notes(config, z2, False) == []  # every restart on as many nodes: nothing to convert
    assert llamafactory.restart_notes(config, {"zero_optimization": {"stage": 3, "round_robin_gradients": True}}, True) == []
    assert llamafactory.restart_notes(config, {"zero_optimization": {"stage": 2}}, True) == []
    assert llamafactory.restart_notes(GOOD, None, True) == []
