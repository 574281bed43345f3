# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The acceptance record (verify.yml -e verify_acceptance=true): one table a node of every check that ran on it, its
figure, the threshold that applied, pass or fail, and the date; what a renter hands the provider to get a node
replaced. It judges nothing anew: it gathers the verdicts of GPU health (gpu_facts, plugin_utils/gpu_health.py), the
burn-in (burn_in_result, DCGM's diagnostic among it) and the ladder's runs that the node took part in (verify_result).

Controller side: a pure function, used by the verify role (filter acceptance_record).
"""

from __future__ import annotations

from typing import Any

from ansible_collections.trainops.cluster.plugins.plugin_utils import burn_in as burn, dcgm_diag, gpu_health


def _check(check: str, device: str | None, figure: object, threshold: str, passed: bool | None) -> dict:
    return {"check": check, "device": device, "figure": figure, "threshold": threshold,
            "result": {True: "pass", False: "fail", None: "not judged"}[passed]}


def _health(facts: dict) -> list:
    out = []
    for gpu in facts.get("gpus") or []:
        device = "GPU%s" % gpu.get("index")
        problems = gpu_health.problems(gpu)
        for problem in problems:
            out.append(_check("GPU health: %s" % problem["what"], device, problem["figure"], problem["threshold"],
                              problem["status"] != "fail"))
        if not problems:
            out.append(_check("GPU health", device, "no ECC, row remap, clock or link problem", "none (docs/gpu-health.md)", True))
    return out


def _burn_in(node: str, result: dict) -> list:
    findings: dict[tuple[Any, Any], list[dict]] = {}
    # DCGM's findings are its own rows (_dcgm).
    for finding in (f for f in result.get("findings") or [] if not f["what"].startswith(dcgm_diag.CHECK)):
        findings.setdefault((finding.get("node"), finding.get("gpu")), []).append(finding)
    fraction = result.get("outlier_fraction")
    peers = " and within %d %% of its model's median" % round(100 * fraction) if fraction is not None else ""
    out = []
    rows = [row for row in result.get("rows") or [] if row.get("node") == node]
    for row in rows:
        device = burn.device_name(row)
        mine = findings.get((node, row.get("index")), [])
        compared = (row.get("peers") or 0) > 1
        for figure, _key, label, unit in burn.FIGURES:
            if row.get(figure) is None:
                continue
            share = (row.get("share") or {}).get(figure)
            failed = [f for f in mine if f["what"] in ("%s below its bound" % label, "%s below its peers'" % label)
                      or figure == "clocks" and f["what"] == burn.HELD]
            bound = burn.threshold(row, figure)
            if failed:
                threshold, passed = failed[0]["threshold"], False
            elif bound or compared:
                threshold, passed = (bound or "its peers' median") + (peers if compared else " (no peers of its model)"), True
            else:
                threshold, passed = "no specification for its model and no peers", None
            figure_text = "%s%s" % (row[figure], " (%d %%)" % round(100 * share) if share is not None else "")
            out.append(_check("burn-in: %s %s" % (label, unit), device, figure_text, threshold, passed))
        wrong = [f for f in mine if f["what"].startswith("GEMM result") or f["what"] == "the burn-in failed on it"]
        out.append(_check("burn-in: result", device, wrong[0]["figure"] if wrong else (row.get("sha256") or "-")[:12],
                          "the same as its repeat and its peers'", not wrong))
    for finding in findings.get((node, None), []):
        out.append(_check("burn-in: %s" % finding["what"], None, finding["figure"], finding["threshold"], False))
    if not rows and not findings.get((node, None)):
        out.append(_check("burn-in", None, "did not run on this node", "a burn-in (burn_in_cpu for nodes without GPUs)", None))
    return out


# The worst of a test's statuses on a node names the row: a test that failed on one GPU failed.
# A GPU without a result (not run, skipped) outranks one that passed: a test is passed only where every GPU passed it.
_WORST = ("fail", "warn", "not run", "skip", "pass")


def _dcgm(node: str, result: dict) -> list:
    """A row per DCGM test that ran on the node (its worst GPU's status, those GPUs, DCGM's warning), or one not
    judged row saying why there is none (no dcgmi, no diagnostic); nothing where the burn-in had no DCGM part."""
    judged = (result.get("dcgm") or {}).get(node)
    if not judged:
        return []
    threshold = "Pass at dcgmi diag -r %s" % judged["level"]
    tests: dict[tuple[str, str], list[dict]] = {}
    for entry in judged["tests"]:
        tests.setdefault((entry["category"], entry["name"]), []).append(entry)
    out = []
    for (category, name), entries in tests.items():
        worst = min((e["status"] for e in entries), key=_WORST.index)
        mine = [e for e in entries if e["status"] == worst]
        devices = ", ".join("GPU%d" % g for e in mine for g in e["gpus"] or []) or None
        figure = "; ".join(w for e in mine for w in e["warnings"]) or worst
        passed = {"fail": False, "warn": True, "pass": True}.get(worst)
        out.append(_check("%s: %s / %s" % (dcgm_diag.CHECK, category, name), devices, figure if worst != "warn" else "warn: " + figure,
                          threshold, passed))
    if judged["verdict"] == "not judged":
        # No diagnostic (no dcgmi, no nv-hostengine), or tests that DCGM did not judge (its runtime error, a status word
        # not known): said, not passed.
        out.append(_check(dcgm_diag.CHECK, None, "; ".join(judged["not_judged"]) or "not judged", threshold, None))
    return out


# What a run without a busbw threshold is held to.
_NO_FIGURE = {"network": "every cluster port open between the nodes",
              # The finding of a slow all-nodes rung's bisection: its rounds' runs carry their own thresholds.
              "bisect": "every half and pair of the all-nodes rung at its threshold"}


def _ladder(node: str, verdicts: list) -> list:
    out = []
    for verdict in verdicts or []:
        for run in verdict.get("runs") or []:
            hosts = run.get("hosts") or []
            if node not in hosts or verdict.get("passed") is None and run.get("passed") is None:
                continue
            with_ = "" if hosts == [node] else " (with %s)" % ", ".join(h for h in hosts if h != node)
            figure = ("busbw %s GB/s" % run["busbw_gbps"] if run.get("busbw_gbps") is not None
                      else "; ".join(run.get("reasons") or []) or run.get("verdict") or "-")
            threshold = ("busbw >= %s GB/s" % run["threshold_gbps"] if run.get("threshold_gbps") is not None
                         else run.get("not_judged") or _NO_FIGURE.get(verdict.get("rung"), "every rank, 0 wrong values"))
            passed = run.get("passed") if run.get("verdict") != "not judged" else None
            out.append(_check("ladder: %s%s" % (verdict.get("label"), with_), None, figure, threshold, passed))
    return out


def record(nodes: list, gpu_facts: dict, burn_in: dict | None, ladder: list | None, date: str) -> dict:
    """{date, passed, nodes: {node: {passed, checks: [{check, device, figure, threshold, result}]}}, rows (the checks as
    a table: [node, check, device, figure, threshold, result])}: a node passes when no check of it failed and one
    passed (a check not judged is said, and fails nothing; a node with nothing judged is null, and so is the record)."""
    out: dict[str, dict[str, Any]] = {}
    for node in nodes:
        checks = _health(gpu_facts.get(node) or {}) + _burn_in(node, burn_in or {}) + _dcgm(node, burn_in or {}) + _ladder(node, ladder or [])
        results = {c["result"] for c in checks}
        # Nothing judged on a node is no pass.
        out[node] = {"passed": False if "fail" in results else True if "pass" in results else None, "checks": checks}
    rows = [[node, c["check"], c["device"] or "-", str(c["figure"]), c["threshold"], c["result"]] for node in nodes for c in out[node]["checks"]]
    verdicts = [n["passed"] for n in out.values()]
    passed = False if False in verdicts else None if None in verdicts or not verdicts else True
    return {"date": date, "passed": passed, "nodes": out, "rows": rows}
