# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The pre-flight's host memory filter on what the tasks register: find's weight files on the first node, every node's
launch environment and /proc/meminfo as slurp returns them (base64)."""

import base64
from pathlib import Path

from ansible_collections.trainops.cluster.plugins.filter import jobs

MEMINFO = (Path(__file__).resolve().parents[3] / "fixtures" / "meminfo" / "debian12-24gib.txt").read_bytes()


def slurped(data: bytes) -> dict:
    return {"content": base64.b64encode(data).decode(), "encoding": "base64"}


def test_the_node_whose_ranks_would_exhaust_its_memory_is_named_from_the_registered_results():
    # 2 TiB of weights (the suite's sparse file): one rank a node is more than the 24 GiB machine has.
    found = {"files": [{"path": "/mnt/shared/models/tiny/model.safetensors", "size": 2 * 2 ** 40}]}
    envs = {"node1": slurped(b"NNODES=2\nNPROC_PER_NODE=1\n")["content"], "node2": slurped(b"NPROC_PER_NODE=4\n")["content"]}
    memory = jobs.llamafactory_memory({"model_name_or_path": "/mnt/shared/models/tiny"}, found, envs,
                                      {"node1": slurped(MEMINFO), "node2": {"skipped": True}})
    assert [f.split(":")[0] for f in memory["findings"]] == ["node1"]
    assert memory["findings"][0].startswith("node1: 1 rank loads the model's 2048.0 GiB of weights into host memory at once")
    assert memory["notes"] == ["host memory at load not judged on node2: MemAvailable unread"]
    # A hub id: find was skipped, nothing measured.
    assert jobs.llamafactory_memory({"model_name_or_path": "Qwen/Qwen2-7B"}, {"skipped": True}, envs, {})["findings"] == []
