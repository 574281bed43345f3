# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Which checkpoint a job resumes from: the newest complete one; an incomplete one is named, not loaded.

Two layouts: train_ddp.py's single files (``step-000030.pt``; a save in progress is ``step-000030.pt.tmp``, renamed when
done) and the Hugging Face Trainer's directories that LLaMA-Factory writes (``checkpoint-30/``). The Trainer itself
resumes from the highest-numbered directory whatever it holds (transformers' get_last_checkpoint), so a save that a
dying rank left half-written is loaded and fails, or silently loses that rank's state.

Node side: the job runner (roles/train/files/trainops_job links this file) judges the checkpoints a restart resumes
from; the controller judges a start's and what collect copies. Standard library only.
"""

from __future__ import annotations

import os
import re
from typing import Any

_DDP_RE = re.compile(r"^step-(\d+)\.pt(\.tmp)?$")
# The Trainer's checkpoint directories and weight files: collect.py finds a finished output_dir by them too.
HF_CHECKPOINT_RE = re.compile(r"^checkpoint-(\d+)$")
# What the Trainer writes into checkpoint-N, in this order: the weights (rank 0), the optimizer (rank 0, or every
# rank's shard under DeepSpeed), every rank's RNG state, then trainer_state.json (rank 0). The state file comes last.
WEIGHT_FILES = ("adapter_model.safetensors", "adapter_model.bin", "model.safetensors", "pytorch_model.bin",
                "model.safetensors.index.json", "pytorch_model.bin.index.json")
WEIGHT_SHARD_RE = re.compile(r"^(?:model|pytorch_model)-(\d+)-of-(\d+)\.(?:safetensors|bin)$")
_ZERO_RE = re.compile(r"^(?:bf16_)?zero_pp_rank_(\d+)_mp_rank_\d+_optim_states\.pt$")
# DeepSpeed's files in global_stepN/: every data-parallel rank's optimizer shard (ZeRO), per model-parallel rank; under
# ZeRO-3 every rank's model shard too (zero_pp_rank_D_mp_rank_M_model_states.pt), else mp_rank_M_model_states.pt.
_ZERO_SHARD_RE = re.compile(r"^(?:bf16_)?zero_pp_rank_(\d+)_mp_rank_(\d+)_optim_states\.pt$")
_ZERO3_MODEL_RE = re.compile(r"^zero_pp_rank_\d+_mp_rank_\d+_model_states\.pt$")
# DeepSpeed's universal checkpoint (ds_to_universal's output beside the step's folder): loadable at any size.
_UNIVERSAL_RE = re.compile(r"^global_step\d+_universal$")
# torch.distributed.checkpoint (DCP, FSDP's sharded state): its .metadata and the ranks' .distcp files, reshardable.
_DCP_RE = re.compile(r"\.distcp$")


def _hf_problems(files: list[str], world_size: int) -> list[str]:
    """What a checkpoint-N directory lacks: [reason]. files: its paths, relative to it."""
    names = {path.rsplit("/", 1)[-1] for path in files}
    top = {path for path in files if "/" not in path}
    problems = []
    if "trainer_state.json" not in top:
        problems.append("no trainer_state.json (the Trainer writes it last: the save did not finish)")
    if not top & set(WEIGHT_FILES) and not any(WEIGHT_SHARD_RE.match(name) for name in top):
        problems.append("no model weights")
    shards = [WEIGHT_SHARD_RE.match(name) for name in top]
    totals = {int(match.group(2)) for match in shards if match}
    for total in totals:
        missing = sorted(set(range(1, total + 1)) - {int(m.group(1)) for m in shards if m and int(m.group(2)) == total})
        if missing:
            problems.append("weight shard %s of %d missing" % (", ".join(str(i) for i in missing), total))
    zero = {int(match.group(1)) for match in (_ZERO_RE.match(name) for name in names) if match}
    if zero:  # DeepSpeed: every rank writes its own optimizer shard under global_stepN/
        missing = sorted(set(range(world_size)) - zero)
        if missing:
            problems.append("the optimizer shard of rank %s missing" % ", ".join(str(r) for r in missing))
    elif "optimizer.pt" not in top:
        problems.append("no optimizer.pt")
    if world_size > 1:
        missing = [rank for rank in range(world_size) if "rng_state_%d.pth" % rank not in top]
        if missing:
            problems.append("rng_state of rank %s missing" % ", ".join(str(r) for r in missing))
    return problems


def listing(root: str, depth: int = 3) -> list[dict[str, Any]]:
    """[{path, size, mtime}] of the files under root (paths relative to it), as find lists a checkpoint directory."""
    found = []
    for folder, dirs, files in os.walk(root):
        relative = os.path.relpath(folder, root)
        if relative.count(os.sep) + 1 >= depth:
            dirs[:] = []
        for name in files:
            path = os.path.join(folder, name)
            try:
                seen = os.stat(path)
                found.append({"path": os.path.normpath(os.path.join(relative, name)), "size": seen.st_size, "mtime": seen.st_mtime})
            except OSError:
                continue  # removed meanwhile (save_total_limit)
    return found


def saves(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each checkpoint's save as its files tell it (listing's entries, with their mtime): [{name, step, bytes, first,
    last}], oldest first; first and last are the earliest and latest of its files' writes (a single-file save has one
    write: first == last, its time not measured)."""
    found: dict[str, dict[str, Any]] = {}
    for entry in entries:
        head = entry["path"].partition("/")[0]
        match = _DDP_RE.match(head) or HF_CHECKPOINT_RE.match(head)
        if not match or entry.get("mtime") is None:
            continue
        name = head[:-4] if head.endswith(".tmp") else head
        save = found.setdefault(name, {"name": name, "step": int(match.group(1)), "bytes": 0, "first": entry["mtime"], "last": entry["mtime"]})
        save.update(bytes=save["bytes"] + entry["size"], first=min(save["first"], entry["mtime"]), last=max(save["last"], entry["mtime"]))
    return sorted(found.values(), key=lambda save: save["step"])


def assess(entries: list[dict[str, Any]], world_size: int | list[int]) -> dict[str, Any]:
    """The checkpoints in one directory, judged.

    entries: [{path, size}] of the files under the checkpoint directory, paths relative to it (as find lists them);
    world_size: the job's ranks (NNODES x NPROC_PER_NODE), or those of each start of the job, the first start's first (a
    restart on fewer nodes writes fewer ranks' files: whole for its own size; the reasons said are the first size's).
    Returns {latest: name or None, step, size (bytes of the latest), complete: [names], incomplete: {name: [reason]}}.
    """
    sizes = [world_size] if isinstance(world_size, int) else list(world_size)
    ddp: dict[int, list[dict[str, Any]]] = {}
    hf: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for entry in entries:
        head, dummy, rest = entry["path"].partition("/")
        match = _DDP_RE.match(head)
        if match and not rest:
            ddp.setdefault(int(match.group(1)), []).append(entry)
        match = HF_CHECKPOINT_RE.match(head)
        if match and rest:
            hf.setdefault((int(match.group(1)), head), []).append(dict(entry, path=rest))
    found: dict[str, tuple[int, int, list[str]]] = {}  # name: (step, size, problems)
    for step, files in ddp.items():
        final = [f for f in files if not f["path"].endswith(".tmp")]
        name = "step-%06d.pt" % step
        if final:
            found[name] = (step, final[0]["size"], [])
        else:
            found[name + ".tmp"] = (step, 0, ["a save that did not finish (only %s.tmp)" % name])
    for (step, name), files in hf.items():
        paths = [f["path"] for f in files]
        problems = _hf_problems(paths, sizes[0])
        found[name] = (step, sum(f["size"] for f in files), [] if any(not _hf_problems(paths, n) for n in sizes[1:]) else problems)
    complete = sorted((n for n, (s, dummy, p) in found.items() if not p), key=lambda n: found[n][0])
    latest = complete[-1] if complete else None
    # Only a checkpoint newer than the one resumed from is a loss worth naming; older broken ones are history.
    newest_step = found[latest][0] if latest else -1
    incomplete = {n: p for n, (s, dummy, p) in found.items() if p and s > newest_step}
    return {"latest": latest, "step": found[latest][0] if latest else None, "size": found[latest][1] if latest else None,
            "complete": complete, "incomplete": incomplete}


def layout(entries: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """How checkpoint `name` (assess's latest: a file or a directory of the listing) was written, for a restart at
    another world size: {format, zero_stage, data_parallel, model_parallel, universal}.

    format: "file" (one file every rank loads: train_ddp.py's), "dcp" (torch.distributed.checkpoint's shards, resharded
    at load), "deepspeed" (ZeRO shards of data_parallel ranks for each of model_parallel ranks; zero_stage 3 where the
    model is sharded too, else "1/2"; universal: ds_to_universal's folder beside it), "trainer" (the Trainer's DDP
    checkpoint: the whole model and optimizer, any size)."""
    if not any(e["path"].startswith(name + "/") for e in entries):
        return {"format": "file", "zero_stage": None, "data_parallel": None, "model_parallel": None, "universal": False}
    files = [e["path"][len(name) + 1:] for e in entries if e["path"].startswith(name + "/")]
    names = [path.rsplit("/", 1)[-1] for path in files]
    shards = [m for m in (_ZERO_SHARD_RE.match(n) for n in names) if m]
    if shards:
        return {"format": "deepspeed", "zero_stage": 3 if any(_ZERO3_MODEL_RE.match(n) for n in names) else "1/2",
                "data_parallel": len({m.group(1) for m in shards}), "model_parallel": len({m.group(2) for m in shards}),
                "universal": any(_UNIVERSAL_RE.match(part) for path in files for part in path.split("/")[:-1])}
    out_format = "dcp" if any(_DCP_RE.search(n) for n in names) and ".metadata" in names else "trainer"
    return {"format": out_format, "zero_stage": None, "data_parallel": None, "model_parallel": None, "universal": False}


def unfit(shape: dict[str, Any], name: str, world: int) -> str | None:
    """Why `world` ranks cannot load the checkpoint `name` laid out as `shape` (layout's), or None where they can:
    DeepSpeed's ZeRO shards load only at the data-parallel size that wrote them, unless converted to its universal
    checkpoint; a single file, DCP's shards and the Trainer's DDP checkpoint load at any size."""
    if shape["format"] != "deepspeed" or shape["universal"]:
        return None
    mp = shape["model_parallel"] or 1
    if world % mp == 0 and world // mp == shape["data_parallel"]:
        return None
    return ("%s holds DeepSpeed ZeRO-%s shards of %d data-parallel ranks; %d ranks (%s data-parallel) cannot load them: convert it "
            "with DeepSpeed's ds_to_universal and load it with load_universal, or restart on as many nodes as wrote it"
            % (name, shape["zero_stage"], shape["data_parallel"], world, world // mp if world % mp == 0 else "%d/%d" % (world, mp)))


def messages(assessment: dict[str, Any], directory: str) -> list[str]:
    """What a start says about its checkpoints: [line]."""
    lines = ["%s/%s is incomplete (%s): not loaded" % (directory, name, "; ".join(reasons))
             for name, reasons in sorted(assessment["incomplete"].items())]
    if assessment["latest"]:
        lines.append("resuming from %s/%s (step %d)" % (directory, assessment["latest"], assessment["step"]))
    return lines
