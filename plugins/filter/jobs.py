# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters of the training jobs (playbooks/train.yml); documentation lives in the <filter name>.yml files next to this one."""

from __future__ import annotations

import base64
import json

from ansible_collections.trainops.cluster.plugins.module_utils import _checkpoints as checkpoints
from ansible_collections.trainops.cluster.plugins.module_utils.meminfo import available as meminfo_available
from ansible_collections.trainops.cluster.plugins.module_utils.torchrun import read_env_b64
from ansible_collections.trainops.cluster.plugins.plugin_utils import job_stage, jobs, llamafactory


def train_preflight(nodes, launch_env_b64, master, matrix, listeners, writes, seen, jobs_dir, master_node=None):
    return jobs.preflight(list(nodes), dict(launch_env_b64), str(master), dict(matrix or {}), dict(listeners), dict(writes),
                          list(seen), str(jobs_dir), master_node)


def _json(text):
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None  # not one JSON object (an older program's output, say): read as no report


def train_status(nodes, reports, addresses, queue=None, unreachable=None, ladder=None):
    return jobs.status(list(nodes), {node: _json(text) for node, text in dict(reports).items()}, dict(addresses),
                       dict(queue) if queue else None, list(unreachable or []), _json(ladder) if isinstance(ladder, str) else ladder)


def llamafactory_resume(config, command):
    return llamafactory.resume_pinned(dict(config), str(command))


def llamafactory_batch(config):
    return llamafactory.samples_per_rank(dict(config or {}))


def train_stage_refused(paths, folder, shared, on_controller=None):
    return job_stage.refused(list(paths or []), str(folder), str(shared), [str(p) for p in on_controller or []])


def train_stage_sources(paths, shared, folder):
    return job_stage.sources(list(paths or []), str(shared), str(folder))


def train_staged(outputs):
    return job_stage.said({node: _json(text) for node, text in dict(outputs).items()})


def llamafactory_stage(config, paths, folder):
    return llamafactory.stage_overrides(dict(config or {}), list(paths or []), str(folder))


def llamafactory_paths(config):
    return llamafactory.node_paths(dict(config))


def llamafactory_findings(config, shared_dir, stats, names):
    present = {node: {r["item"]: bool(r.get("stat", {}).get("exists")) for r in (result or {}).get("results", [])}
               for node, result in dict(stats).items()}
    return llamafactory.findings(dict(config), str(shared_dir), present, list(names))


def _ranks(env_b64):
    """A node's ranks: NPROC_PER_NODE of its launch environment (slurp's base64), 1 where unset or unread."""
    return int(read_env_b64(env_b64).get("NPROC_PER_NODE") or 1) if env_b64 else 1


def _model_bytes(model_files):
    """The size of the model's weight files as find registered them; None where none was found (a hub id: skipped)."""
    return sum(int(f.get("size", 0)) for f in (model_files or {}).get("files", [])) or None


def train_checkpoints(found, root, launch_env_b64):
    root = str(root).rstrip("/") + "/"
    entries = [{"path": f["path"][len(root):], "size": int(f.get("size", 0))}
               for f in (found or {}).get("files", []) if f["path"].startswith(root)]
    world = sum(_ranks(text) for text in dict(launch_env_b64).values() if text)
    assessment = checkpoints.assess(entries, world)
    return dict(assessment, dir=root.rstrip("/"), world=world, messages=checkpoints.messages(assessment, root.rstrip("/")))


def llamafactory_space(config, mounts, model_files, assessment):
    finding, note = llamafactory.space(dict(config), llamafactory.free_bytes(list(mounts), str(config.get("output_dir", ""))),
                                       _model_bytes(model_files), dict(assessment))
    return {"findings": [finding] if finding else [], "notes": [note] if note else []}


def llamafactory_restart_notes(config, deepspeed_b64, shrinks):
    """The config's DeepSpeed config as M(ansible.builtin.slurp) read it (skipped: no DeepSpeed config), judged."""
    content = (deepspeed_b64 or {}).get("content")
    try:
        deepspeed = json.loads(base64.b64decode(content).decode("utf-8")) if content else None
    except ValueError:
        deepspeed = None  # the Trainer's own load names a broken file; nothing to warn about here
    return llamafactory.restart_notes(dict(config), deepspeed if isinstance(deepspeed, dict) else None, bool(shrinks))


def llamafactory_memory(config, model_files, launch_env_b64, meminfo):
    ranks = {node: _ranks(text) for node, text in dict(launch_env_b64).items()}
    available = {node: meminfo_available(base64.b64decode((result or {}).get("content") or "").decode("utf-8", "replace"))
                 for node, result in dict(meminfo).items()}
    findings, note = llamafactory.host_memory(dict(config), _model_bytes(model_files), ranks, available)
    return {"findings": findings, "notes": [note] if note else []}


class FilterModule:
    def filters(self):
        return {"train_preflight": train_preflight, "train_status": train_status, "llamafactory_paths": llamafactory_paths,
                "llamafactory_batch": llamafactory_batch, "llamafactory_resume": llamafactory_resume,
                "llamafactory_findings": llamafactory_findings, "train_checkpoints": train_checkpoints,
                "llamafactory_space": llamafactory_space, "llamafactory_memory": llamafactory_memory,
                "llamafactory_restart_notes": llamafactory_restart_notes,
                "llamafactory_stage": llamafactory_stage, "train_staged": train_staged,
                "train_stage_refused": train_stage_refused, "train_stage_sources": train_stage_sources}
