# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The burn-in's verdict with DCGM's diagnostic (plugin_utils/burn_in.py, dcgm and dcgm_level): the GPU machine's
recorded H200 burn-in beside the recorded dcgmi outputs (tests/fixtures/dcgm). A DCGM failure is a finding that fails the
burn-in; a warning fails nothing; DCGM's absence neither passes nor fails it."""

from pathlib import Path

from ansible_collections.trainops.cluster.plugins.module_utils import gpu
from ansible_collections.trainops.cluster.plugins.module_utils._dcgm_diag import parse
from ansible_collections.trainops.cluster.plugins.plugin_utils import burn_in

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
BURN = {"rc": 0, "stdout": (FIXTURES / "gpu" / "burn" / "h200x1-burn.json").read_text()}
# The GPU machine's H200, as gpu_facts reads it.
FACTS = gpu.parse_smi_xml((FIXTURES / "gpu" / "h200x1-load" / "nvidia-smi-q.xml").read_text(encoding="utf-8"))


def ran(name):
    return dict(parse((FIXTURES / "dcgm" / name).read_text()), found=True, ran=True, rc=0, error=None)


def verdict(dcgm, level=2):
    return burn_in.verdict({"node1": BURN, "node2": BURN}, {"node1": FACTS, "node2": FACTS}, 0.1, dcgm, level)


def test_a_dcgm_failure_is_a_finding_that_fails_the_burn_in():
    found = verdict({"node1": ran("r2-dcgm3-pass.json"), "node2": ran("r2-dcgm4-fail.txt")})
    assert found["passed"] is False
    assert [(f["node"], f["device"], f["what"]) for f in found["findings"]] == [
        ("node2", "GPU0", "DCGM diag: Deployment / software"), ("node2", "GPU1", "DCGM diag: Hardware / memory")]
    lines = found["text"].splitlines()
    assert lines[0] == "burn-in: FAIL"
    assert lines[3:5] == ["  node1: DCGM diag -r 2: pass (11 pass)",
                          "  node2: DCGM diag -r 2 (DCGM 4.2.3, driver 570.148.08): fail (2 fail, 6 pass)"]
    assert lines[5] == ('  FAIL node2 GPU0: DCGM diag: Deployment / software: Persistence Mode: Persistence mode for GPU 0 is '
                        'disabled. Enable persistence mode by running "nvidia-smi -i <gpuId> -pm 1 " as root. (threshold: Pass at '
                        'dcgmi diag -r 2 (DCGM 4.2.3)). Fix the setting DCGM names on the node (its warning says how), then run '
                        'the burn-in again')
    assert found["dcgm"]["node2"]["verdict"] == "fail" and found["dcgm"]["node1"]["verdict"] == "pass"


def test_a_dcgm_pass_leaves_the_burn_in_as_the_gemm_part_says():
    found = verdict({"node1": ran("r3-dcgm3-pass.json"), "node2": ran("r2-dcgm3-pass.json")}, 3)
    assert found["passed"] is True and found["findings"] == []
    assert "node1 GPU0: DCGM diag Hardware / EUD Test skip, not judged" in found["not_judged"]


def test_dcgm_absent_neither_passes_nor_fails_the_run():
    absent = {"node1": {"found": False, "ran": False, "level": 1}, "node2": {"found": False, "ran": False, "level": 1}}
    found = verdict(absent, 1)
    assert found["passed"] is True and found["findings"] == []
    assert found["not_judged"][-2:] == ["node1: DCGM diag not judged: no dcgmi on node1 (DCGM not installed)",
                                        "node2: DCGM diag not judged: no dcgmi on node2 (DCGM not installed)"]
    # Without a GEMM result DCGM's pass passes nothing: no node ran the burn-in.
    alone = burn_in.verdict({"node1": {"skipped": True}}, {"node1": FACTS}, 0.1, {"node1": ran("r2-dcgm3-pass.json")}, 2)
    assert alone["passed"] is None and alone["dcgm"]["node1"]["verdict"] == "pass"
    # Level 0: said once, nothing judged.
    off = verdict({"node1": {"skipped": True}, "node2": {"skipped": True}}, 0)
    assert off["passed"] is True and off["not_judged"][-1] == "DCGM diag not run: burn_in_dcgm_level is 0" and off["dcgm"] == {}


def test_a_warning_is_reported_and_fails_nothing_and_callers_without_dcgm_are_unchanged():
    warned = ran("r2-dcgm4-fail.txt")
    warned["tests"] = [dict(t, status="warn") if t["status"] == "fail" else t for t in warned["tests"]]
    found = verdict({"node1": ran("r2-dcgm3-pass.json"), "node2": warned})
    assert found["passed"] is True and [f["status"] for f in found["findings"]] == ["warn", "warn"]
    assert found["text"].splitlines()[5].startswith("  WARN node2 GPU0: DCGM diag: Deployment / software: Persistence Mode")
    plain = burn_in.verdict({"node1": BURN}, {"node1": FACTS}, 0.1)
    assert plain["dcgm"] is None and plain["passed"] is True and "DCGM" not in plain["text"] + " ".join(plain["not_judged"])
