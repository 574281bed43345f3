# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""DCGM's diagnostic judged (plugin_utils/dcgm_diag.py) from the module's results on the recorded outputs
(tests/fixtures/dcgm): the real level 3 passes with its skipped test not judged, the DCGM 4.x document fails naming the
node, the GPU, the test and DCGM's warning, and a node without dcgmi or a diagnostic is never a pass."""

from pathlib import Path

from ansible_collections.trainops.cluster.plugins.module_utils._dcgm_diag import parse
from ansible_collections.trainops.cluster.plugins.plugin_utils import dcgm_diag

DCGM = Path(__file__).resolve().parents[3] / "fixtures" / "dcgm"
PERSISTENCE = ('Persistence Mode: Persistence mode for GPU 0 is disabled. Enable persistence mode by running "nvidia-smi -i <gpuId> '
               '-pm 1 " as root.')
FACTS = {"gpu_count": 2, "gpus": [{"index": 0, "pci_bus_id": "00000000:19:00.0"}, {"index": 1, "pci_bus_id": "00000000:3B:00.0"}]}


def ran(name, rc=0):
    """The module's result on a recorded output."""
    return dict(parse((DCGM / name).read_text()), found=True, ran=True, level=3, rc=rc, error=None)


def test_the_real_level3_passes_and_its_skipped_eud_test_is_not_judged():
    judged = dcgm_diag.judge("node1", ran("r3-dcgm3-pass.json"), 3)
    assert judged["verdict"] == "pass" and judged["findings"] == []
    assert judged["not_judged"] == ["node1 GPU0: DCGM diag Hardware / EUD Test skip, not judged"]
    assert dcgm_diag.summary(judged) == "node1: DCGM diag -r 3: pass (15 pass, 1 skip)"


def test_the_dcgm4_document_fails_naming_the_node_gpu_test_and_warning():
    judged = dcgm_diag.judge("node2", ran("r2-dcgm4-fail.txt", rc=226), 2, FACTS)
    assert judged["verdict"] == "fail" and judged["not_judged"] == []
    software, memory = judged["findings"]
    assert software == {"node": "node2", "device": "GPU0", "gpu": 0, "bus": "00000000:19:00.0", "status": "fail",
                        "what": "DCGM diag: Deployment / software", "figure": PERSISTENCE,
                        "threshold": "Pass at dcgmi diag -r 2 (DCGM 4.2.3)",
                        "fix": "Fix the setting DCGM names on the node (its warning says how), then run the burn-in again"}
    assert (memory["device"], memory["bus"], memory["what"]) == ("GPU1", "00000000:3B:00.0", "DCGM diag: Hardware / memory")
    assert memory["figure"] == ("A memory mismatch was detected on GPU 1, but no error was reported by CUDA or NVML. "
                                "Run a field diagnostic on the GPU.")
    assert memory["fix"].startswith("Drain the node and ask the provider to replace the GPU")
    assert dcgm_diag.summary(judged) == "node2: DCGM diag -r 2 (DCGM 4.2.3, driver 570.148.08): fail (2 fail, 6 pass)"


def test_a_warning_warns_and_a_test_of_the_whole_node_names_no_gpu():
    result = {"found": True, "ran": True, "tests": [
        {"category": "Deployment", "name": "Persistence Mode", "gpus": None, "status": "warn", "warnings": ["off"], "info": []},
        {"category": "Hardware", "name": "GPU Memory", "gpus": [0], "status": "pass", "warnings": [], "info": []}]}
    judged = dcgm_diag.judge("node1", result, 1)
    assert judged["verdict"] == "warn"
    assert [(f["device"], f["gpu"], f["status"], f["figure"]) for f in judged["findings"]] == [(None, None, "warn", "off")]
    assert judged["findings"][0]["fix"].startswith("A warning, not a failure. Fix the setting")


def test_no_dcgmi_no_diagnostic_check_mode_and_all_skipped_are_not_judged():
    nothing = {"found": False, "ran": False, "level": 1}
    assert dcgm_diag.judge("node1", nothing, 1)["not_judged"] == ["node1: DCGM diag not judged: no dcgmi on node1 (DCGM not installed)"]
    assert dcgm_diag.judge("node1", nothing, 1)["verdict"] == "not judged"
    error = {"found": True, "ran": True, "rc": 255,
             "error": "no DCGM diagnostic in dcgmi's output: Error: Unable to establish a connection to the specified host: localhost"}
    assert dcgm_diag.judge("node1", error, 1)["not_judged"] == [
        "node1: DCGM diag not judged: no DCGM diagnostic in dcgmi's output: Error: Unable to establish a connection to the "
        "specified host: localhost (nv-hostengine is not running there: start it, systemctl start nvidia-dcgm)"]
    assert dcgm_diag.judge("node1", {"found": True, "ran": False}, 1)["not_judged"] == ["node1: DCGM diag not judged: not run (check mode)"]
    skipped = {"found": True, "ran": True, "tests": [
        {"category": "Hardware", "name": "EUD Test", "gpus": [0], "status": "skip", "warnings": [], "info": []}]}
    assert dcgm_diag.judge("node1", skipped, 3)["verdict"] == "not judged"
    stopped = dict(ran("r2-dcgm3-pass.json"), runtime_error="The diagnostic was stopped")
    assert dcgm_diag.judge("node1", stopped, 2)["verdict"] == "not judged"


def test_every_node_judged_a_node_without_gpus_left_out_and_a_level_0_said_once():
    results = {"node1": ran("r3-dcgm3-pass.json"), "node2": ran("r2-dcgm4-fail.txt"), "cpu1": {"skipped": True},
               "node3": None}
    facts = {"node1": FACTS, "node2": FACTS, "node3": FACTS, "cpu1": {"gpu_count": 0, "gpus": []}}
    judged = dcgm_diag.judge_all(results, 3, facts)
    assert sorted(judged["nodes"]) == ["node1", "node2", "node3"]
    assert [f["node"] for f in judged["findings"]] == ["node2", "node2"]
    assert judged["not_judged"] == ["node1 GPU0: DCGM diag Hardware / EUD Test skip, not judged",
                                    "node3: DCGM diag not judged: not run on node3"]
    assert dcgm_diag.judge_all(results, 0, facts) == {
        "nodes": {}, "findings": [], "not_judged": ["DCGM diag not run: burn_in_dcgm_level is 0"], "lines": []}
