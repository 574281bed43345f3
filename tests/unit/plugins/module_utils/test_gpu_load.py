# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Each GPU's load as the job runner reads it (module_utils/_gpu_load.py): nvidia-smi's query recorded on the GPU test
machine (one H100, idle and under bf16 GEMMs: tests/fixtures/gpu/perf/SOURCES.md), a window's figures (the runner's
reader: tests/unit/train/test_perf_gpus.py)."""

from __future__ import annotations

from pathlib import Path

from ansible_collections.trainops.cluster.plugins.module_utils import _gpu_load

PERF = Path(__file__).resolve().parents[3] / "fixtures" / "gpu" / "perf"


def test_the_recorded_query_idle_and_under_load_is_read():
    idle = _gpu_load.parse((PERF / "query-idle.csv").read_text())
    load = _gpu_load.parse((PERF / "query-load.csv").read_text())
    assert idle == [{"index": 0, "util": 0, "sm_mhz": 345, "sm_max_mhz": 1980, "power_w": 84.06, "reasons": ["gpu_idle"]}]
    # At 99 % the H100 sits at its power cap (700 W), 1335 of 1980 MHz: the clocks a busy GPU runs at, not a fault.
    assert load == [{"index": 0, "util": 99, "sm_mhz": 1335, "sm_max_mhz": 1980, "power_w": 697.85, "reasons": ["sw_power_cap"]}]


def test_reasons_placeholders_and_stray_lines():
    assert _gpu_load.reasons_of("0x00000000000000C8") == ["hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"]
    assert _gpu_load.reasons_of("0x0000000000000000") == [] and _gpu_load.reasons_of("[N/A]") == []
    assert _gpu_load.reasons_of("not hex") == []
    [gpu] = _gpu_load.parse("No devices were found\n3, [N/A], 1410, 1410, [N/A], [N/A]\n")
    assert gpu == {"index": 3, "util": None, "sm_mhz": 1410, "sm_max_mhz": 1410, "power_w": None, "reasons": []}


def test_a_window_holds_each_gpus_means_and_each_reasons_share():
    window = _gpu_load.Window()
    assert window.figures() == []
    load = _gpu_load.parse((PERF / "query-load.csv").read_text())[0]
    window.add([load, dict(load, index=1, sm_mhz=1005, reasons=["sw_power_cap", "hw_thermal_slowdown"])])
    window.add([dict(load, util=97, sm_mhz=1365), dict(load, index=1, sm_mhz=995, util=None, reasons=["hw_thermal_slowdown"])])
    assert window.figures() == [
        {"index": 0, "looks": 2, "util": 98.0, "sm_mhz": 1350.0, "sm_max_mhz": 1980, "power_w": 697.9, "reasons": {"sw_power_cap": 1.0}},
        {"index": 1, "looks": 2, "util": 99.0, "sm_mhz": 1000.0, "sm_max_mhz": 1980, "power_w": 697.9,
         "reasons": {"hw_thermal_slowdown": 1.0, "sw_power_cap": 0.5}}]
