# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""GPU parsers against the real 2xH200 recordings and the derived variants (tests/fixtures/gpu/variants)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.trainops.cluster.plugins.module_utils import gpu

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "gpu"
REAL = FIXTURES / "h200x2"
VARIANTS = FIXTURES / "variants"

H200_UUIDS = ["GPU-35dbb3dd-bc6a-8d24-264e-1c22176352a8", "GPU-770f1196-7717-9f80-ebed-29835fa1d4f0"]
FACT_KEYS = {"available", "reason", "driver_version", "cuda_version", "gpu_count", "gpu_models", "gpus", "nvlink", "pcie",
             "topology", "kernel_module", "xid_errors", "xid_reason", "errors"}
GPU_KEYS = {"index", "minor_number", "name", "uuid", "pci_bus_id", "memory_total_mib", "compute_capability", "ecc_mode", "mig_mode",
            "persistence_mode", "pcie", "nvlink", "health"}


def read(name, variant=None):
    """A recording from a variant directory, falling back to the real one like nvidia-smi-replay does."""
    path = VARIANTS / variant / name if variant else REAL / name
    if variant and not path.exists():
        path = REAL / name
    return path.read_text(encoding="utf-8")


def gather_variant(variant=None, kernel_log=None):
    return gpu.gather(
        smi_xml=read("nvidia-smi-q.xml", variant),
        query_csv=read("query-gpu.csv", variant),
        topo=read("topo.txt", variant),
        nvlink=read("nvlink-s.txt", variant),
        proc_version=read("proc-driver-version.txt", variant),
        kernel_log=kernel_log,
    )


# --- real 2xH200 recordings ------------------------------------------------------------------------

def test_smi_xml_real():
    smi = gpu.parse_smi_xml(read("nvidia-smi-q.xml"))
    assert smi["driver_version"] == "580.159.04"
    assert smi["cuda_version"] == "13.0"
    assert smi["gpu_count"] == 2
    health = smi["gpus"][0].pop("health")  # its fields: test_gpu_health.py
    assert health["ecc"]["volatile"]["dram_uncorrectable"] == 0 and health["sm_clock_max_mhz"] == 1980
    assert smi["gpus"][0] == {
        "index": 0,
        "minor_number": 0,
        "name": "NVIDIA H200",
        "uuid": H200_UUIDS[0],
        "pci_bus_id": "00000000:00:06.0",
        "memory_total_mib": 143771,
        "compute_capability": None,  # 580's XML has no compute capability; the CSV supplies it
        "ecc_mode": "Enabled",
        "mig_mode": "Disabled",
        "persistence_mode": "Enabled",
        "pcie": {"max_gen": 5, "max_width": 16, "current_gen": 5, "current_width": 16},
    }
    assert [g["pci_bus_id"] for g in smi["gpus"]] == ["00000000:00:06.0", "00000000:00:07.0"]
    # Slurm's gres.conf names each GPU by its device file, /dev/nvidia<minor_number>.
    assert [g["minor_number"] for g in smi["gpus"]] == [0, 1]


def test_query_csv_real_drops_units_from_header():
    rows = gpu.parse_query_csv(read("query-gpu.csv"))
    assert len(rows) == 2
    assert rows[1] == {
        "index": "1", "name": "NVIDIA H200", "uuid": H200_UUIDS[1], "driver_version": "580.159.04",
        "memory.total": "143771 MiB", "pci.bus_id": "00000000:00:07.0", "compute_cap": "9.0",
        "persistence_mode": "Enabled", "ecc.mode.current": "Enabled",
    }


def test_query_csv_error_text():
    # Old drivers reject compute_cap; the module reports the failure, but junk text must not break the merge.
    assert gpu.parse_query_csv('Field "compute_cap" is not a valid field to query.') == []
    assert gpu.parse_query_csv("index\n" + "x" * 200000) == []  # beyond csv's field size limit: csv.Error
    assert gpu.parse_query_csv(None) == []


def test_query_fields_match_the_recorded_command():
    header = read("query-gpu.csv").splitlines()[0]
    assert [name.split(" [")[0] for name in header.split(", ")] == list(gpu.QUERY_GPU_FIELDS)


def test_topo_real_strips_ansi_and_aligns_affinity():
    topo = gpu.parse_topo(read("topo.txt"))
    assert topo["matrix"] == {"GPU0": {"GPU1": "NV18"}, "GPU1": {"GPU0": "NV18"}}
    # Rows carry an extra tab before "GPU NUMA ID" that the header lacks; N/A must still land there.
    assert topo["gpus"] == [
        {"name": "GPU0", "index": 0, "cpu_affinity": "0-31", "numa_affinity": "0", "gpu_numa_id": None},
        {"name": "GPU1", "index": 1, "cpu_affinity": "0-31", "numa_affinity": "0", "gpu_numa_id": None},
    ]
    assert topo["nics"] == []


def test_nvlink_real_18_links_at_26_562():
    links = gpu.parse_nvlink_status(read("nvlink-s.txt"))
    assert [(entry["index"], entry["uuid"]) for entry in links] == [(0, H200_UUIDS[0]), (1, H200_UUIDS[1])]
    for entry in links:
        assert entry["name"] == "NVIDIA H200"
        assert entry["links_active"] == 18
        assert entry["links_inactive"] == 0
        assert entry["link_speed_gbps"] == 26.562
        assert entry["bandwidth_gbps"] == pytest.approx(478.116)
    assert gpu.summarize_nvlink(links) == {"links_per_gpu": 18, "link_speed_gbps": 26.562,
                                           "bandwidth_gbps_per_gpu": pytest.approx(478.116)}


def test_proc_driver_version_real_is_open_module():
    assert gpu.parse_proc_driver_version(read("proc-driver-version.txt")) == {
        "version": "580.159.04", "type": "open", "description": "NVIDIA UNIX Open Kernel Module for x86_64"}


def test_gather_real_node():
    facts = gather_variant()
    assert set(facts) == FACT_KEYS
    assert facts["available"] is True
    assert facts["reason"] is None
    assert facts["driver_version"] == "580.159.04"
    assert facts["cuda_version"] == "13.0"
    assert facts["gpu_count"] == 2
    assert facts["gpu_models"] == ["NVIDIA H200"]
    assert [set(g) for g in facts["gpus"]] == [GPU_KEYS, GPU_KEYS]
    assert [g["compute_capability"] for g in facts["gpus"]] == ["9.0", "9.0"]  # merged from the CSV
    assert [g["uuid"] for g in facts["gpus"]] == H200_UUIDS
    assert facts["gpus"][1]["nvlink"] == {"links_active": 18, "links_inactive": 0, "link_speed_gbps": 26.562,
                                          "bandwidth_gbps": pytest.approx(478.116), "errors": None}
    assert facts["nvlink"]["links_per_gpu"] == 18
    assert facts["nvlink"]["link_speed_gbps"] == 26.562
    assert round(facts["nvlink"]["bandwidth_gbps_per_gpu"], 1) == 478.1
    assert facts["topology"]["matrix"]["GPU0"]["GPU1"] == "NV18"
    assert facts["kernel_module"]["type"] == "open"
    assert facts["xid_errors"] is None
    assert facts["xid_reason"] == "kernel log not read"
    assert facts["errors"] == []


# --- variants -------------------------------------------------------------------------------------

def test_h100x8_nvlink_and_nics():
    facts = gather_variant("h100x8")
    assert facts["gpu_count"] == 8
    assert facts["gpu_models"] == ["NVIDIA H100 80GB HBM3"]
    assert [g["index"] for g in facts["gpus"]] == list(range(8))
    assert [g["pci_bus_id"] for g in facts["gpus"]][:2] == ["00000000:18:00.0", "00000000:2A:00.0"]
    assert {g["memory_total_mib"] for g in facts["gpus"]} == {81559}
    assert facts["nvlink"] == {"links_per_gpu": 18, "link_speed_gbps": 26.562,
                               "bandwidth_gbps_per_gpu": pytest.approx(478.116)}
    topo = facts["topology"]
    assert topo["nics"] == [{"name": "NIC%d" % i, "device": "mlx5_%d" % i} for i in range(8)]
    assert topo["matrix"]["GPU0"] == dict({"GPU%d" % i: "NV18" for i in range(1, 8)}, NIC0="PIX", NIC1="NODE",
                                          NIC2="NODE", NIC3="NODE", NIC4="SYS", NIC5="SYS", NIC6="SYS", NIC7="SYS")
    assert topo["matrix"]["NIC5"]["GPU5"] == "PIX"
    assert topo["matrix"]["NIC5"]["NIC4"] == "NODE"
    assert "NIC5" not in topo["matrix"]["NIC5"]
    assert topo["gpus"][7] == {"name": "GPU7", "index": 7, "cpu_affinity": "56-111,168-223", "numa_affinity": "1",
                               "gpu_numa_id": None}
    assert facts["kernel_module"]["type"] == "proprietary"
    assert facts["kernel_module"]["version"] == "580.159.04"


def test_h100x8_index_is_order_not_minor_number():
    smi = gpu.parse_smi_xml(read("nvidia-smi-q.xml", "h100x8"))
    # minor numbers in this fixture are 2,3,0,1,...: the index must still follow nvidia-smi's order.
    assert [g["index"] for g in smi["gpus"]] == list(range(8))
    assert smi["gpus"][0]["pci_bus_id"] == "00000000:18:00.0"


def test_pcie_node_has_no_nvlink():
    facts = gather_variant("l40sx4-pcie")
    assert facts["available"] is True
    assert facts["gpu_count"] == 4
    assert facts["gpu_models"] == ["NVIDIA L40S"]
    assert facts["nvlink"] is None
    assert all(g["nvlink"] is None for g in facts["gpus"])
    assert [g["compute_capability"] for g in facts["gpus"]] == ["8.9"] * 4
    assert [g["mig_mode"] for g in facts["gpus"]] == [None] * 4  # "N/A" in the XML
    assert [g["persistence_mode"] for g in facts["gpus"]] == ["Disabled"] * 4
    matrix = facts["topology"]["matrix"]
    assert (matrix["GPU0"]["GPU1"], matrix["GPU2"]["GPU3"], matrix["GPU0"]["GPU3"]) == ("PIX", "PHB", "SYS")
    assert [g["numa_affinity"] for g in facts["topology"]["gpus"]] == ["0", "0", "1", "1"]


def test_one_gpu_with_all_links_inactive():
    facts = gather_variant("h200x2-nvlink-down")
    assert facts["gpus"][0]["nvlink"]["links_active"] == 18
    assert facts["gpus"][1]["nvlink"] == {"links_active": 0, "links_inactive": 18, "link_speed_gbps": None,
                                          "bandwidth_gbps": 0, "errors": None}
    # NVLink is present but degraded: the node summary reports the weakest GPU, not None.
    assert facts["nvlink"] == {"links_per_gpu": 0, "link_speed_gbps": 26.562, "bandwidth_gbps_per_gpu": 0}
    assert facts["topology"]["matrix"]["GPU0"]["GPU1"] == "PHB"


def test_partially_inactive_links():
    text = ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-a)\n"
            "\t Link 0: 26.562 GB/s\n\t Link 1: <inactive>\n\t Link 2: 26.562 GB/s\n"
            "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-b)\n"
            "\t Link 0: 26.562 GB/s\n\t Link 1: 26.562 GB/s\n\t Link 2: 26.562 GB/s\n")
    links = gpu.parse_nvlink_status(text)
    assert [(e["links_active"], e["links_inactive"]) for e in links] == [(2, 1), (3, 0)]
    assert gpu.summarize_nvlink(links) == {"links_per_gpu": 2, "link_speed_gbps": 26.562,
                                           "bandwidth_gbps_per_gpu": pytest.approx(53.124)}


def test_nvlink_all_inactive_message_and_header_only():
    text = ("GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-a)\n"
            "NVML: Unable to retrieve NVLink information as all links are inActive\n"
            "GPU 1: NVIDIA A100-SXM4-80GB (UUID: GPU-b)\n")
    links = gpu.parse_nvlink_status(text)
    assert links[0]["links_inactive"] is None and links[0]["links_active"] == 0
    assert links[1]["links_inactive"] == 0
    assert gpu.summarize_nvlink(links)["links_per_gpu"] == 0
    # GPU headers without any link lines: a PCIe GPU, no NVLink at all.
    assert gpu.summarize_nvlink(gpu.parse_nvlink_status("GPU 0: NVIDIA L40S (UUID: GPU-c)\n")) is None
    assert gpu.parse_nvlink_status("") == []


def test_mig_enabled_gpu():
    facts = gather_variant("h200x2-mig")
    assert [g["mig_mode"] for g in facts["gpus"]] == ["Enabled", "Disabled"]
    # The MIG instances carry their own fb_memory_usage; the GPU total must not be taken from them.
    assert [g["memory_total_mib"] for g in facts["gpus"]] == [143771, 143771]
    assert facts["gpu_count"] == 2


def test_topo_pasted_with_spaces_and_old_nic_names():
    text = ("        GPU0    GPU1    mlx5_0  CPU Affinity    NUMA Affinity\n"
            "GPU0     X      NV4     PXB     0-15            0\n"
            "GPU1    NV4      X      SYS     16-31           1\n"
            "mlx5_0  PXB     SYS      X\n")
    topo = gpu.parse_topo(text)
    assert topo["matrix"]["GPU1"] == {"GPU0": "NV4", "mlx5_0": "SYS"}
    assert topo["matrix"]["mlx5_0"] == {"GPU0": "PXB", "GPU1": "SYS"}
    assert topo["nics"] == [{"name": "mlx5_0", "device": "mlx5_0"}]
    assert topo["gpus"][1]["cpu_affinity"] == "16-31"
    assert topo["gpus"][1]["gpu_numa_id"] is None


# --- kernel log and driver version ----------------------------------------------------------------

def test_xid_from_dmesg():
    events = gpu.parse_xid((VARIANTS / "kernel-log" / "dmesg-xid.txt").read_text())
    assert [(e["pci"], e["xid"]) for e in events] == [
        ("0000:00:06", 13), ("0000:00:06", 13), ("0000:00:07", 31), ("0000:00:07", 48), ("0000:00:07", 79)]
    assert events[-1]["message"] == "pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
    assert events[0]["message"].endswith("Graphics SM Warp Exception on (GPC 1, TPC 3, SM 0): Out Of Range Address")


def test_xid_from_journalctl_and_gpu_mapping():
    facts = gather_variant(kernel_log=(VARIANTS / "kernel-log" / "journalctl-xid.txt").read_text())
    assert facts["xid_reason"] is None
    assert [(e["xid"], e["gpu_index"]) for e in facts["xid_errors"]] == [(94, 0), (119, None)]
    assert facts["xid_errors"][1]["pci"] == "0000:3b:00"


def test_xid_without_pid_and_clean_log():
    assert gpu.parse_xid("NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus.") == [
        {"pci": "0000:01:00", "xid": 79, "message": "GPU has fallen off the bus."}]
    assert gpu.parse_xid("[1.0] eth0: link up\n[2.0] NVRM: GPU 0000:00:07.0: GPU has fallen off the bus.\n") == []
    facts = gather_variant(kernel_log="[1.0] eth0: link up\n")
    assert facts["xid_errors"] == []  # read and clean, unlike None (unread)


@pytest.mark.parametrize("text, expected", [
    ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.129.03  Thu Oct 19 18:56:32 UTC 2023\n",
     {"version": "535.129.03", "type": "proprietary", "description": "NVIDIA UNIX x86_64 Kernel Module"}),
    ("NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  570.124.06  Release Build  (dvs-builder@U16)\n",
     {"version": "570.124.06", "type": "open", "description": "NVIDIA UNIX Open Kernel Module for aarch64"}),
    ("", None),
    ("garbage\n", None),
])
def test_proc_driver_version_variants(text, expected):
    assert gpu.parse_proc_driver_version(text) == expected


# --- missing and broken tools ---------------------------------------------------------------------

def test_no_driver_at_all():
    facts = gpu.gather()
    assert set(facts) == FACT_KEYS
    assert facts["available"] is False
    assert facts["gpu_count"] == 0
    assert facts["gpus"] == [] and facts["gpu_models"] == []
    assert facts["nvlink"] is None and facts["topology"] is None and facts["kernel_module"] is None
    assert facts["reason"] == "nvidia-smi not found; /proc/driver/nvidia/version absent (no NVIDIA kernel module loaded)"


def test_smi_failed_but_kernel_module_loaded():
    facts = gpu.gather(proc_version=read("proc-driver-version.txt"), smi_reason="nvidia-smi -q -x timed out after 20 s",
                       kernel_log="", kernel_log_reason=None)
    assert facts["available"] is False
    assert facts["gpu_count"] == 0
    assert facts["driver_version"] == "580.159.04"
    assert facts["reason"] == "nvidia-smi -q -x timed out after 20 s; NVIDIA kernel module 580.159.04 is loaded"
    assert facts["xid_errors"] == []


def test_garbage_xml_and_no_gpus():
    facts = gpu.gather(smi_xml=read("nvidia-smi-q.xml", "no-driver"))
    assert facts["available"] is False
    assert facts["reason"].startswith("nvidia-smi -q -x output is not XML")
    empty = gpu.gather(smi_xml="<nvidia_smi_log><driver_version>580.159.04</driver_version>"
                               "<attached_gpus>0</attached_gpus></nvidia_smi_log>")
    assert (empty["available"], empty["gpu_count"], empty["driver_version"]) == (False, 0, "580.159.04")
    assert empty["reason"] == "nvidia-smi -q -x lists no GPUs"
    with pytest.raises(ValueError):
        gpu.parse_smi_xml("NVIDIA-SMI has failed")


def test_secondary_commands_missing():
    facts = gpu.gather(smi_xml=read("nvidia-smi-q.xml"), errors=["nvidia-smi nvlink -s timed out after 20 s"],
                       kernel_log_reason="dmesg not found; journalctl not found")
    assert facts["available"] is True
    assert facts["gpu_count"] == 2
    assert [g["compute_capability"] for g in facts["gpus"]] == [None, None]
    assert facts["nvlink"] is None and facts["topology"] is None
    assert facts["errors"] == ["nvidia-smi nvlink -s timed out after 20 s"]
    assert facts["xid_errors"] is None
    assert facts["xid_reason"] == "dmesg not found; journalctl not found"


def test_pcie_link_of_the_real_node():
    """The recorded XML's pci_gpu_link_info (Gen5 x16 on both GPUs) gives the node's PCIe link, which the ladder reads."""
    facts = gather_variant()
    assert [g["pcie"] for g in facts["gpus"]] == [{"max_gen": 5, "max_width": 16, "current_gen": 5, "current_width": 16}] * 2
    assert facts["pcie"] == {"gen": 5, "width": 16}


def test_pcie_summary_is_the_slowest_gpus_maximum():
    # An idle GPU's current generation drops (Gen1 here): the maximum is what a collective gets.
    idle = {"max_gen": 5, "max_width": 16, "current_gen": 1, "current_width": 16}
    narrow = {"max_gen": 5, "max_width": 8, "current_gen": 5, "current_width": 8}
    assert gpu.summarize_pcie([{"pcie": idle}, {"pcie": narrow}]) == {"gen": 5, "width": 8}
    assert gpu.summarize_pcie([{"pcie": idle}, {"pcie": None}]) is None
    assert gpu.summarize_pcie([]) is None
    assert gpu.gather(smi_xml=None)["pcie"] is None


def test_nvlink_error_counters_are_read_per_gpu_and_link():
    # The public GB300 capture: one link, every counter 0, no UUID printed.
    public = (FIXTURES / "health" / "gb300-nvlink-e-srt-slurm-pr307.txt").read_text()
    assert gpu.parse_nvlink_errors(public) == {0: {"uuid": None, "replay": 0, "recovery": 0, "crc": 0, "links": []}}
    assert gpu.parse_nvlink_errors("") == {} and gpu.parse_nvlink_errors(None) == {}
    facts = gpu.gather(smi_xml=read("nvidia-smi-q.xml"), nvlink=read("nvlink-s.txt"),
                       nvlink_errors=read("nvlink-e.txt", "h200x2-nvlink-errors"))
    assert [g["nvlink"]["errors"] for g in facts["gpus"]] == [
        {"replay": 0, "recovery": 0, "crc": 0, "links": []}, {"replay": 41, "recovery": 2, "crc": 187, "links": [3]}]
    # Not read (the command failed, or the driver printed nothing): null, not zero.
    assert [g["nvlink"]["errors"] for g in gpu.gather(smi_xml=read("nvidia-smi-q.xml"), nvlink=read("nvlink-s.txt"))["gpus"]] == [None, None]
