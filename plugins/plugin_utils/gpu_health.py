# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A GPU's health judged from what gpu_facts read (module_utils/_gpu_health.py): each problem with the GPU, its figure,
the threshold that applied and what to do. The thresholds are docs/gpu-health.md's table, with their sources.

Controller side: pure functions, used by the doctor (doctor.gpus).
"""

from __future__ import annotations

from ansible_collections.trainops.cluster.plugins.module_utils import _gpu_load

# Azure's node health checks (azurehpc-health-checks, check_gpu_ecc): more than 512 uncorrectable row remaps, or more
# than 10,000 SRAM correctable errors, fail a GPU.
MAX_UNCORRECTABLE_REMAPS = 512
MAX_SRAM_CORRECTABLE = 10000
# Corrected DRAM (HBM, GDDR) errors over the GPU's life: ECC fixed every one and the driver remaps a row that keeps erring,
# so a count fails nothing; but tens of thousands say some cells keep failing, worth watching before they turn
# uncorrectable. No vendor publishes a DRAM figure: this is Azure's SRAM limit above, kept for DRAM as a warning only (a
# public A40 capture counts 10,289 with none since its driver loaded: tests/fixtures/gpu/health/SOURCES.md).
MAX_DRAM_CORRECTABLE_LIFE = 10000
# The hardware's clock event reasons fail a GPU (it runs slow whatever the job does); the driver's own thermal slowdown
# is worth a look (a power cap under load is normal: not named here).
SW_REASONS = {"sw_thermal_slowdown": _gpu_load.SW_REASONS["sw_thermal_slowdown"]}

_RESET = "Drain the node, reset the GPU (nvidia-smi -r -i INDEX, no process on it) or reboot"
_REPLACE = "Drain the node and ask the provider to replace the GPU (hand them this line and nvidia-smi -q)"


def _problem(gpu: dict, status: str, what: str, figure: object, threshold: str, fix: str) -> dict:
    return {"gpu": gpu.get("index"), "bus": gpu.get("pci_bus_id"), "status": status, "what": what, "figure": figure,
            "threshold": threshold, "fix": fix}


def _memory(gpu: dict, health: dict) -> list:
    out = []
    rows = health.get("remapped_rows") or {}
    if rows.get("failure"):
        out.append(_problem(gpu, "fail", "row remapping failed", "Yes", "no failure", _REPLACE))
    if rows.get("pending"):
        out.append(_problem(gpu, "fail", "a row remap is pending", "Yes", "none pending",
                            _RESET + " to apply it; until then the row's errors can come back"))
    if (rows.get("uncorrectable") or 0) > MAX_UNCORRECTABLE_REMAPS:
        out.append(_problem(gpu, "fail", "rows remapped for uncorrectable errors", rows["uncorrectable"],
                            "at most %d" % MAX_UNCORRECTABLE_REMAPS, _REPLACE))
    pages = health.get("retired_pages") or {}
    if pages.get("pending"):
        out.append(_problem(gpu, "fail", "a page retirement is pending", "Yes", "none pending", _RESET + " to retire it"))
    retired = (pages.get("single_bit") or 0) + (pages.get("double_bit") or 0)
    if retired:
        out.append(_problem(gpu, "warn", "retired memory pages", retired, "none",
                            "Watch the count; ask the provider for a replacement if it grows"))
    return out


def _ecc(gpu: dict, health: dict) -> list:
    out = []
    volatile, aggregate = (health.get("ecc") or {}).get("volatile") or {}, (health.get("ecc") or {}).get("aggregate") or {}
    unc = {k: v for k, v in volatile.items() if v and ("uncorrectable" in k or k == "double_bit")}
    if unc:
        out.append(_problem(gpu, "fail", "uncorrectable ECC errors since the driver loaded",
                            ", ".join("%s %d" % (k, v) for k, v in sorted(unc.items())), "none",
                            _RESET + "; if they come back, ask the provider to replace the GPU"))
    if (aggregate.get("sram_correctable") or 0) > MAX_SRAM_CORRECTABLE or health.get("sram_threshold_exceeded"):
        out.append(_problem(gpu, "fail", "SRAM correctable ECC errors over the GPU's life", aggregate.get("sram_correctable"),
                            "at most %d, and the driver's SRAM threshold not exceeded" % MAX_SRAM_CORRECTABLE, _REPLACE))
    corr = {k: v for k, v in volatile.items() if v and ("correctable" in k and "uncorrectable" not in k or k == "single_bit")}
    if corr:
        out.append(_problem(gpu, "warn", "correctable ECC errors since the driver loaded",
                            ", ".join("%s %d" % (k, v) for k, v in sorted(corr.items())), "none",
                            "Corrected, but memory that errs may need a row remap: watch remapped rows"))
    out.extend(_dram_life(gpu, volatile, aggregate))
    return out


def _dram_life(gpu: dict, volatile: dict, aggregate: dict) -> list:
    """A warning where the GPU's life count of corrected DRAM errors is over MAX_DRAM_CORRECTABLE_LIFE, whatever the
    count since the driver loaded (a reboot or a driver reload clears that one, not the life count). Drivers before
    the SRAM and DRAM split (V100, before 510) count single-bit errors of all memories: read as the DRAM count there."""
    key = next((k for k in ("dram_correctable", "single_bit") if aggregate.get(k) is not None), None)
    if key is None or aggregate[key] <= MAX_DRAM_CORRECTABLE_LIFE:
        return []
    since = {None: "not read", 0: "none"}.get(volatile.get(key), volatile.get(key))
    return [_problem(gpu, "warn", "correctable DRAM ECC errors over the GPU's life",
                     "%s %d over its life (%s since the driver loaded)" % (key, aggregate[key], since),
                     "at most %d" % MAX_DRAM_CORRECTABLE_LIFE,
                     "Corrected, but memory that keeps erring wears: watch whether its remapped rows (nvidia-smi -q -d ROW_REMAPPER) "
                     "or retired pages grow, and ask the provider whether the GPU is due for a replacement")]


def _clocks(gpu: dict, health: dict) -> list:
    out = []
    active = health.get("clock_reasons") or []
    hw = [_gpu_load.HW_REASONS[r] for r in active if r in _gpu_load.HW_REASONS]
    if hw:
        out.append(_problem(gpu, "fail", "the hardware slows the GPU's clocks", ", ".join(hw), "none active",
                            "Ask the provider to check the node's power and cooling; the GPU runs slow for every job"))
    sw = [SW_REASONS[r] for r in active if r in SW_REASONS]
    if sw:
        out.append(_problem(gpu, "warn", "the driver slows the GPU's clocks", ", ".join(sw), "none active",
                            "The GPU runs hot: check its temperature (nvidia-smi -q -d TEMPERATURE) and the airflow"))
    if gpu.get("persistence_mode") == "Disabled":
        out.append(_problem(gpu, "warn", "persistence mode is off", "Disabled", "Enabled",
                            "nvidia-smi -pm 1 (or nvidia-persistenced): without it the driver unloads when the GPU idles"))
    return out


def _link(gpu: dict) -> list:
    """A warning where the GPU's PCIe link runs narrower than its own maximum (x8 of x16): a GPU alone on its node has no
    peer to be compared with (among). Only the width: an idle GPU drops its link's generation to save power and raises
    it under load, but a link keeps the width it trained to, so a narrower one is a riser, a slot or a seating fault."""
    link = gpu.get("pcie") or {}
    width, widest = link.get("current_width"), link.get("max_width")
    if not width or not widest or width >= widest:
        return []
    gens = "" if not link.get("current_gen") else ", Gen%s (Gen%s at most)" % (link["current_gen"], link.get("max_gen") or "?")
    return [_problem(gpu, "warn", "PCIe link narrower than its maximum", "x%d of x%d%s" % (width, widest, gens),
                     "x%d, the link's maximum width" % widest,
                     "Host-device copies run at %d/%d of the link's bandwidth: reseat the GPU or its riser, or ask the provider "
                     "to check the slot (nvidia-smi -q -d PCI shows the width)" % (width, widest))]


def problems(gpu: dict) -> list:
    """[{gpu, bus, status ("fail" or "warn"), what, figure, threshold, fix}] of one GPU of gpu_facts' gpus."""
    health = gpu.get("health") or {}
    return _memory(gpu, health) + _ecc(gpu, health) + _clocks(gpu, health) + _link(gpu)


def among(gpus: list) -> list:
    """Problems that the node's GPUs show against each other: NVLink links inactive on a GPU (nvidia-smi nvlink -s
    lists them "<inactive>") or counting errors (nvidia-smi nvlink -e), a PCIe link that trained to a lower generation or width than the node's best GPU's."""
    out = []
    for gpu in gpus:
        inactive = (gpu.get("nvlink") or {}).get("links_inactive")
        if inactive:
            total = inactive + ((gpu.get("nvlink") or {}).get("links_active") or 0)
            out.append(_problem(gpu, "fail", "NVLink links inactive", "%d of %d" % (inactive, total), "none inactive",
                                "Reset the GPU (nvidia-smi -r); if the links stay down, ask the provider to check the "
                                "NVLink bridge or NVSwitch fabric (and nvidia-fabricmanager)"))
        errors = (gpu.get("nvlink") or {}).get("errors") or {}
        if any(errors.get(key) for key in ("replay", "recovery", "crc")):
            # A healthy link counts none; NVIDIA's resiliency extension watches replay and recovery counters that grow.
            out.append(_problem(gpu, "warn", "NVLink errors since the driver loaded", "replay %d, recovery %d, CRC %d (link%s %s)" % (
                errors["replay"], errors["recovery"], errors["crc"], "s" if len(errors["links"]) > 1 else "",
                ", ".join(map(str, errors["links"]))), "none",
                "Watch whether they grow (nvidia-smi nvlink -e): a link whose counters climb is failing; drain the node, "
                "reset the GPU (nvidia-smi -r), and if they go on ask the provider to check its NVLink (baseboard, NVSwitch)"))
    links = [(gpu, gpu.get("pcie") or {}) for gpu in gpus]
    known = [(link["max_gen"], link["max_width"]) for dummy, link in links if link.get("max_gen") and link.get("max_width")]
    if len(known) > 1:
        best = max(known)
        for gpu, link in links:
            if link.get("max_gen") and link.get("max_width") and (link["max_gen"], link["max_width"]) < best:
                out.append(_problem(gpu, "warn", "PCIe link below the node's other GPUs'",
                                    "Gen%d x%d" % (link["max_gen"], link["max_width"]), "Gen%d x%d" % best,
                                    "Reseat the GPU or its riser, or ask the provider: host-device copies run slower"))
    return out


def text(problem: dict) -> str:
    """"GPU 0 (00000000:18:00.0): a row remap is pending: Yes (threshold: none pending)"."""
    return "GPU %s (%s): %s: %s (threshold: %s)" % (problem["gpu"], problem["bus"], problem["what"], problem["figure"],
                                                    problem["threshold"])
