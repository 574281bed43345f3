# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""dcgmi diag -j read (module_utils/_dcgm_diag.py): the real DCGM 3.x outputs of levels 2 and 3, a DCGM 4.x document
after dcgmi's banner (tests/fixtures/dcgm/SOURCES.md), and what dcgmi prints when it has no diagnostic."""

import json
from pathlib import Path

from ansible_collections.trainops.cluster.plugins.module_utils._dcgm_diag import parse, status

DCGM = Path(__file__).resolve().parents[3] / "fixtures" / "dcgm"
R3 = (DCGM / "r3-dcgm3-pass.json").read_text()
R2 = (DCGM / "r2-dcgm3-pass.json").read_text()
V4 = (DCGM / "r2-dcgm4-fail.txt").read_text()


def test_the_real_dcgm3_level3_reads_every_test_with_its_gpu_and_info():
    read = parse(R3)
    assert (read["version"], read["driver"], read["runtime_error"]) == (None, None, None)
    assert len(read["tests"]) == 16
    assert [t["category"] for t in read["tests"]].count("Deployment") == 9
    # Deployment's tests name no GPU (the whole node); the others GPU 0.
    assert read["tests"][0] == {"category": "Deployment", "name": "Denylist", "gpus": None, "status": "pass", "warnings": [], "info": []}
    eud = next(t for t in read["tests"] if t["name"] == "EUD Test")
    assert eud == {"category": "Hardware", "name": "EUD Test", "gpus": [0], "status": "skip", "warnings": [], "info": []}
    power = next(t for t in read["tests"] if t["name"] == "Targeted Power")
    assert (power["category"], power["gpus"], power["info"]) == ("Stress", [0], ["GPU 0 GPU 0 power average:\t70 W"])
    assert sorted({t["status"] for t in read["tests"]}) == ["pass", "skip"]


def test_the_real_dcgm3_level2_has_its_eleven_tests():
    read = parse(R2)
    assert [t["name"] for t in read["tests"]][-2:] == ["PCIe", "GPU Memory"] and len(read["tests"]) == 11
    assert {t["status"] for t in read["tests"]} == {"pass"}
    assert read["tests"][-1]["info"] == ["GPU 0 Allocated 15206918958 bytes (97.3%)"]


def test_the_dcgm4_document_after_the_banner_reads_per_gpu_with_warnings():
    assert V4.startswith("Successfully ran diagnostic for group.\n")
    read = parse(V4)
    assert (read["version"], read["driver"]) == ("4.2.3", "570.148.08")
    assert [(t["name"], t["gpus"], t["status"]) for t in read["tests"]] == [
        ("software", [0], "fail"), ("software", [1], "pass"), ("memory", [0], "pass"), ("memory", [1], "fail"),
        ("diagnostic", [0], "pass"), ("diagnostic", [1], "pass"), ("pcie", [0], "pass"), ("pcie", [1], "pass")]
    assert read["tests"][0]["warnings"] == ['Persistence Mode: Persistence mode for GPU 0 is disabled. Enable persistence mode by '
                                            'running "nvidia-smi -i <gpuId> -pm 1 " as root.']
    assert read["tests"][3]["category"] == "Hardware" and read["tests"][3]["info"] == ["GPU 1 Allocated 83892944896 bytes (98.2%)"]
    assert read["tests"][6]["info"] == ["GPU 0 GPU to Host bandwidth:\t\t24.02 GB/s", "GPU 0 Host to GPU bandwidth:\t\t25.93 GB/s"]


def test_null_entries_in_a_tests_list_are_skipped():
    document = json.loads(R2)
    document["DCGM GPU Diagnostic"]["test_categories"][1]["tests"].insert(0, None)
    read = parse(json.dumps(document))
    assert len(read["tests"]) == 11 and read["tests"][9]["name"] == "PCIe"


def test_an_unknown_status_is_not_run_never_pass():
    assert [status(w) for w in ("Pass", "PASS", "Fail", "Warn", "Skip", "")] == ["pass", "pass", "fail", "warn", "skip", "not run"]
    document = json.loads(R2)
    document["DCGM GPU Diagnostic"]["test_categories"][2]["tests"][0]["results"][0]["status"] = "Passish"
    assert parse(json.dumps(document))["tests"][-1]["status"] == "not run"


def test_gpu_ids_as_a_number_a_list_in_a_string_and_warnings_as_strings():
    document = {"DCGM GPU Diagnostic": {"version": "3.3.1", "test_categories": [{"category": "Stress", "tests": [
        {"name": "SM Stress", "results": [{"gpu_ids": 3, "status": "Warn", "warnings": ["GPU 3 ran hot"]},
                                          {"gpu_ids": "0,1, 2", "status": "Fail", "info": "one line",
                                           "warnings": [{"warning": "GPU 0 failed", "error_id": 1}]}]}]}]}}
    read = parse(json.dumps(document))
    assert read["version"] == "3.3.1"
    assert read["tests"] == [
        {"category": "Stress", "name": "SM Stress", "gpus": [3], "status": "warn", "warnings": ["GPU 3 ran hot"], "info": []},
        {"category": "Stress", "name": "SM Stress", "gpus": [0, 1, 2], "status": "fail", "warnings": ["GPU 0 failed"], "info": ["one line"]}]


def test_a_dcgm4_summary_failure_without_a_failed_result_is_kept_and_a_runtime_error_read():
    document = {"DCGM Diagnostic": {"runtime_error": "The diagnostic was stopped", "test_categories": [{"category": "Stress", "tests": [
        {"name": "targeted_power", "results": [{"entity_group": "GPU", "entity_group_id": 1, "entity_id": 0, "status": "Pass"}],
         "test_summary": {"status": "Fail", "info": ["power below target"]}},
        {"name": "memtest", "results": [], "test_summary": {"status": "Skip"}}]}]}, "metadata": {"version": "4.1.1"}}
    read = parse(json.dumps(document))
    assert read["runtime_error"] == "The diagnostic was stopped"
    assert [(t["name"], t["gpus"], t["status"], t["info"]) for t in read["tests"]] == [
        ("targeted_power", [0], "pass", []), ("targeted_power", None, "fail", ["power below target"]), ("memtest", None, "skip", [])]


def test_text_without_a_diagnostic_is_an_error_with_its_first_line():
    assert parse("Error: Unable to establish a connection to the specified host: localhost\nError: Unable to connect to host engine. "
                 "Host engine connection invalid/disconnected.\n") == {
        "error": "no DCGM diagnostic in dcgmi's output: Error: Unable to establish a connection to the specified host: localhost"}
    assert parse("") == {"error": "no DCGM diagnostic in dcgmi's output: (nothing)"}
    assert parse('Successfully ran diagnostic for group.\n{"DCGM Diagnostic": ')["error"].endswith(": Successfully ran diagnostic for group.")
    assert parse('{"something": "else"}') == {"error": "no DCGM diagnostic in dcgmi's output: {\"something\": \"else\"}"}
