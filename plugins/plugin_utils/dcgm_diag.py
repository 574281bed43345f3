# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""DCGM's own diagnostic judged: each node's `dcgmi diag` (the module dcgm_diag's result, read by
module_utils/_dcgm_diag.py) as burn-in findings. A test that failed fails its node, one that warned is a warning, one
skipped or not run is listed as not judged; a node without dcgmi, or whose dcgmi printed no diagnostic, is not judged:
never a pass.

Controller side: pure functions, used by the burn-in's verdict (plugin_utils/burn_in.py, filter burn_in_verdict).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

# Every DCGM finding's "what" begins so: the acceptance record tells them from the burn-in's own figures by it.
CHECK = "DCGM diag"
# DCGM's categories of settings and software on the node (persistence mode, a library, an environment variable): the
# node's setting is fixed, the GPU is not at fault. Every other category (Integration, Hardware, Stress) loads the GPU.
SETTINGS = ("deployment", "software")
_FIX_SETTING = "Fix the setting DCGM names on the node (its warning says how), then run the burn-in again"
_FIX_HARDWARE = ("Drain the node and ask the provider to replace the GPU: DCGM's own diagnostic failed it; hand them "
                 "DCGM's warning")
_NO_HOSTENGINE = "Unable to establish a connection"


def _fix(category: str) -> str:
    return _FIX_SETTING if category.strip().lower() in SETTINGS else _FIX_HARDWARE


def _devices(entry: dict) -> list:
    """(device, gpu) pairs an entry names: one per GPU, or (None, None) for a test of the whole node."""
    return [("GPU%d" % gpu, gpu) for gpu in entry["gpus"]] if entry.get("gpus") else [(None, None)]


def _finding(node: str, entry: dict, device: str | None, gpu: int | None, buses: dict, threshold: str) -> dict:
    text = "; ".join(entry["warnings"]) or "%s without a warning%s" % (
        entry["status"], " (%s)" % "; ".join(entry["info"]) if entry["info"] else "")
    return {"node": node, "device": device, "gpu": gpu, "bus": buses.get(gpu), "status": entry["status"],
            "what": "%s: %s / %s" % (CHECK, entry["category"], entry["name"]), "figure": text, "threshold": threshold,
            "fix": ("" if entry["status"] == "fail" else "A warning, not a failure. ") + _fix(entry["category"])}


def _why_not(node: str, result: dict) -> str | None:
    """Why a node's result holds no diagnostic to judge, or None where it does."""
    if not result or result.get("skipped"):
        return "%s: %s not judged: not run on %s" % (node, CHECK, node)
    if result.get("found") is False:
        return "%s: %s not judged: no dcgmi on %s (DCGM not installed)" % (node, CHECK, node)
    if not result.get("ran", True):
        return "%s: %s not judged: not run (check mode)" % (node, CHECK)
    error = result.get("error") or (None if isinstance(result.get("tests"), list) else "no result (%s)" % result.get("msg", "?"))
    if error:
        hint = " (nv-hostengine is not running there: start it, systemctl start nvidia-dcgm)" if _NO_HOSTENGINE in error else ""
        return "%s: %s not judged: %s%s" % (node, CHECK, error, hint)
    return None


def judge(node: str, result: dict | None, level: int, gpu_facts: dict | None = None) -> dict:
    """{node, level, version, driver, verdict (pass, fail, warn or not judged), tests, findings (burn-in findings:
    node, device, gpu, bus, status fail or warn, what, figure, threshold, fix), not_judged (lines)} of one node."""
    result = result or {}
    out: dict[str, Any]
    out = {"node": node, "level": level, "version": result.get("version"), "driver": result.get("driver"),
           "tests": result.get("tests") or [], "findings": [], "not_judged": []}
    why = _why_not(node, result)
    if why:
        return dict(out, verdict="not judged", not_judged=[why])
    buses = {gpu.get("index"): gpu.get("pci_bus_id") for gpu in (gpu_facts or {}).get("gpus") or []}
    threshold = "Pass at dcgmi diag -r %s%s" % (level, " (DCGM %s)" % out["version"] if out["version"] else "")
    for entry in out["tests"]:
        if entry["status"] in ("fail", "warn"):
            out["findings"] += [_finding(node, entry, device, gpu, buses, threshold) for device, gpu in _devices(entry)]
        elif entry["status"] != "pass":
            on = ", ".join(d for d, _g in _devices(entry) if d)
            out["not_judged"].append("%s%s: %s %s / %s %s, not judged" % (
                node, " " + on if on else "", CHECK, entry["category"], entry["name"], entry["status"]))
    if result.get("runtime_error"):
        out["not_judged"].append("%s: %s: DCGM's runtime error: %s" % (node, CHECK, result["runtime_error"]))
    return dict(out, verdict=_verdict({entry["status"] for entry in out["tests"]}, bool(result.get("runtime_error"))))


def _verdict(statuses: set, runtime_error: bool) -> str:
    """fail where a test failed; not judged where DCGM stopped with a runtime error, a test's status was a word not known
    (not run), or nothing passed or warned (every test skipped); then warn, then pass. A skipped test alone does not
    stop a pass: level 3 skips its EUD test on most machines."""
    if "fail" in statuses:
        return "fail"
    if runtime_error or "not run" in statuses or not statuses & {"pass", "warn"}:
        return "not judged"
    return "warn" if "warn" in statuses else "pass"


def summary(judged: dict) -> str:
    """One line of a node's diagnostic: "node1: DCGM diag -r 2 (DCGM 4.2.3, driver 570.148.08): fail (4 pass, 2 fail)"."""
    counts = Counter(entry["status"] for entry in judged["tests"])
    about = ", ".join(part for part in ("DCGM %s" % judged["version"] if judged["version"] else None,
                                        "driver %s" % judged["driver"] if judged["driver"] else None) if part)
    return "%s: %s -r %s%s: %s%s" % (judged["node"], CHECK, judged["level"], " (%s)" % about if about else "", judged["verdict"],
                                     " (%s)" % ", ".join("%d %s" % (counts[s], s) for s in sorted(counts)) if counts else "")


def judge_all(results: dict, level: int | None, gpu_facts: dict) -> dict:
    """{nodes: {node: judge()}, findings, not_judged, lines} of every node's result ({node: registered result});
    level 0 (or None): nothing ran, said once. A node without GPUs (the task skipped it) is left out."""
    if not level:
        return {"nodes": {}, "findings": [], "not_judged": ["%s not run: burn_in_dcgm_level is 0" % CHECK], "lines": []}
    nodes, findings, notes = {}, [], []
    for node, result in sorted(results.items()):
        if not (gpu_facts.get(node) or {}).get("gpu_count"):
            continue
        judged = judge(node, result, int(level), gpu_facts.get(node))
        nodes[node] = judged
        findings += judged["findings"]
        notes += judged["not_judged"]
    return {"nodes": nodes, "findings": findings, "not_judged": notes, "lines": [summary(j) for j in nodes.values()]}
