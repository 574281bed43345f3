# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""torch's own NCCL is the pip package among the facts' sources, not the system's library."""

import json

from ansible_collections.trainops.cluster.plugins.filter.torchrun import torchrun_allreduce_verdict
from ansible_collections.trainops.cluster.plugins.module_utils import torchrun

SOURCES = [{"source": "system", "version": "2.28.3", "path_or_package": "/usr/lib/x86_64-linux-gnu/libnccl.so.2.28.3"},
           {"source": "pip", "version": "2.28.9", "path_or_package": "nvidia-nccl-cu13"}]


def result(node, nccl):
    line = "[default0]:TRAINOPS " + json.dumps({
        "event": "result", "rank": 0, "local_rank": 0, "world_size": 1, "node_rank": 0, "host": node, "backend": "nccl",
        "nccl": nccl, "sum_ok": True, "wrong": 0, "bytes": 4096, "seconds": 0.01, "algbw_gbps": 1.0, "busbw_gbps": 1.0,
        "rendezvous_s": 1.0, "interface": "eth1"})
    return {"rc": 0, "timed_out": False, "stopped": None, "seconds": 2.0, "output": line, "parsed": torchrun.parse_output(line),
            "launch": {"NNODES": "1", "NODE_RANK": "0", "NPROC_PER_NODE": "1", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"},
            "probe": {"address": "10.0.0.1", "port": 29500, "ok": True, "error": None, "seconds": 0.1},
            "cleanup": {"found": [], "killed": [], "left": []}, "nccl_debug": None}


def test_the_pip_package_is_what_torch_was_built_for():
    args = (["gpu1"], {"gpu1": 1}, {"gpu1": 1}, "10.0.0.1:29500")
    assert torchrun_allreduce_verdict({"gpu1": result("gpu1", "2.28.9")}, *args, nccl_sources={"gpu1": SOURCES})["passed"]
    failed = torchrun_allreduce_verdict({"gpu1": result("gpu1", "2.28.3")}, *args, nccl_sources={"gpu1": SOURCES})
    assert failed["reasons"] == ["gpu1's ranks loaded NCCL 2.28.3, but torch's own NCCL there is 2.28.9: another libnccl.so.2 "
                                 "won at run time (LD_LIBRARY_PATH)"]
    assert torchrun_allreduce_verdict({"gpu1": result("gpu1", "2.28.3")}, *args)["passed"]
