# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
from pathlib import Path

from ansible_collections.trainops.cluster.plugins.module_utils import gpu
from ansible_collections.trainops.cluster.plugins.plugin_utils.drift_keys import values_for

H200 = Path(__file__).parents[3] / "fixtures" / "gpu" / "h200x2"


def read(name):
    return (H200 / name).read_text()


def h200_gpu_facts():
    return gpu.gather(smi_xml=read("nvidia-smi-q.xml"), query_csv=read("query-gpu.csv"), topo=read("topo.txt"),
                      nvlink=read("nvlink-s.txt"), proc_version=read("proc-driver-version.txt"))


COMM = {
    "nccl": {"sources": [{"source": "system", "version": "2.28.3", "path_or_package": "/usr/lib/libnccl.so.2.28.3"},
                         {"source": "pip", "version": "2.28.9", "path_or_package": "nvidia-nccl-cu13"},
                         {"source": "torch", "version": "2.28.9", "path_or_package": "x"}]},
    "torch": {"version": "2.11.0+cu130", "cuda": "13.0", "nccl": "2.28.9", "device_count": 2},
    "python": {"version": "3.12.3"}, "mpi": {"implementation": "Open MPI", "version": "4.1.6"},
    "nccl_tests": {"present": False}, "net_plugins": ["/usr/lib/libnccl-net.so"],
    "infiniband": [{"device": "mlx5_0", "port": 1, "state": "ACTIVE", "rate_gbps": 400.0}],
    "nccl_socket_ifname": "eth1", "shm": {"human": "256G"}, "memlock": {"soft": "unlimited"},
    "ip_local_port_range": [50000, 51999], "kernel": "6.8.0", "os": "Ubuntu 24.04.3 LTS",
}


def test_real_h200_node():
    values = values_for(h200_gpu_facts(), COMM, {"image": "sha256:abc"})
    assert values["driver"] == "580.159.04"
    assert values["cuda (driver)"] == "13.0"
    assert values["gpus"] == "2x NVIDIA H200"
    assert values["nvlink"] == "18 x 26.562 GB/s"
    assert (values["nccl (system)"], values["nccl (pip)"], values["nccl (torch)"]) == ("2.28.3", "2.28.9", "2.28.9")
    assert values["mpi"] == "Open MPI 4.1.6"
    assert values["net plugins"] == ["libnccl-net.so"]
    assert values["ib ports"] == ["mlx5_0:1 ACTIVE 400.0G"]
    assert values["port range"] == "50000-51999"
    assert list(values)[-1] == "image"


def test_node_without_gpu_or_facts():
    no_gpu = values_for(gpu.gather(smi_reason="nvidia-smi not found"), {})
    assert no_gpu["gpus"] == "0" and no_gpu["driver"] is None and no_gpu["net plugins"] == []
    unknown = values_for(None, None)
    assert unknown["gpus"] is None and unknown["torch"] is None
