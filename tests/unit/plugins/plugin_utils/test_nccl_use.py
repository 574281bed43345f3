# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The network a running job's NCCL chose, against each node's RDMA ports (plugin_utils/nccl_use.py), from the NCCL
logs of tests/fixtures/nccl_tests (README.md there: socket_with_ib_debug.txt is the H200 machine's real NCCL_DEBUG=INFO
log made a 2-node run whose containers see no HCA; mpirun_2x8_tagged.txt a 2x8 run over mlx5_0-7), summed up as each
node's runner sums up its ranks' lines (trainops_job/tee.nccl_summary), and status (jobs.status) saying it."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from ansible_collections.trainops.cluster.plugins.plugin_utils import jobs, nccl_use

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT / "roles" / "train" / "files"))
sys.dont_write_bytecode = True
from trainops_job import tee  # noqa: E402  pylint: disable=wrong-import-position

NCCL_LOGS = ROOT / "tests" / "fixtures" / "nccl_tests"
HCA = [{"device": "mlx5_0", "port": 1, "link_layer": "InfiniBand", "rate_gbps": 400.0}]


def node_summary(log: str, node: str) -> dict:
    """What `node`'s runner keeps of its ranks' lines: the mpirun tags off (a job's ranks print under torchrun)."""
    lines = [re.sub(r"^\[\d+,\d+\]<stdout>:", "", line) for line in (NCCL_LOGS / log).read_text().splitlines()]
    return tee.nccl_summary([line for line in lines if line.startswith(node + ":")])


def test_sockets_between_nodes_despite_an_active_hca_are_named_with_the_fix():
    nccl = node_summary("socket_with_ib_debug.txt", "node2")
    assert nccl["transports"] == ["NET/Socket", "P2P/CUMEM"] and nccl["ib_no_device"] is True and nccl["networks"] == ["Socket"]
    assert nccl_use.socket_despite_rdma("node2", nccl, HCA) == (
        "node2: the job's NCCL sends between nodes over NET/Socket (eth0, eth1) although the node has active RDMA ports "
        "(mlx5_0:1 InfiniBand 400 Gb/s): every byte goes through TCP, the slow path; NCCL said 'NET/IB : No device found': "
        "its process sees no RDMA device (pass /dev/infiniband into the image, and install rdma-core with libibverbs in it)")
    # Sockets on a node with no RDMA port are the only way: nothing to say.
    assert nccl_use.socket_despite_rdma("node2", nccl, []) is None
    assert nccl_use.said(nccl) == "NET/Socket (eth0, eth1), P2P/CUMEM"


def test_nccl_over_infiniband_is_no_finding():
    nccl = node_summary("mpirun_2x8_tagged.txt", "node1")
    assert "NET/IB" in nccl["transports"] and "NET/Socket" not in nccl["transports"], nccl
    assert nccl_use.socket_despite_rdma("node1", nccl, HCA) is None
    assert nccl_use.said(nccl).startswith("NET/IB (mlx5_0:1/IB, mlx5_1:1/IB")


def test_without_connection_lines_the_chosen_network_decides():
    # NCCL_DEBUG_SUBSYS without INIT's connection lines: "Using network Socket" across 2 nodes is enough; on one node
    # NCCL chooses a network it does not use.
    only = {"transports": [], "networks": ["Socket"], "nnodes": 2, "ib_no_device": False}
    assert nccl_use.socket_despite_rdma("node1", only, HCA).endswith(
        "check NCCL_IB_DISABLE, NCCL_IB_HCA and NCCL_NET in the job's environment, and the net plugin it loads")
    assert nccl_use.socket_despite_rdma("node1", dict(only, nnodes=1), HCA) is None
    assert nccl_use.said(only) == "network Socket" and nccl_use.said(None) is None


def test_status_says_it_beside_the_running_job():
    nccl = node_summary("socket_with_ib_debug.txt", "node2")
    reports = {n: {"node": n, "run_id": "r1", "now": 100.0, "running": True, "state": "running", "log": [],
                   "progress": {"step": 5, "step_at": 99.0, "points": [], "nccl": nccl}, "rdma_ports": HCA if n == "node2" else []}
               for n in ("node1", "node2")}
    reports["node1"].update(job={"run_id": "r1", "events": []}, supervisor={})
    status = jobs.status(["node1", "node2"], reports, {"node1": "10.0.0.1", "node2": "10.0.0.2"})
    assert [f.split(":")[0] for f in status["findings"]] == ["node2"], status["findings"]
    assert status["nodes"]["node1"]["nccl"] == "NET/Socket (eth0, eth1), P2P/CUMEM"


def test_a_real_jobs_log_through_the_runner_on_the_gpu_machine():
    """The job runner's node log on the GPU machine (tests/fixtures/nccl_tests/README.md: two DDP ranks on its H100 as
    two hosts, NCCL_DEBUG=INFO): what tee kept of it, and status's words for it."""
    lines = (NCCL_LOGS / "job_h100x1_two_hosts.log").read_text().splitlines()
    nccl = tee.nccl_summary([line for line in lines if "NCCL " in line])
    assert (nccl["nccl_version"], nccl["networks"], nccl["transports"], nccl["ib_no_device"], nccl["nnodes"]) == (
        "2.28.9", ["Socket"], ["NET/Socket"], True, 2), nccl
    assert nccl_use.said(nccl) == "NET/Socket (eth0)" and nccl_use.socket_despite_rdma("vm", nccl, []) is None
    assert nccl_use.socket_despite_rdma("vm", nccl, HCA).startswith("vm: the job's NCCL sends between nodes over NET/Socket (eth0)")
