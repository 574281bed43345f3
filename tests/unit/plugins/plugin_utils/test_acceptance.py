# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The acceptance record (plugin_utils/acceptance.py) from recorded facts, burn-ins and ladders: every check a node took,
its figure, its threshold and its result, a failed one marking its node."""

import copy
import json
from pathlib import Path

from ansible_collections.trainops.cluster.plugins.module_utils import gpu
from ansible_collections.trainops.cluster.plugins.plugin_utils import acceptance, burn_in

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
BURN = (FIXTURES / "gpu" / "burn" / "h200x1-burn.json").read_text()
# The GPU machine's H200 under load (healthy), as gpu_facts reads it.
FACTS = gpu.parse_smi_xml((FIXTURES / "gpu" / "h200x1-load" / "nvidia-smi-q.xml").read_text(encoding="utf-8"))
LADDER = json.loads((FIXTURES / "reports" / "train" / "verify.json").read_text())


def slow_burn():
    document = json.loads(BURN)
    document["devices"][0]["gemm"]["tflops"] = 500.0
    return json.dumps(document)


def test_every_check_of_each_node_is_recorded_with_its_threshold_and_result():
    outputs = {"node1": {"rc": 0, "stdout": BURN}, "node2": {"rc": 0, "stdout": BURN}, "node3": {"rc": 0, "stdout": slow_burn()}}
    burned = burn_in.verdict(outputs, {n: FACTS for n in outputs}, 0.1)
    record = acceptance.record(["node1", "node2", "node3"], {n: FACTS for n in outputs}, burned, LADDER, "2026-12-05 14:00:00 UTC")
    assert record["passed"] is False and [record["nodes"][n]["passed"] for n in ("node1", "node2", "node3")] == [True, True, False]
    checks = {c["check"]: c for c in record["nodes"]["node1"]["checks"]}
    assert checks["GPU health"] == {"check": "GPU health", "device": "GPU0", "figure": "no ECC, row remap, clock or link problem",
                                    "threshold": "none (docs/gpu-health.md)", "result": "pass"}
    assert checks["burn-in: GEMM TFLOP/s"] == {
        "check": "burn-in: GEMM TFLOP/s", "device": "GPU0", "figure": "669.5 (68 %)", "result": "pass",
        "threshold": "50 % of 989.0 (the NVIDIA H200's specification) and within 10 % of its model's median"}
    assert checks["burn-in: host->GPU GB/s"]["threshold"].startswith("60 % of 63.0 (PCIe Gen5 x16)")
    assert checks["burn-in: result"]["figure"] == "65ca46eeec16" and checks["burn-in: result"]["result"] == "pass"
    # The ladder's runs the node was part of: the CPU rung of all three, with its figure.
    assert checks["ladder: CPU all-reduce over MPI, all nodes (with node2, node3)"] == {
        "check": "ladder: CPU all-reduce over MPI, all nodes (with node2, node3)", "device": None, "figure": "busbw 0.109 GB/s",
        "threshold": "every rank, 0 wrong values", "result": "pass"}
    assert not [c for c in checks if "one GPU" in c], "a skipped rung is no check of the node"
    ports = checks["ladder: ports between nodes (with node2, node3)"]
    assert (ports["figure"], ports["threshold"], ports["result"]) == ("PASS", "every cluster port open between the nodes", "pass")
    failed = [c for c in record["nodes"]["node3"]["checks"] if c["result"] == "fail"]
    assert [(c["check"], c["figure"]) for c in failed] == [("burn-in: GEMM TFLOP/s", "500.0 (51 %)")]
    assert failed[0]["threshold"].startswith("at least 90 % of the median")
    assert record["rows"][0] == ["node1", "GPU health", "GPU0", "no ECC, row remap, clock or link problem", "none (docs/gpu-health.md)", "pass"]


def test_a_node_without_a_burn_in_or_a_gpu_has_the_ladder_alone():
    record = acceptance.record(["node1"], {"node1": {"gpu_count": 0, "gpus": []}}, {}, LADDER, "now")
    assert record["passed"] is True and [(c["check"], c["result"]) for c in record["nodes"]["node1"]["checks"]] == [
        ("burn-in", "not judged"), ("ladder: ports between nodes (with node2, node3)", "pass"),
        ("ladder: CPU all-reduce over MPI, all nodes (with node2, node3)", "pass")]
    # Nothing judged on a node (no GPU, no burn-in, no ladder): not a pass.
    empty = acceptance.record(["node1"], {}, {}, [], "now")
    assert empty["passed"] is None and empty["nodes"]["node1"]["passed"] is None
    # An unhealthy GPU (a pending row remap, gpu_health's fail) fails its node.
    sick = copy.deepcopy(FACTS)
    sick["gpus"][0]["health"]["remapped_rows"]["pending"] = True
    record = acceptance.record(["node1"], {"node1": sick}, {}, [], "now")
    assert record["passed"] is False and record["nodes"]["node1"]["checks"][0]["check"] == "GPU health: a row remap is pending"


def test_a_figure_with_no_bound_and_no_peers_is_not_judged_and_a_wrong_result_fails_the_result_alone():
    document = json.loads(BURN)
    document["devices"][0]["name"] = "Tesla T4"  # not in the table, and alone
    burned = burn_in.verdict({"node1": {"rc": 0, "stdout": json.dumps(document)}}, {}, 0.1)
    checks = {c["check"]: c for c in acceptance.record(["node1"], {}, burned, [], "now")["nodes"]["node1"]["checks"]}
    assert checks["burn-in: GEMM TFLOP/s"]["result"] == "not judged" and checks["burn-in: host->GPU GB/s"]["result"] == "not judged"
    document = json.loads(BURN)
    document["devices"][0]["gemm"]["repeat_sha256"] = "1" * 64
    burned = burn_in.verdict({"node1": {"rc": 0, "stdout": json.dumps(document)}}, {}, 0.1)
    checks = {c["check"]: c for c in acceptance.record(["node1"], {}, burned, [], "now")["nodes"]["node1"]["checks"]}
    assert (checks["burn-in: result"]["result"], checks["burn-in: GEMM TFLOP/s"]["result"]) == ("fail", "pass")


def test_the_bisections_finding_fails_the_nodes_it_names():
    """The GPU machine's four namespace nodes, the gpu2-gpu3 link slowed: both its nodes fail on the finding and the
    round, gpu1 and gpu4 on the all-nodes run alone."""
    ladder = json.loads((FIXTURES / "gpu" / "h100x1-nodes-bisect" / "verify.json").read_text())
    nodes = ["gpu1", "gpu2", "gpu3", "gpu4"]
    record = acceptance.record(nodes, {}, None, ladder, "2026-12-06")
    failed = {node: [c["check"] for c in record["nodes"][node]["checks"] if c["result"] == "fail"] for node in nodes}
    assert failed["gpu1"] == ["ladder: all nodes (with gpu2, gpu3, gpu4)"]
    assert failed["gpu4"] == ["ladder: all nodes (with gpu1, gpu2, gpu3)"]
    assert failed["gpu2"] == ["ladder: all nodes (with gpu1, gpu3, gpu4)", "ladder: all nodes, bisected (round 1) (with gpu3)",
                              "ladder: all nodes, bisected: found (with gpu3)"]
    found = [c for c in record["nodes"]["gpu3"]["checks"] if c["check"] == "ladder: all nodes, bisected: found (with gpu2)"][0]
    assert found["figure"].startswith("bisected in 1 round: the link between gpu2 and gpu3")
    assert found["threshold"] == "every half and pair of the all-nodes rung at its threshold"
