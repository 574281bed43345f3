# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""DCGM's diagnostic in the acceptance record (plugin_utils/acceptance.py): a row per DCGM test on each node, the
failed one marking its node with DCGM's warning, a node without dcgmi one not judged row."""

from pathlib import Path

from ansible_collections.trainops.cluster.plugins.module_utils import gpu
from ansible_collections.trainops.cluster.plugins.module_utils._dcgm_diag import parse
from ansible_collections.trainops.cluster.plugins.plugin_utils import acceptance, burn_in

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
BURN = {"rc": 0, "stdout": (FIXTURES / "gpu" / "burn" / "h200x1-burn.json").read_text()}
FACTS = gpu.parse_smi_xml((FIXTURES / "gpu" / "h200x1-load" / "nvidia-smi-q.xml").read_text(encoding="utf-8"))
NODES = ["node1", "node2", "node3"]


def ran(name):
    return dict(parse((FIXTURES / "dcgm" / name).read_text()), found=True, ran=True, rc=0, error=None)


def test_each_dcgm_test_is_a_row_and_a_failed_one_fails_its_node():
    dcgm = {"node1": ran("r3-dcgm3-pass.json"), "node2": ran("r2-dcgm4-fail.txt"), "node3": {"found": False, "ran": False}}
    burned = burn_in.verdict({n: BURN for n in NODES}, {n: FACTS for n in NODES}, 0.1, dcgm, 3)
    record = acceptance.record(NODES, {n: FACTS for n in NODES}, burned, [], "2026-12-06 05:00:00 UTC")
    assert [record["nodes"][n]["passed"] for n in NODES] == [True, False, True] and record["passed"] is False
    rows = {c["check"]: c for c in record["nodes"]["node1"]["checks"] if c["check"].startswith("DCGM")}
    assert len(rows) == 16
    assert rows["DCGM diag: Hardware / EUD Test"] == {"check": "DCGM diag: Hardware / EUD Test", "device": "GPU0", "figure": "skip",
                                                      "threshold": "Pass at dcgmi diag -r 3", "result": "not judged"}
    assert rows["DCGM diag: Deployment / Denylist"]["device"] is None and rows["DCGM diag: Deployment / Denylist"]["result"] == "pass"
    failed = [c for c in record["nodes"]["node2"]["checks"] if c["result"] == "fail"]
    assert [(c["check"], c["device"]) for c in failed] == [("DCGM diag: Deployment / software", "GPU0"), ("DCGM diag: Hardware / memory", "GPU1")]
    assert failed[1]["figure"] == ("A memory mismatch was detected on GPU 1, but no error was reported by CUDA or NVML. "
                                   "Run a field diagnostic on the GPU.")
    # The burn-in's own rows are as before: DCGM's findings are not burn-in rows.
    assert not [c for c in record["nodes"]["node2"]["checks"] if c["check"].startswith("burn-in: DCGM")]
    assert [c for c in record["nodes"]["node3"]["checks"] if c["check"].startswith("DCGM")] == [
        {"check": "DCGM diag", "device": None, "figure": "node3: DCGM diag not judged: no dcgmi on node3 (DCGM not installed)",
         "threshold": "Pass at dcgmi diag -r 3", "result": "not judged"}]


def test_a_burn_in_without_dcgm_adds_no_dcgm_row():
    burned = burn_in.verdict({"node1": BURN}, {"node1": FACTS}, 0.1)
    record = acceptance.record(["node1"], {"node1": FACTS}, burned, [], "now")
    assert not [c for c in record["nodes"]["node1"]["checks"] if c["check"].startswith("DCGM")]


def test_a_test_without_every_gpus_result_is_not_passed_and_a_runtime_error_is_a_row():
    """A test that passed on GPU0 and has a status word not known on GPU1 is not a pass: GPU1 is in the row; a node
    whose DCGM stopped with a runtime error after some tests is said not judged, not passed."""
    partial = {"version": "4.2.3", "driver": None, "runtime_error": None, "found": True, "ran": True, "rc": 0, "error": None,
               "tests": [{"category": "Hardware", "name": "memory", "gpus": [0], "status": "pass", "warnings": [], "info": []},
                         {"category": "Hardware", "name": "memory", "gpus": [1], "status": "not run", "warnings": [], "info": []}]}
    stopped = dict(partial, tests=partial["tests"][:1], runtime_error="The diagnostic was interrupted")
    burned = burn_in.verdict({n: BURN for n in NODES[:2]}, {n: FACTS for n in NODES[:2]}, 0.1, {"node1": partial, "node2": stopped}, 2)
    assert burned["dcgm"]["node1"]["verdict"] == "not judged" and burned["dcgm"]["node2"]["verdict"] == "not judged"
    record = acceptance.record(NODES[:2], {n: FACTS for n in NODES[:2]}, burned, [], "2026-12-06 05:00:00 UTC")
    rows = [c for c in record["nodes"]["node1"]["checks"] if c["check"].startswith("DCGM")]
    assert rows[0] == {"check": "DCGM diag: Hardware / memory", "device": "GPU1", "figure": "not run",
                       "threshold": "Pass at dcgmi diag -r 2", "result": "not judged"}
    said = [c for c in record["nodes"]["node2"]["checks"] if c["check"] == "DCGM diag"]
    assert [(c["figure"], c["result"]) for c in said] == [
        ("node2: DCGM diag: DCGM's runtime error: The diagnostic was interrupted", "not judged")]
