# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The traps of a LLaMA-Factory training config that make a multi-node run hang or start over, found before launch.

From LLaMA-Factory's issue tracker: the model, datasets or tokenized data missing on some node; output_dir on a local
disk; overwrite_output_dir while resuming (silently from step 0); data_shared_file_system not matching where the
datasets cache is; rank 0 tokenizing inside a barrier that the other ranks leave after ddp_timeout (1800 s).
"""

from __future__ import annotations

import math
import posixpath
from typing import Any

# LLaMA-Factory's (transformers') default: the other ranks wait this long at the barrier while rank 0 tokenizes.
DEFAULT_DDP_TIMEOUT = 1800
# Transformers' default save_steps.
DEFAULT_SAVE_STEPS = 500
# A full fine-tune's checkpoint against the model's bf16 weight files: the trainable weights upcast to fp32 (x2) and
# AdamW's two fp32 moments per weight (x4). LoRA's depends on its rank and targets: measured from a checkpoint only.
FULL_CHECKPOINT_FACTOR = 6
# Keys that name files or directories every node must see.
PATH_KEYS = ("model_name_or_path", "adapter_name_or_path", "dataset_dir", "tokenized_path")


def _under(path: str, directory: str) -> bool:
    path, directory = posixpath.normpath(path), posixpath.normpath(directory)
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def stage_overrides(config: dict[str, Any], paths: list[str], folder: str) -> dict[str, Any]:
    """{overrides: {key: its path in the stage}, offline: whether the model and the data are both staged} for a config
    whose PATH_KEYS lie under a path of train_stage (folder: train_stage_dir, a folder staged under its own name). With
    the model and the data (dataset_dir or tokenized_path) staged, the hub is left alone (HF_HUB_OFFLINE,
    HF_DATASETS_OFFLINE)."""
    overrides = {}
    for key in PATH_KEYS:
        value = config.get(key)
        if not isinstance(value, str) or not value.startswith("/"):
            continue
        path = next((posixpath.normpath(p) for p in paths if _under(value, p)), None)
        if path is not None:
            within = posixpath.relpath(posixpath.normpath(value), path)
            overrides[key] = posixpath.join(folder, posixpath.basename(path), *([within] if within != "." else []))
    data = "dataset_dir" in overrides or "tokenized_path" in overrides
    return {"overrides": overrides, "offline": "model_name_or_path" in overrides and data}


def samples_per_rank(config: dict) -> int | None:
    """The samples each rank takes per optimizer step: per_device_train_batch_size x gradient_accumulation_steps (1 by
    default, as the Trainer's); None without a batch."""
    batch = config.get("per_device_train_batch_size")
    return int(batch) * int(config.get("gradient_accumulation_steps") or 1) if batch else None


def node_paths(config: dict[str, Any]) -> list[str]:
    """The absolute paths of the config that every node must find (a hub id such as Qwen/Qwen2-0.5B is not one)."""
    return [str(config[key]) for key in PATH_KEYS if isinstance(config.get(key), str) and config[key].startswith("/")]


def findings(config: dict[str, Any], shared_dir: str, present: dict[str, dict[str, bool]], checkpoints: list[str]) -> list[str]:
    """[finding] for one config.

    present: {node: {path: exists}} for node_paths(config); checkpoints: names of checkpoint-N directories found in
    output_dir (a resume).
    """
    found = []
    keys = {str(config.get(key)): key for key in PATH_KEYS if config.get(key) is not None}
    for node, paths in present.items():
        for path, exists in paths.items():
            if not exists:
                found.append("%s: %s %s does not exist there" % (node, keys.get(path, "path"), path))
    output_dir = config.get("output_dir")
    if not output_dir:
        found.append("output_dir is not set: the checkpoints must go to shared storage (%s)" % shared_dir)
    elif not _under(str(output_dir), shared_dir):
        found.append("output_dir %s is not on shared storage (%s): each node would keep its own checkpoints, and a resume "
                     "finds them on one node only" % (output_dir, shared_dir))
    if checkpoints and config.get("overwrite_output_dir"):
        found.append("overwrite_output_dir is true while %s holds %s: the run would start again from step 0 instead of "
                     "resuming" % (output_dir, ", ".join(sorted(checkpoints)[-2:])))
    cache = config.get("cache_dir")
    if isinstance(cache, str) and cache.startswith("/"):
        shared = _under(cache, shared_dir)
        if shared and not config.get("data_shared_file_system"):
            found.append("cache_dir %s is on shared storage but data_shared_file_system is not true: every node's first "
                         "rank preprocesses into the same cache at once" % cache)
        if not shared and config.get("data_shared_file_system"):
            found.append("data_shared_file_system is true but cache_dir %s is not on shared storage: only the first "
                         "node preprocesses, and the others never see the data" % cache)
    if not config.get("tokenized_path") and int(config.get("ddp_timeout") or DEFAULT_DDP_TIMEOUT) <= DEFAULT_DDP_TIMEOUT:
        found.append('no tokenized_path and ddp_timeout %s: rank 0 tokenizes the dataset inside a barrier and the other '
                     'ranks give up after %s s (the hang at "Loading dataset"); tokenize once into tokenized_path on '
                     'shared storage, or raise ddp_timeout' % (config.get("ddp_timeout", "unset"),
                                                               config.get("ddp_timeout") or DEFAULT_DDP_TIMEOUT))
    return found


def _gib(size: float) -> str:
    for unit, power in (("GiB", 30), ("MiB", 20)):
        if size >= 2 ** power:
            return "%.1f %s" % (size / 2.0 ** power, unit)
    return "%.1f KiB" % (size / 1024.0)


def _checkpoints(count: int) -> str:
    return "%d checkpoint%s" % (count, "" if count == 1 else "s")


def free_bytes(mounts: list[dict[str, Any]], path: str) -> int | None:
    """Free bytes where path lives: the mount (setup's ansible_mounts) with the longest mount point above it."""
    above = [m for m in mounts if _under(path, m.get("mount", ""))]
    return max(above, key=lambda m: len(m["mount"]))["size_available"] if above else None


def _checkpoints_to_write(config: dict[str, Any], written: int) -> int | None:
    """How many more checkpoints the run keeps on disk, or None when the config does not say (epochs of an unknown
    dataset and no save_total_limit). written: the complete checkpoints already there."""
    strategy = config.get("save_strategy", "steps")
    if strategy == "no":
        return 0
    if strategy == "epoch":
        planned = math.ceil(float(config.get("num_train_epochs", 3.0))) - written
    else:
        save_steps = float(config.get("save_steps") or DEFAULT_SAVE_STEPS)
        max_steps = int(config.get("max_steps") or -1)
        if save_steps < 1:  # a fraction of the run
            planned = int(1 / save_steps) - written
        elif max_steps > 0:
            planned = int(max_steps // save_steps) - written
        else:
            planned = None
    limit = config.get("save_total_limit")
    if limit:  # the Trainer deletes the oldest beyond the limit
        room = max(int(limit) - written, 0)
        return room if planned is None else min(max(planned, 0), room)
    return None if planned is None else max(planned, 0)


def space(config: dict[str, Any], free: int | None, model_bytes: int | None,
          assessment: dict[str, Any]) -> tuple[str | None, str | None]:
    """(finding or None, note or None): does output_dir have room for the checkpoints the run will write?

    free: bytes free there; model_bytes: the size of model_name_or_path's weight files (None: not a local directory);
    assessment: checkpoints.assess of output_dir.
    """
    count = _checkpoints_to_write(config, len(assessment["complete"]))
    if count == 0:
        return None, None
    if count is None:
        return None, ("checkpoint space not judged: with no max_steps and no save_total_limit the number of checkpoints "
                      "is not known")
    if assessment["latest"]:
        each, how = assessment["size"], "measured from %s" % assessment["latest"]
    elif config.get("finetuning_type", "lora") == "full" and model_bytes:
        each = FULL_CHECKPOINT_FACTOR * model_bytes
        how = "estimated: %dx the model's %s of weights for a full fine-tune" % (FULL_CHECKPOINT_FACTOR, _gib(model_bytes))
    else:
        return None, "checkpoint space not judged until a first checkpoint shows its size (%s fine-tuning)" % (
            config.get("finetuning_type", "lora"))
    if free is None:
        return None, "checkpoint space not judged: the free space of %s is not known" % config.get("output_dir")
    need = count * each
    if need > free:
        return ("output_dir %s has %s free, but the %s to come take about %s (each %s, %s)"
                % (config.get("output_dir"), _gib(free), _checkpoints(count), _gib(need), _gib(each), how)), None
    return None, "checkpoint space: %s of %s (%s) fit in %s free" % (_checkpoints(count), _gib(each), how, _gib(free))


def host_memory(config: dict[str, Any], model_bytes: int | None, ranks: dict[str, int],
                available: dict[str, int | None]) -> tuple[list[str], str | None]:
    """(findings, note): would each node's ranks, each loading the model's weights into host memory before they go to
    its GPUs (the Trainer's from_pretrained on every rank), fit in the memory the node has available?

    model_bytes: the size of model_name_or_path's weight files (the load dtype's size: weights are stored as they are
    loaded); ranks: {node: NPROC_PER_NODE}; available: {node: MemAvailable in bytes, None where unread}. Not judged for a
    hub id (no size), under DeepSpeed (ZeRO-3 partitions the weights as they load) or a quantized load."""
    if not model_bytes:
        return [], "host memory at load not judged: the model's weights are no local files (a hub id, or none found)"
    if config.get("deepspeed") or config.get("quantization_bit"):
        return [], "host memory at load not judged: %s" % (
            "DeepSpeed may partition the weights as they load (ZeRO-3)" if config.get("deepspeed") else "the weights load quantized")
    findings, unread = [], sorted(node for node, free in available.items() if free is None)
    for node, free in sorted((n, f) for n, f in available.items() if f is not None):
        need = ranks.get(node, 1) * model_bytes
        if need > free:
            who = "%d ranks each load" % ranks[node] if ranks.get(node, 1) > 1 else "1 rank loads"
            findings.append("%s: %s the model's %s of weights into host memory at once (%s), but MemAvailable is %s: the "
                            "kernel's OOM killer would end the load. Fewer ranks per node (NPROC_PER_NODE), DeepSpeed ZeRO-3 (the "
                            "weights partitioned as they load), or a node with more memory"
                            % (node, who, _gib(model_bytes), _gib(need), _gib(free)))
    return findings, ("host memory at load not judged on %s: MemAvailable unread" % ", ".join(unread)) if unread else None


def restart_notes(config: dict[str, Any], deepspeed: dict[str, Any] | None, shrinks: bool) -> list[str]:
    """What a restart on fewer nodes could not do with the checkpoints of this config's DeepSpeed config (its parsed JSON,
    None where it has none): [warning]. ZeRO-1/2 with round_robin_gradients (LLaMA-Factory's example ZeRO-2 config sets
    it) writes shards that DeepSpeed's universal conversion gets wrong at another world size (measured on the GPU test
    machine: a LoRA resumed on 2 of 3 ranks at the loss of its first steps), so such a restart stops instead; shrinks:
    a restart may go on with fewer nodes (train_min_nodes below the world)."""
    zero = (deepspeed or {}).get("zero_optimization") or {}
    stage = zero.get("stage")
    if not shrinks or str(stage) not in ("1", "2") or zero.get("round_robin_gradients") not in (True, "true"):
        return []
    return ["%s sets round_robin_gradients: a restart on fewer nodes (train_min_nodes) cannot convert its ZeRO-%s checkpoints "
            "to DeepSpeed's universal checkpoint (the conversion does not keep round robin's order of the parameters) and "
            "stops the job instead; set it false" % (config.get("deepspeed"), stage)]


def resume_pinned(config: dict[str, Any], command: str) -> bool:
    """Whether each start and restart of a LLaMA-Factory job adds resume_from_checkpoint=<dir>/<newest complete> to its
    command (the node program, where there is one): the Trainer on its own takes the highest-numbered checkpoint, complete
    or not. Not where the command or the config names one already."""
    return "resume_from_checkpoint" not in command and "resume_from_checkpoint" not in config
