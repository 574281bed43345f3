# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The burn-in judged: every GPU's figures from roles/burn_in/files/trainops_burn.py (one JSON document per node)
against its model's specification, against its peers of the same model, and its GEMM's result against theirs.

Controller side: pure functions, used by the burn_in role (filter burn_in_verdict). docs/acceptance.md holds the table
of specifications and bounds, with their sources and what the GPU machine measured.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter

from ansible_collections.trainops.cluster.plugins.module_utils._gpu_load import HW_REASONS, REASON_BITS
from ansible_collections.trainops.cluster.plugins.plugin_utils import dcgm_diag
from ansible_collections.trainops.cluster.plugins.plugin_utils.nccl_tests import bandwidth

# (a part of nvidia-smi's product name, bf16 dense tensor TFLOP/s, memory GB/s), the first that the name holds applies:
# the more specific names first (the H100's PCIe and NVL boards are slower than the SXM's "H100 80GB HBM3"). NVIDIA's
# datasheets, dense (without sparsity) figures.
SPECS = (
    ("GH200", 989.0, 4000.0),
    ("H200 NVL", 835.0, 4800.0),
    ("H200", 989.0, 4800.0),
    ("H100 NVL", 835.0, 3900.0),
    ("H100 PCIe", 756.0, 2000.0),
    ("H100", 989.0, 3350.0),
    ("A100-SXM4-80GB", 312.0, 2039.0),
    ("A100 80GB PCIe", 312.0, 1935.0),
    ("A100", 312.0, 1555.0),
    ("L40S", 362.0, 864.0),
    ("L40", 181.0, 864.0),
    ("L4", 121.0, 300.0),
)
# The share of the specification a figure must reach. The burn-in on the GPU machine's H200 (at its power cap) read
# GEMM 68 % of the dense figure, device copy 89 %, pinned copies 88 % of PCIe Gen5 x16; torch loops on an H100 SXM 69 %:
# the bounds leave room for a part at its power cap, and catch one at half speed.
# The SM clock while the products run, against the GPU's maximum: at its power cap a busy H100 ran at 67 % (1335 of
# 1980 MHz), the H200 at 72-76 %; a power brake or a thermal slowdown halves it.
MIN_SHARE = {"gemm": 0.5, "memory": 0.7, "h2d": 0.6, "d2h": 0.6, "clocks": 0.5}
FIGURES = (("gemm", "tflops", "GEMM", "TFLOP/s"), ("memory", "gbps", "memory", "GB/s"),
           ("h2d", "gbps", "host->GPU", "GB/s"), ("d2h", "gbps", "GPU->host", "GB/s"), ("clocks", "sm_mhz", "SM clock under load", "MHz"))
# A GPU whose clocks the hardware held back (HW_REASONS, gpu_health's faults) in at least half the looks.
HELD = "SM clock under load held back by the hardware"
# Compared with the peers of the same model: not the clock, which a power cap sets part by part (the GEMM's rate,
# which follows it, is compared).
PEER_FIGURES = ("gemm", "memory", "h2d", "d2h")
_SLOW = ("Compare its clocks and clock event reasons under load (nvidia-smi -q -d PERFORMANCE,CLOCK) and its PCIe link "
         "with its peers'; a part that stays slow: drain the node and ask the provider to replace it")
_SLOW_CPU = ("Compare its CPU quota (cgroup cpu.max), frequency and load with its peers' (a neighbour on a shared host); "
             "a node that stays slow: ask the provider to move or replace it")
_WRONG = "Drain the node now: a GPU that computes wrong results corrupts a job silently; ask the provider to replace it"


def spec_of(name: str | None) -> tuple | None:
    """(bf16 TFLOP/s, memory GB/s) of a GPU model from its product name, or None for a model not in SPECS."""
    return next(((tflops, gbps) for part, tflops, gbps in SPECS if part in (name or "")), None)


def pcie_gbps(pcie: dict | None) -> tuple | None:
    """(GB/s each way, "Gen5 x16") of a GPU's PCIe link at its maximum (gpu_facts' pcie), or None where unknown."""
    gen, width = (pcie or {}).get("max_gen"), (pcie or {}).get("max_width")
    gbps = bandwidth.pcie_gbps(gen, width)
    return (gbps, "PCIe Gen%s x%s" % (gen, width)) if gbps else None


def parse(node: str, out: dict) -> tuple:
    """(the node's document, or None, and why not) from its run's registered result (rc, stdout, stderr)."""
    if out.get("skipped"):
        return None, "not run"
    try:
        document = json.loads(out.get("stdout") or "")
    except ValueError:
        lines = [line for line in (out.get("stderr") or out.get("msg") or "").splitlines() if line.strip()]
        return None, "%s: the burn-in printed no result (exit %s)%s" % (
            node, out.get("rc"), ": " + lines[-1].strip() if lines else "")
    if not isinstance(document, dict) or document.get("program") != "trainops_burn" or not isinstance(document.get("devices"), list):
        return None, "%s: the burn-in's output is not trainops_burn's" % node
    return document, None


def _finding(row: dict, what: str, figure: object, threshold: str, fix: str) -> dict:
    return {"node": row["node"], "device": device_name(row), "gpu": row["index"], "bus": row["bus"], "status": "fail", "what": what,
            "figure": figure, "threshold": threshold, "fix": fix}


def _unseen(documents: dict, gpu_facts: dict) -> list:
    """A node whose torch saw fewer GPUs than gpu_facts (nvidia-smi) did, or none (the image started without the GPUs,
    a driver and CUDA that do not match): its burn-in measured the rest, or the CPU."""
    found = []
    for node, document in sorted(documents.items()):
        expected = (gpu_facts.get(node) or {}).get("gpu_count") or 0
        seen = len(document["devices"]) if document.get("kind") == "cuda" else 0
        if seen < expected:
            found.append({"node": node, "device": None, "gpu": None, "bus": None, "status": "fail", "what": "GPUs unseen by torch",
                          "figure": "%d of %d GPUs (torch %s, CUDA %s)" % (seen, expected, document.get("torch"), document.get("cuda")),
                          "threshold": "every GPU nvidia-smi lists",
                          "fix": "Check that the image runs with the GPUs (training_image's GPU options) and that its CUDA suits the driver"})
    return found


def _rows(documents: dict, gpu_facts: dict) -> list:
    rows = []
    for node, document in sorted(documents.items()):
        facts = {gpu.get("index"): gpu for gpu in (gpu_facts.get(node) or {}).get("gpus") or []}
        for device in document["devices"]:
            fact = facts.get(device.get("index")) or {}
            row = {"node": node, "index": device.get("index"), "name": device.get("name"), "kind": document.get("kind"),
                   "bus": device.get("bus_id") or fact.get("pci_bus_id"), "error": device.get("error"),
                   "sha256": (device.get("gemm") or {}).get("sha256"), "repeat_sha256": (device.get("gemm") or {}).get("repeat_sha256"),
                   "pcie": pcie_gbps(fact.get("pcie"))}
            clocks = device.get("clocks") or {}
            row.update(sm_max=clocks.get("sm_max_mhz"), clocks_error=clocks.get("error"), temp_c=clocks.get("temp_c"),
                       power_w=clocks.get("power_w"), clock_reasons=_reason_names(clocks.get("reasons")))
            for figure, unit, _label, _unit in FIGURES:
                row[figure] = (device.get(figure) or {}).get(unit)
            rows.append(row)
    return rows


def _reason_names(bits: dict | None) -> dict:
    """{reason: share of the looks} from the burn's {"0x8": share} (NVML's bits, named as nvidia-smi -q names them)."""
    names = dict(REASON_BITS)
    return {names.get(int(bit, 16), bit): share for bit, share in sorted((bits or {}).items())}


def _bound(row: dict, figure: str) -> tuple | None:
    """(the figure's specification, what it is) for a row: the model's, the PCIe link's for the host copies, its maximum
    for the SM clock."""
    if figure in ("h2d", "d2h"):
        pcie: tuple | None = row["pcie"]
        return pcie
    if figure == "clocks":
        return (row["sm_max"], "its maximum SM clock") if row.get("sm_max") else None
    spec = spec_of(row["name"]) if row["kind"] == "cuda" else None
    return (spec[0 if figure == "gemm" else 1], "the %s's specification" % row["name"]) if spec else None


def threshold(row: dict, figure: str) -> str | None:
    """The bound a row's figure is held to, in words ("50 % of 989 (the NVIDIA H200's specification)"), or None."""
    bound = _bound(row, figure)
    return "%d %% of %s (%s)" % (round(100 * MIN_SHARE[figure]), bound[0], bound[1]) if bound else None


def _against_spec(row: dict, notes: list) -> list:
    found = []
    for figure, _unit, label, unit in FIGURES:
        value, bound = row[figure], _bound(row, figure)
        if value is None:
            continue
        if bound is None:
            why = {"h2d": "no PCIe link read", "d2h": "no PCIe link read", "clocks": "no maximum SM clock read"}.get(figure, "a model not in the table")
            notes.append("%s %s: %s not judged against a specification (%s)" % (row["node"], device_name(row), label, why))
            continue
        row.setdefault("share", {})[figure] = round(value / bound[0], 3)
        if value < MIN_SHARE[figure] * bound[0]:
            found.append(_finding(row, "%s below its bound" % label, "%s %s (%d %% of %s %s)" % (
                value, unit, round(100 * value / bound[0]), bound[0], bound[1]),
                "%d %% of %s" % (round(100 * MIN_SHARE[figure]), bound[1]), _SLOW))
    return found


def _held(row: dict) -> list:
    """A GPU whose clocks the hardware held back in at least half the looks while its products ran."""
    held = ["%s %d %%" % (HW_REASONS[r], round(100 * share)) for r, share in row["clock_reasons"].items() if r in HW_REASONS and share >= 0.5]
    if not held:
        return []
    return [_finding(row, HELD, "%s MHz; %s of the looks" % (row["clocks"], ", ".join(held)), "no hardware slowdown in half the looks",
                     "Check its cooling and power (nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER: %s C under load); a GPU that "
                     "stays held back: drain the node and ask the provider to replace it" % row.get("temp_c"))]


def _against_peers(rows: list, fraction: float, notes: list) -> list:
    """Each figure more than `fraction` below the median of its model's GPUs (in the whole cluster)."""
    found = []
    for name in sorted({row["name"] for row in rows}):
        peers = [row for row in rows if row["name"] == name]
        for row in peers:
            row["peers"] = len(peers)  # the GPUs its figures were compared with, itself included
        if len(peers) < 2:
            notes.append("%s: the only %s, not compared with peers" % (peers[0]["node"], name))
            continue
        for figure, _unit, label, unit in (f for f in FIGURES if f[0] in PEER_FIGURES):
            values = [row[figure] for row in peers if row[figure] is not None]
            median = statistics.median(values) if len(values) > 1 else None
            for row in peers:
                if median and row[figure] is not None and row[figure] < (1 - fraction) * median:
                    found.append(_finding(row, "%s below its peers'" % label, "%s %s (%d %% of the median %s of %d %s)" % (
                        row[figure], unit, round(100 * row[figure] / median), median, len(values), name),
                        "at least %d %% of the median (burn_in_outlier_fraction %s)" % (round(100 * (1 - fraction)), fraction),
                        _SLOW_CPU if row["kind"] == "cpu" else _SLOW))
    return found


def _results(rows: list) -> list:
    """A GPU whose GEMM result changed between its two products, or differs from its model's others (the most common
    result wins; without one, every GPU of the model is named)."""
    found = []
    for row in rows:
        if row["sha256"] and row["repeat_sha256"] and row["sha256"] != row["repeat_sha256"]:
            found.append(_finding(row, "GEMM result changed when repeated", "sha256 %s then %s" % (row["sha256"][:12], row["repeat_sha256"][:12]),
                                  "the same result every time", _WRONG))
    # CPUs: a float32 product's bits depend on the BLAS's kernel for the CPU and its thread count, which nodes need not
    # share: only each one's repeat is compared.
    for name in sorted({row["name"] for row in rows if row["kind"] == "cuda"}):
        peers = [row for row in rows if row["name"] == name and row["sha256"] and row["kind"] == "cuda"]
        counts = Counter(row["sha256"] for row in peers).most_common()
        if len(counts) < 2:
            continue
        majority = counts[0][0] if counts[0][1] > counts[1][1] else None
        for row in peers:
            if row["sha256"] != majority:
                found.append(_finding(row, "GEMM result differs from its peers'", "sha256 %s" % row["sha256"][:12],
                                      "%s (%d of %d %s)" % (majority[:12], counts[0][1], len(peers), name) if majority
                                      else "one result among the %d %s (none is the most common)" % (len(peers), name), _WRONG))
    return found


def device_name(row: dict) -> str:
    """A row's device as the report names it: "GPU3", or "cpu" for a node burned without GPUs."""
    return "cpu" if row.get("kind") == "cpu" else "GPU%s" % row.get("index")


def verdict(outputs: dict, gpu_facts: dict, outlier_fraction: float = 0.1, dcgm: dict | None = None,
            dcgm_level: int | None = None) -> dict:
    """{passed, rows, findings, not_judged, outlier_fraction, dcgm, text} from every node's run (outputs: {node:
    registered result}) and, where given, every node's DCGM diagnostic at dcgm_level (dcgm: {node: the dcgm_diag
    module's registered result}; plugin_utils/dcgm_diag.py judges it): a DCGM failure is a finding, a DCGM warning one
    with status warn, a node DCGM did not judge a line of not_judged. dcgm None: no DCGM part (dcgm null)."""
    documents: dict[str, dict] = {}
    findings: list[dict] = []
    notes: list[str] = []
    for node, out in sorted(outputs.items()):
        document, why = parse(node, out or {})
        if document:
            documents[node] = document
        elif why != "not run":
            findings.append({"node": node, "device": None, "gpu": None, "bus": None, "status": "fail", "what": "no result", "figure": why,
                             "threshold": "a result", "fix": "Read the node's burn-in log; run it again"})
    rows = _rows(documents, gpu_facts)
    findings += _unseen(documents, gpu_facts)
    for row in rows:
        if row["error"]:
            findings.append(_finding(row, "the burn-in failed on it", row["error"], "no error", _WRONG))
        findings += _against_spec(row, notes) + _held(row)
        if row["clocks_error"]:
            notes.append("%s %s: clocks under load not read (%s)" % (row["node"], device_name(row), row["clocks_error"]))
    findings += _against_peers([row for row in rows if not row["error"]], float(outlier_fraction), notes)
    findings += _results(rows)
    dcgm_judged = dcgm_diag.judge_all(dcgm, dcgm_level, gpu_facts) if dcgm is not None else None
    if dcgm_judged:
        findings += dcgm_judged["findings"]
        notes += dcgm_judged["not_judged"]
    # No row and no failure: no node ran it (no GPUs, burn_in_cpu off); DCGM alone passes nothing. A node without a
    # result is a failure; a warning (DCGM's) is not.
    passed = False if any(f["status"] == "fail" for f in findings) else True if rows else None
    return {"passed": passed, "rows": rows, "findings": findings, "not_judged": notes, "outlier_fraction": float(outlier_fraction),
            "dcgm": dcgm_judged["nodes"] if dcgm_judged else None,
            "text": text(rows, findings, passed, dcgm_judged["lines"] if dcgm_judged else ())}


def _figure(row: dict, figure: str, label: str, unit: str) -> str:
    share = (row.get("share") or {}).get(figure)
    return "%s %s %s%s" % (label, row[figure], unit, " (%d %%)" % round(100 * share) if share is not None else "")


def text(rows: list, findings: list, passed: bool | None, dcgm_lines: tuple | list = ()) -> str:
    """One line per GPU (its figures and their share of the specification), one per node's DCGM diagnostic, then each
    finding (FAIL, or WARN for DCGM's warnings)."""
    lines = ["burn-in: %s" % {True: "PASS", False: "FAIL", None: "not judged (no result)"}[passed]]
    for row in rows:
        figures = ", ".join(_figure(row, f, label, unit) for f, _u, label, unit in FIGURES if row[f] is not None)
        name = "" if row["kind"] == "cpu" else " " + row["name"]
        lines.append("  %s %s%s: %s" % (row["node"], device_name(row), name, row["error"] or figures))
    lines += ["  " + line for line in dcgm_lines]
    for finding in findings:
        lines.append("  %s %s%s: %s: %s (threshold: %s). %s" % (
            finding["status"].upper(), finding["node"], " " + finding["device"] if finding["device"] else "", finding["what"],
            finding["figure"], finding["threshold"], finding["fix"]))
    return "\n".join(lines)
