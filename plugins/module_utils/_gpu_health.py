# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A GPU's health as `nvidia-smi -q -x` reports it: ECC error counts, remapped rows (Ampere on) or retired pages (older
GPUs), the clock event reasons active now, clocks against their maximum. Read, not judged: plugin_utils/gpu_health.py
judges.

Node side: imported by gpu.py (parse_smi_xml), shipped with the module gpu_facts and with the job runner
(roles/train/files/trainops_job links these files); standard library only.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from ._smi_values import int_prefix, xml_text
_ECC_COUNTERS = ("sram_correctable", "sram_uncorrectable", "sram_uncorrectable_parity", "sram_uncorrectable_secded",
                 "dram_correctable", "dram_uncorrectable",
                 # Before Ampere's split into SRAM and DRAM (V100, driver < 510): single and double bit errors by memory.
                 "single_bit/total", "double_bit/total")
# Drivers 535 and later say "clocks_event_reasons", earlier ones "clocks_throttle_reasons".
_REASON_PARENTS = ("clocks_event_reasons", "clocks_throttle_reasons")
_REASON_PREFIX = re.compile(r"^clocks?_(?:event|throttle)_reason_")


def _count(element: ET.Element, path: str) -> int | None:
    return int_prefix(xml_text(element, path))


def _yes(element: ET.Element, path: str) -> bool | None:
    text = xml_text(element, path)
    return None if text is None else text.lower() == "yes"


def _pending(gpu: ET.Element) -> bool | None:
    seen = [_yes(gpu, "retired_pages/%s" % tag) for tag in ("pending_blacklist", "pending_retirement")]
    return None if seen == [None, None] else any(seen)


def _ecc(gpu: ET.Element, scope: str) -> dict:
    """{counter: count} of ecc_errors/<scope> (volatile: since the driver loaded; aggregate: the GPU's life), the
    counters this GPU reports (the single/double bit totals under their own names)."""
    out = {}
    for counter in _ECC_COUNTERS:
        count = _count(gpu, "ecc_errors/%s/%s" % (scope, counter))
        if count is not None:
            out[counter.replace("/total", "")] = count
    return out


def _reasons(gpu: ET.Element) -> list:
    """The clock event reasons active now, short names (hw_slowdown, hw_thermal_slowdown, sw_power_cap, ...)."""
    for parent in _REASON_PARENTS:
        found = gpu.find(parent)
        if found is not None:
            return [_REASON_PREFIX.sub("", child.tag) for child in found
                    if (child.text or "").strip().lower() == "active" and _REASON_PREFIX.match(child.tag)]
    return []


def parse_health(gpu: ET.Element) -> dict:
    """{ecc: {volatile, aggregate}, sram_threshold_exceeded, remapped_rows: {correctable, uncorrectable, pending,
    failure} or None, retired_pages: {single_bit, double_bit, pending} or None, clock_reasons (active now),
    sm_clock_mhz, sm_clock_max_mhz} of one <gpu> element; a counter the GPU does not report is left out (or None)."""
    remapped = {"correctable": _count(gpu, "remapped_rows/remapped_row_corr"),
                "uncorrectable": _count(gpu, "remapped_rows/remapped_row_unc"),
                "pending": _yes(gpu, "remapped_rows/remapped_row_pending"),
                "failure": _yes(gpu, "remapped_rows/remapped_row_failure")}
    retired = {"single_bit": _count(gpu, "retired_pages/multiple_single_bit_retirement/retired_count"),
               "double_bit": _count(gpu, "retired_pages/double_bit_retirement/retired_count"),
               # nvidia-smi's "Pending Page Blacklist" (pending_blacklist) and, in later drivers, pending_retirement.
               "pending": _pending(gpu)}
    return {
        "ecc": {"volatile": _ecc(gpu, "volatile"), "aggregate": _ecc(gpu, "aggregate")},
        "sram_threshold_exceeded": _yes(gpu, "ecc_errors/aggregate/sram_threshold_exceeded"),
        "remapped_rows": remapped if any(v is not None for v in remapped.values()) else None,
        "retired_pages": retired if any(v is not None for v in retired.values()) else None,
        "clock_reasons": _reasons(gpu),
        "sm_clock_mhz": _count(gpu, "clocks/sm_clock"),
        "sm_clock_max_mhz": _count(gpu, "max_clocks/sm_clock"),
    }
