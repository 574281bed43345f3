# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""LLaMA-Factory config traps, on the field guide's multi-node LoRA config."""

from ansible_collections.trainops.cluster.plugins.module_utils import llamafactory

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
