# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The burn-in's judge (plugin_utils/burn_in.py) on the GPU machine's recorded H200 and on variants of it: a GPU slower
than its peers, one below its model's bound, a wrong result, a node without a result, CPU nodes."""

import copy
import json
from pathlib import Path

from ansible_collections.trainops.cluster.plugins.plugin_utils import burn_in

BURN = Path(__file__).parents[3] / "fixtures" / "gpu" / "burn"
# The GPU machine's H200 as trainops_burn.py reported it (tests/fixtures/gpu/burn/SOURCES.md): 669.5 TFLOP/s, 4268.2 GB/s
# device copy, 55.5 and 55.4 GB/s pinned copies.
RECORDED = json.loads((BURN / "h200x1-burn.json").read_text())
DEVICE = RECORDED["devices"][0]
# gpu_facts of H200s on PCIe Gen5 x16.
FACTS = {"gpus": [{"index": i, "name": DEVICE["name"], "pci_bus_id": "00000000:%02X:00.0" % (0x19 + i),
                   "pcie": {"max_gen": 5, "max_width": 16, "current_gen": 5, "current_width": 16}} for i in range(2)]}


def node(*changes):
    """A node of two of the recorded GPU, each changed by a function of its device."""
    document = copy.deepcopy(RECORDED)
    document["devices"] = []
    for index, change in enumerate(changes):
        device = dict(copy.deepcopy(DEVICE), index=index)
        change(device)
        document["devices"].append(device)
    return {"rc": 0, "stdout": json.dumps(document), "stderr": ""}


def same(device):
    return device


def slower(share):
    def change(device):
        device["gemm"]["tflops"] = round(device["gemm"]["tflops"] * share, 1)
    return change


def judge(outputs, fraction=0.1):
    return burn_in.verdict(outputs, {n: FACTS for n in outputs}, fraction)


def test_the_recorded_h200_passes_and_says_its_share_of_the_specification():
    found = judge({"node1": node(same, same), "node2": node(same, same)})
    assert found["passed"] is True and found["findings"] == [], found["text"]
    row = found["rows"][0]
    assert row["share"]["gemm"] == 0.677 and row["share"]["memory"] == 0.889, row
    assert row["pcie"] == (63.0, "PCIe Gen5 x16") and row["bus"] == "00000000:00:06.0"
    assert found["text"].splitlines()[1] == ("  node1 GPU0 NVIDIA H200: GEMM 669.5 TFLOP/s (68 %), memory 4268.2 GB/s (89 %), "
                                             "host->GPU 55.5 GB/s (88 %), GPU->host 55.4 GB/s (88 %)")


def test_a_gpu_slower_than_its_peers_is_named_though_above_its_bound():
    found = judge({"node1": node(same, same), "node2": node(same, slower(0.8))})
    assert found["passed"] is False and len(found["findings"]) == 1, found["text"]
    finding = found["findings"][0]
    assert (finding["node"], finding["gpu"], finding["what"]) == ("node2", 1, "GEMM below its peers'"), finding
    assert finding["figure"] == "535.6 TFLOP/s (80 % of the median 669.5 of 4 NVIDIA H200)", finding
    assert finding["threshold"] == "at least 90 % of the median (burn_in_outlier_fraction 0.1)"
    # 20 % is within a fraction of 0.25.
    assert judge({"node1": node(same, same), "node2": node(same, slower(0.8))}, 0.25)["passed"] is True


def test_every_gpu_below_its_models_bound_is_named():
    found = judge({"node1": node(slower(0.6), slower(0.6))})
    assert [(f["gpu"], f["what"]) for f in found["findings"]] == [(0, "GEMM below its bound"), (1, "GEMM below its bound")]
    assert found["findings"][0]["threshold"] == "50 % of the NVIDIA H200's specification", found["findings"][0]


def test_a_wrong_result_is_named_silent_corruption():
    def wrong(device):
        device["gemm"]["sha256"] = device["gemm"]["repeat_sha256"] = "0" * 64

    def flaky(device):
        device["gemm"]["repeat_sha256"] = "1" * 64
    found = judge({"node1": node(same, same), "node2": node(wrong, flaky)})
    named = {(f["node"], f["gpu"], f["what"]) for f in found["findings"]}
    assert named == {("node2", 0, "GEMM result differs from its peers'"), ("node2", 1, "GEMM result changed when repeated")}, found["text"]
    assert "computes wrong results" in found["findings"][0]["fix"]
    # Two GPUs, two results: no majority, both named.
    tie = judge({"node1": node(same, wrong)})
    assert len(tie["findings"]) == 2 and "none is the most common" in tie["findings"][0]["threshold"]


def test_a_node_without_a_result_and_a_failed_gpu_are_named():
    def failed(device):
        device["error"] = "RuntimeError: CUDA error: an illegal memory access was encountered"
        device["gemm"] = device["memory"] = device["h2d"] = device["d2h"] = None
    outputs = {"node1": node(same, failed), "node2": {"rc": 124, "stdout": "", "stderr": "Error: no such image\n"}}
    found = judge(outputs)
    assert [(f["node"], f["what"]) for f in found["findings"]] == [("node2", "no result"), ("node1", "the burn-in failed on it")]
    assert found["findings"][0]["figure"] == "node2: the burn-in printed no result (exit 124): Error: no such image"
    # No node ran it (no GPUs, burn_in_cpu off): not judged, not passed.
    skipped = judge({"node1": {"skipped": True}})
    assert skipped["passed"] is None and skipped["text"] == "burn-in: not judged (no result)"


def test_cpu_nodes_are_compared_with_each_other_only():
    def cpu(gflops):
        document = {"program": "trainops_burn", "version": 1, "kind": "cpu", "devices": [
            {"index": 0, "name": "cpu", "bus_id": None, "error": None, "h2d": None, "d2h": None, "memory": {"mib": 256, "gbps": 6.0},
             "gemm": {"dtype": "float32", "size": 1024, "tflops": gflops / 1000.0, "sha256": "a" * 64, "repeat_sha256": "a" * 64}}]}
        return {"rc": 0, "stdout": json.dumps(document)}
    found = burn_in.verdict({"node1": cpu(40), "node2": cpu(41), "node3": cpu(12)}, {}, 0.1)
    assert [(f["node"], f["device"], f["what"]) for f in found["findings"]] == [("node3", "cpu", "GEMM below its peers'")], found["text"]
    assert found["text"].splitlines()[3] == "  node3 cpu: GEMM 0.012 TFLOP/s, memory 6.0 GB/s" and "its CPU quota" in found["findings"][0]["fix"]
    assert "node1 cpu: GEMM not judged against a specification (a model not in the table)" in found["not_judged"]
    alone = judge({"node1": {"rc": 0, "stdout": json.dumps(dict(RECORDED, devices=[DEVICE]))}})
    assert alone["passed"] is True and "node1: the only NVIDIA H200, not compared with peers" in alone["not_judged"]


def test_the_specification_table_matches_the_specific_names_first():
    assert burn_in.spec_of("NVIDIA H100 PCIe") == (756.0, 2000.0) and burn_in.spec_of("NVIDIA H100 80GB HBM3") == (989.0, 3350.0)
    assert burn_in.spec_of("NVIDIA L40S") == (362.0, 864.0) and burn_in.spec_of("NVIDIA L4") == (121.0, 300.0)
    assert burn_in.spec_of("NVIDIA H200") == (989.0, 4800.0) and burn_in.spec_of("Tesla T4") is None
    assert burn_in.pcie_gbps({"max_gen": 4, "max_width": 16}) == (31.5, "PCIe Gen4 x16") and burn_in.pcie_gbps({}) is None


def test_the_recorded_cpu_run_is_read_and_judged():
    recorded = (BURN / "cpu-burn.json").read_text()
    found = burn_in.verdict({"node1": {"rc": 0, "stdout": recorded}, "node2": {"rc": 0, "stdout": recorded}}, {}, 0.1)
    assert found["passed"] is True and [row["gemm"] for row in found["rows"]] == [0.0061, 0.0061], found["text"]
    assert found["text"].splitlines()[1] == "  node1 cpu: GEMM 0.0061 TFLOP/s, memory 54.2 GB/s"


def test_two_recorded_runs_on_the_same_gpu_agree():
    # The same GPU burned twice in a row (device-burn): the same product to the bit, figures within 1 %.
    outputs = {name: {"rc": 0, "stdout": (BURN / name).read_text()} for name in ("h200x1-burn.json", "h200x1-burn-repeat.json")}
    found = burn_in.verdict(outputs, {}, 0.01)
    assert found["passed"] is True and len({row["sha256"] for row in found["rows"]}) == 1, found["text"]


def test_gpus_that_torch_does_not_see_are_named_and_a_node_without_a_result_fails_alone():
    # nvidia-smi lists 8 GPUs, the image's torch saw 2 (or ran on the CPU: no GPU options on the container).
    found = burn_in.verdict({"node1": node(same, same)}, {"node1": dict(FACTS, gpu_count=8)}, 0.1)
    assert found["passed"] is False and found["findings"][0]["what"] == "GPUs unseen by torch", found["text"]
    assert found["findings"][0]["figure"] == "2 of 8 GPUs (torch 2.11.0+cu130, CUDA 13.0)"
    cpu = json.loads((BURN / "cpu-burn.json").read_text())
    assert burn_in.verdict({"node1": {"rc": 0, "stdout": json.dumps(cpu)}}, {"node1": {"gpu_count": 1}}, 0.1)["passed"] is False
    # One node, no result: a failure, not "not judged".
    alone = burn_in.verdict({"node1": {"rc": 124, "stdout": "", "stderr": "killed\n"}}, {}, 0.1)
    assert alone["passed"] is False and alone["text"].startswith("burn-in: FAIL")
    # CPUs' products are compared with their own repeat only: their BLAS differs by CPU.
    other = dict(cpu, devices=[dict(cpu["devices"][0], gemm=dict(cpu["devices"][0]["gemm"], sha256="b" * 64, repeat_sha256="b" * 64))])
    outputs = {"node1": {"rc": 0, "stdout": json.dumps(cpu)}, "node2": {"rc": 0, "stdout": json.dumps(other)}}
    assert burn_in.verdict(outputs, {}, 0.1)["passed"] is True
    assert burn_in.spec_of("NVIDIA L40") == (181.0, 864.0) and burn_in.spec_of("NVIDIA GH200 480GB") == (989.0, 4000.0)


H100 = json.loads((BURN / "h100x1-burn-clocks.json").read_text())


def h100(*changes):
    """A node of the recorded H100 with its clocks under load (SOURCES.md), each GPU changed by a function of its device."""
    document = copy.deepcopy(H100)
    document["devices"] = []
    for index, change in enumerate(changes):
        device = dict(copy.deepcopy(H100["devices"][0]), index=index)
        change(device)
        document["devices"].append(device)
    return {"rc": 0, "stdout": json.dumps(document), "stderr": ""}


def braked(device):
    """A GPU held by a power brake: its clocks halved and more, the product with them."""
    device["clocks"].update(sm_mhz=645.0, reasons={"0x4": 0.2, "0x80": 0.9})
    device["gemm"]["tflops"] = 330.0


def test_the_clocks_under_load_are_read_and_held_to_the_maximum_and_the_hardware():
    found = judge({"node1": h100(same, same)})
    assert found["passed"] is True, found["text"]
    row = found["rows"][0]
    assert (row["clocks"], row["sm_max"], row["clock_reasons"], row["temp_c"]) == (1339.2, 1980, {"sw_power_cap": 1.0}, 56)
    assert row["share"]["clocks"] == 0.676 and found["text"].splitlines()[1].endswith(", SM clock under load 1339.2 MHz (68 %)")
    slow = judge({"node1": h100(same, braked)})
    named = {(f["gpu"], f["what"]) for f in slow["findings"]}
    assert {(1, "SM clock under load below its bound"), (1, burn_in.HELD), (1, "GEMM below its peers'")} <= named, slow["text"]
    held = next(f for f in slow["findings"] if f["what"] == burn_in.HELD)
    assert held["figure"] == "645.0 MHz; HW Power Brake Slowdown 90 % of the looks" and "56 C under load" in held["fix"]


def test_a_gpu_whose_clocks_could_not_be_read_is_said_not_judged():
    def no_nvml(device):
        device["clocks"] = {"error": "no NVML: libnvidia-ml.so.1: cannot open shared object file"}
    found = judge({"node1": h100(no_nvml)})
    assert found["passed"] is True and found["rows"][0]["clocks"] is None
    assert "node1 GPU0: clocks under load not read (no NVML: libnvidia-ml.so.1: cannot open shared object file)" in found["not_judged"]


def test_the_burn_sums_up_its_looks_at_a_gpus_clocks(monkeypatch):
    """trainops_burn.clocks_of (the program imports torch, absent here: a stand-in module lets it load)."""
    import importlib.util
    import sys
    import types
    monkeypatch.setitem(sys.modules, "torch", types.ModuleType("torch"))
    spec = importlib.util.spec_from_file_location("trainops_burn", Path(__file__).parents[4] / "roles" / "burn_in" / "files" / "trainops_burn.py")
    program = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(program)
    looks = [{"sm_mhz": 1335, "sm_max_mhz": 1980, "power_w": 690.0, "temp_c": 55, "reasons": 0x4},
             {"sm_mhz": 1005, "sm_max_mhz": 1980, "power_w": 650.5, "temp_c": 61, "reasons": 0x44},
             {"sm_mhz": None, "sm_max_mhz": None, "power_w": None, "temp_c": None, "reasons": None}]
    assert program.clocks_of(looks) == {"looks": 3, "sm_mhz": 1170.0, "sm_max_mhz": 1980, "power_w": 670.2, "temp_c": 61,
                                        "reasons": {"0x4": 0.67, "0x40": 0.33}}
    assert program.clocks_of([])["sm_mhz"] is None
