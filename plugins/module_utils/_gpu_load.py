# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Each GPU's load while a job runs: utilization, SM clock against its maximum, power draw and the clock event reasons
active, one `nvidia-smi --query-gpu` line a GPU; a window's figures per GPU. Read, not judged: the job's supervisor
judges (trainops_job/judge.py, gpu_straggler).

Node side: the job runner's sampler (roles/train/files/trainops_job links this file); standard library only.
"""

from __future__ import annotations

from typing import Any

from ._smi_values import int_prefix, value

# Drivers 535 and later name the reasons "clocks_event_reasons", earlier ones only "clocks_throttle_reasons".
FIELDS = ("index", "utilization.gpu", "clocks.sm", "clocks.max.sm", "power.draw")
REASON_FIELDS = ("clocks_event_reasons.active", "clocks_throttle_reasons.active")
# Clock event reasons that the hardware raises (nvidia-smi: "HW Slowdown", "HW Thermal Slowdown", "HW Power Brake
# Slowdown"): the GPU runs slow whatever the job does; and the driver's own, as nvidia-smi -q words them.
HW_REASONS = {"hw_slowdown": "HW Slowdown", "hw_thermal_slowdown": "HW Thermal Slowdown",
              "hw_power_brake_slowdown": "HW Power Brake Slowdown"}
SW_REASONS = {"sw_thermal_slowdown": "SW Thermal Slowdown", "sw_power_cap": "SW Power Cap"}
# NVML's nvmlClocksEventReasons bits (nvml.h), named as `nvidia-smi -q -x` names its elements (_gpu_health).
REASON_BITS = ((0x1, "gpu_idle"), (0x2, "applications_clocks_setting"), (0x4, "sw_power_cap"), (0x8, "hw_slowdown"),
               (0x10, "sync_boost"), (0x20, "sw_thermal_slowdown"), (0x40, "hw_thermal_slowdown"),
               (0x80, "hw_power_brake_slowdown"), (0x100, "display_clocks_setting"))


def command(tool: str, reasons: str = REASON_FIELDS[0]) -> list:
    """The query (trainops_job/gpu_reader.py runs it at each look)."""
    return [tool, "--query-gpu=" + ",".join(FIELDS + (reasons,)), "--format=csv,noheader,nounits"]


def reasons_of(mask: str | None) -> list:
    """The names of the reasons set in "0x0000000000000004" (None: none read)."""
    text = value(mask)
    try:
        bits = int(text, 16) if text else 0
    except ValueError:
        return []
    return [name for bit, name in REASON_BITS if bits & bit]


def _number(text: str | None) -> float | None:
    text = value(text)
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def parse(text: str) -> list:
    """[{index, util (%), sm_mhz, sm_max_mhz, power_w, reasons}] from the query's CSV (noheader, nounits); a field the
    GPU does not report is None."""
    gpus = []
    for line in text.splitlines():
        fields = [field.strip() for field in line.split(",")]
        if len(fields) != len(FIELDS) + 1 or int_prefix(fields[0]) is None:
            continue
        gpus.append({"index": int_prefix(fields[0]), "util": int_prefix(fields[1]), "sm_mhz": int_prefix(fields[2]),
                     "sm_max_mhz": int_prefix(fields[3]), "power_w": _number(fields[4]), "reasons": reasons_of(fields[5])})
    return gpus


class Window:
    """The looks of one window: per GPU the means of utilization, SM clock and power, its maximum clock, and each
    reason's share of the looks."""

    def __init__(self) -> None:
        self.looks: dict[int, list[Any]] = {}  # index: [looks, util sum, util n, sm sum, sm n, power sum, power n, max clock, {reason: looks}]

    def add(self, gpus: list) -> None:
        for gpu in gpus:
            seen = self.looks.setdefault(gpu["index"], [0, 0, 0, 0, 0, 0.0, 0, None, {}])
            seen[0] += 1
            for at, key in ((1, "util"), (3, "sm_mhz"), (5, "power_w")):
                if gpu.get(key) is not None:
                    seen[at] += gpu[key]
                    seen[at + 1] += 1
            seen[7] = gpu.get("sm_max_mhz") or seen[7]
            for reason in gpu.get("reasons") or []:
                seen[8][reason] = seen[8].get(reason, 0) + 1

    def figures(self) -> list:
        """[{index, looks, util, sm_mhz, sm_max_mhz, power_w, reasons: {reason: share of the looks}}], by index."""
        out = []
        for index, seen in sorted(self.looks.items()):
            mean = [round(seen[at] / seen[at + 1], 1) if seen[at + 1] else None for at in (1, 3, 5)]
            out.append({"index": index, "looks": seen[0], "util": mean[0], "sm_mhz": mean[1], "sm_max_mhz": seen[7], "power_w": mean[2],
                        "reasons": {r: round(n / float(seen[0]), 2) for r, n in sorted(seen[8].items())}})
        return out
