# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A GPU's health read from nvidia-smi -q -x (module_utils/_gpu_health.py) and judged (plugin_utils/gpu_health.py):
the real recordings (2x H200 and the variants derived from it) read healthy; an unhealthy GPU is the
recorded H200 with the values of a public capture of an unhealthy one (tests/fixtures/gpu/health, SOURCES.md), each
value checked against that capture's text."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from ansible_collections.trainops.cluster.plugins.module_utils import gpu
from ansible_collections.trainops.cluster.plugins.plugin_utils import doctor, gpu_health

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "gpu"
# The recordings of GPUs (a node without its driver recorded nvidia-smi's complaint instead).
RECORDED = sorted(p for p in FIXTURES.glob("**/nvidia-smi-q.xml") if p.read_text(encoding="utf-8").startswith("<?xml"))


def derived(capture: str, lines: list, values: dict) -> dict:
    """The recorded H200's first GPU with `values` ({path under <gpu>: text}) set, after checking that the public
    capture holds each of `lines` (what nvidia-smi -q printed for those values)."""
    text = (FIXTURES / "health" / capture).read_text(encoding="utf-8")
    for line in lines:
        assert any(" ".join(seen.split()) == line for seen in text.splitlines()), (capture, line)
    root = ET.fromstring((FIXTURES / "h200x2" / "nvidia-smi-q.xml").read_text(encoding="utf-8"))
    first = root.find("gpu")
    for path, value in values.items():
        first.find(path).text = value
    return gpu.parse_smi_xml(ET.tostring(root, encoding="unicode"))["gpus"][0]


@pytest.mark.parametrize("path", RECORDED, ids=[str(p.relative_to(FIXTURES)) for p in RECORDED])
def test_the_recorded_gpus_read_healthy(path):
    gpus = gpu.parse_smi_xml(path.read_text(encoding="utf-8"))["gpus"]
    for each in gpus:
        health = each["health"]
        assert health["remapped_rows"] == {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False}
        assert health["ecc"]["volatile"]["dram_uncorrectable"] == 0 and health["sm_clock_max_mhz"] > health["sm_clock_mhz"] > 0
        # The L40S recording runs without persistence mode: the one finding.
        expected = ["persistence mode is off"] if each["persistence_mode"] == "Disabled" else []
        assert [p["what"] for p in gpu_health.problems(each)] == expected, gpu_health.problems(each)


def test_a_pending_row_remap_fails_the_gpu_and_says_to_reset_it():
    # An A100-SXM4-80GB after Xid 63: a correctable error remapped a row, applied at the next reset.
    sick = derived("a100-sxm4-80gb-xid63-remap-pending-dram-correctable.txt",
                   ["Correctable Error : 1", "Pending : Yes", "DRAM Correctable : 177"],
                   {"remapped_rows/remapped_row_corr": "1", "remapped_rows/remapped_row_pending": "Yes",
                    "ecc_errors/volatile/dram_correctable": "177", "ecc_errors/aggregate/dram_correctable": "177"})
    found = {p["what"]: p for p in gpu_health.problems(sick)}
    assert found["a row remap is pending"]["status"] == "fail" and "reset the GPU" in found["a row remap is pending"]["fix"]
    assert gpu_health.text(found["a row remap is pending"]) == \
        "GPU 0 (00000000:00:06.0): a row remap is pending: Yes (threshold: none pending)"
    assert found["correctable ECC errors since the driver loaded"]["figure"] == "dram_correctable 177"
    assert found["correctable ECC errors since the driver loaded"]["status"] == "warn"


def test_uncorrectable_errors_fail_and_a_few_remapped_rows_do_not():
    # GH200: one uncorrectable DRAM error over its life, its row remapped (not pending): within Azure's 512.
    remapped = derived("gh200-480gb-dram-uncorrectable-remapped-row-full-q.txt", ["Uncorrectable Error : 1", "Pending : No"],
                       {"remapped_rows/remapped_row_unc": "1", "ecc_errors/aggregate/dram_uncorrectable": "1"})
    assert remapped["health"]["remapped_rows"]["uncorrectable"] == 1 and gpu_health.problems(remapped) == []
    # An SRAM uncorrectable error since the driver loaded (the driver 510-535 layout: one SRAM counter).
    sram = derived("sram-uncorrectable-volatile1-aggregate5-ecc-section.txt", ["SRAM Uncorrectable : 1", "SRAM Uncorrectable : 5"],
                   {"ecc_errors/volatile/sram_uncorrectable_secded": "1", "ecc_errors/aggregate/sram_uncorrectable_secded": "5"})
    [problem] = gpu_health.problems(sram)
    assert (problem["status"], problem["figure"]) == ("fail", "sram_uncorrectable_secded 1"), problem
    over = derived("gh200-480gb-dram-uncorrectable-remapped-row-full-q.txt", ["Uncorrectable Error : 1"],
                   {"remapped_rows/remapped_row_unc": "513", "remapped_rows/remapped_row_failure": "Yes"})
    assert [p["what"] for p in gpu_health.problems(over)] == ["row remapping failed", "rows remapped for uncorrectable errors"]


def test_hardware_clock_slowdown_fails_the_gpu():
    # A V100 in a chassis whose power budget does not list it: HW Slowdown and HW Power Brake active.
    braked = derived("v100-sxm2-32gb-hw-power-brake-c4130.txt", ["HW Slowdown : Active", "HW Power Brake Slowdown : Active"],
                     {"clocks_event_reasons/clocks_event_reason_hw_slowdown": "Active",
                      "clocks_event_reasons/clocks_event_reason_hw_power_brake_slowdown": "Active"})
    assert braked["health"]["clock_reasons"] == ["gpu_idle", "hw_slowdown", "hw_power_brake_slowdown"]
    [problem] = gpu_health.problems(braked)
    assert (problem["status"], problem["figure"]) == ("fail", "HW Slowdown, HW Power Brake Slowdown"), problem


def test_older_drivers_throttle_reasons_and_retired_pages():
    # Drivers before 535 name the reasons clocks_throttle_reasons; a V100 retires pages instead of remapping rows.
    xml = (FIXTURES / "h200x2" / "nvidia-smi-q.xml").read_text(encoding="utf-8").replace("clocks_event_reason", "clocks_throttle_reason")
    xml = xml.replace("<clocks_throttle_reason_hw_thermal_slowdown>Not Active", "<clocks_throttle_reason_hw_thermal_slowdown>Active", 1)
    first = gpu.parse_smi_xml(xml)["gpus"][0]
    assert first["health"]["clock_reasons"] == ["gpu_idle", "hw_thermal_slowdown"]
    retired = derived("v100-sxm2-16gb-x8-sbe-retired-page-full-q.txt", ["Pending Page Blacklist : No"],
                      {"retired_pages/multiple_single_bit_retirement/retired_count": "1",
                       "retired_pages/pending_blacklist": "Yes"})
    assert retired["health"]["retired_pages"] == {"single_bit": 1, "double_bit": None, "pending": True}
    assert [(p["status"], p["what"]) for p in gpu_health.problems(retired)] == [
        ("fail", "a page retirement is pending"), ("warn", "retired memory pages")]


def test_inactive_nvlink_links_and_a_narrower_pcie_link_among_the_nodes_gpus():
    # The recorded 2x H200 with GPU 1's 18 links listed <inactive> (tests/fixtures/gpu/variants/h200x2-nvlink-down).
    facts = gpu.gather(smi_xml=(FIXTURES / "h200x2" / "nvidia-smi-q.xml").read_text(encoding="utf-8"),
                       nvlink=(FIXTURES / "variants" / "h200x2-nvlink-down" / "nvlink-s.txt").read_text(encoding="utf-8"))
    [down] = gpu_health.among(facts["gpus"])
    assert gpu_health.text(down) == "GPU 1 (00000000:00:07.0): NVLink links inactive: 18 of 18 (threshold: none inactive)"
    assert down["status"] == "fail"
    # GPU 1's link trained to x8 while GPU 0's is x16.
    facts["gpus"][1]["nvlink"] = facts["gpus"][0]["nvlink"]
    facts["gpus"][1]["pcie"] = dict(facts["gpus"][1]["pcie"], max_width=8)
    [narrow] = gpu_health.among(facts["gpus"])
    assert (narrow["status"], narrow["figure"], narrow["threshold"]) == ("warn", "Gen5 x8", "Gen5 x16")
    assert gpu_health.among(facts["gpus"][:1]) == []


def test_a_gpu_under_load_at_its_power_cap_is_healthy():
    # The GPU machine's H200 10 s into the burn-in's GEMMs (tests/fixtures/gpu/h200x1-load): 100 % busy, its SM clock at
    # 1425 of 1980 MHz because the driver holds it at the power cap (SW Power Cap active). That is how a loaded GPU
    # runs: not a finding; the hardware's own slowdowns are (test_hardware_clock_slowdown_fails_the_gpu).
    each = gpu.parse_smi_xml((FIXTURES / "h200x1-load" / "nvidia-smi-q.xml").read_text(encoding="utf-8"))["gpus"][0]
    health = each["health"]
    assert (health["sm_clock_mhz"], health["sm_clock_max_mhz"]) == (1425, 1980) and health["clock_reasons"] == ["sw_power_cap"], health
    assert gpu_health.problems(each) == []


def test_nvlink_error_counters_are_a_warning_naming_the_gpu_and_its_links():
    # The recorded 2x H200 with GPU 1 link 3 counting errors (tests/fixtures/gpu/variants/h200x2-nvlink-errors, in the
    # format of a public GB300 capture); GPU 0's counters all 0.
    facts = gpu.gather(smi_xml=(FIXTURES / "h200x2" / "nvidia-smi-q.xml").read_text(encoding="utf-8"),
                       nvlink=(FIXTURES / "h200x2" / "nvlink-s.txt").read_text(encoding="utf-8"),
                       nvlink_errors=(FIXTURES / "variants" / "h200x2-nvlink-errors" / "nvlink-e.txt").read_text(encoding="utf-8"))
    [counting] = gpu_health.among(facts["gpus"])
    assert gpu_health.text(counting) == ("GPU 1 (00000000:00:07.0): NVLink errors since the driver loaded: replay 41, recovery 2, "
                                         "CRC 187 (link 3) (threshold: none)")
    assert counting["status"] == "warn" and counting["fix"].startswith("Watch whether they grow (nvidia-smi nvlink -e)")
    facts["gpus"][1]["nvlink"]["errors"] = dict(facts["gpus"][0]["nvlink"]["errors"])
    assert gpu_health.among(facts["gpus"]) == []


def capture_of(capture: str, bus: str) -> list:
    """The lines of one GPU's section of a public nvidia-smi -q capture (from its "GPU <bus>" line to the next GPU's),
    spaces folded, in order."""
    lines = [" ".join(line.split()) for line in (FIXTURES / "health" / capture).read_text(encoding="utf-8").splitlines()]
    start = lines.index("GPU %s" % bus)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("GPU 0000")), len(lines))
    return lines[start:end]


def test_a_large_life_count_of_corrected_dram_errors_warns_with_none_since_the_driver_loaded():
    # A public 10x A40 capture (tests/fixtures/gpu/health/SOURCES.md): GPU D1:00.0 counts 10,289 corrected DRAM errors over
    # its life and none since its driver loaded; D6:00.0 198 and 4F:00.0 10. Each GPU's figures set on the recorded H200.
    seen = {}
    for bus, life in (("00000000:D1:00.0", "10289"), ("00000000:D6:00.0", "198"), ("00000000:4F:00.0", "10")):
        section = capture_of("a40-x10-dram-correctable-swpowercap-full-q.txt", bus)
        ecc = section[section.index("ECC Errors"):section.index("Retired Pages")]
        volatile, aggregate = ecc[ecc.index("Volatile"):ecc.index("Aggregate")], ecc[ecc.index("Aggregate"):]
        assert "DRAM Correctable : 0" in volatile and "DRAM Correctable : %s" % life in aggregate, (bus, ecc)
        sick = derived("a40-x10-dram-correctable-swpowercap-full-q.txt", [], {
            "ecc_errors/volatile/dram_correctable": "0", "ecc_errors/aggregate/dram_correctable": life})
        seen[bus] = gpu_health.problems(sick)
    [worn] = seen["00000000:D1:00.0"]
    assert worn["status"] == "warn" and gpu_health.text(worn) == (
        "GPU 0 (00000000:00:06.0): correctable DRAM ECC errors over the GPU's life: dram_correctable 10289 over its life "
        "(none since the driver loaded) (threshold: at most %d)" % gpu_health.MAX_DRAM_CORRECTABLE_LIFE)
    assert "remapped rows" in worn["fix"] and "ask the provider" in worn["fix"]
    # Below the threshold: corrected errors a GPU may count over years, no finding.
    assert seen["00000000:D6:00.0"] == seen["00000000:4F:00.0"] == []


def test_a_lone_gpus_pcie_link_narrower_than_its_maximum_is_named():
    # A public nvidia-smi -q -x of one GeForce GTX 1050 (tests/fixtures/gpu/pcie/SOURCES.md): its link runs at x8 of x16,
    # at its maximum generation. The node has no other GPU to compare it with.
    facts = gpu.gather(smi_xml=(FIXTURES / "pcie" / "gtx1050-x8-of-x16-datakit.xml").read_text(encoding="utf-8"))
    assert facts["gpu_count"] == 1 and facts["gpus"][0]["pcie"] == {"max_gen": 3, "max_width": 16, "current_gen": 3, "current_width": 8}
    assert gpu_health.among(facts["gpus"]) == []
    [narrow] = gpu_health.problems(facts["gpus"][0])
    assert narrow["status"] == "warn" and gpu_health.text(narrow) == (
        "GPU 0 (00000000:01:00.0): PCIe link narrower than its maximum: x8 of x16, Gen3 (Gen3 at most) "
        "(threshold: x16, the link's maximum width)")
    # The doctor names the node with it.
    [finding] = doctor.gpus("node7", facts, 1)
    assert (finding["node"], finding["status"], finding["detail"]) == ("node7", "warn", gpu_health.text(narrow))


def test_an_idle_gpus_link_at_a_lower_generation_but_its_full_width_is_no_finding():
    # A public nvidia-smi -q -x of one GTX 1660 Ti (its early driver names it "Graphics Device"), idle: Gen1 of Gen3, x16
    # of x16. An idle GPU lowers its link's generation to save power; its persistence mode off is its one finding.
    facts = gpu.gather(smi_xml=(FIXTURES / "pcie" / "gtx1660ti-idle-gen1-x16-datakit.xml").read_text(encoding="utf-8"))
    assert facts["gpus"][0]["pcie"] == {"max_gen": 3, "max_width": 16, "current_gen": 1, "current_width": 16}
    assert [p["what"] for p in gpu_health.problems(facts["gpus"][0])] == ["persistence mode is off"]
