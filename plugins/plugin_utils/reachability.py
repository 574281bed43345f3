# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Turn per-node probe results into an N x N reachability matrix that names who cannot reach whom."""

from __future__ import annotations

from typing import Any


def summarize(results_by_source: dict[str, list[dict[str, Any]] | None], nodes: list[str], arrow: str = "->") -> dict[str, Any]:
    """Summarize probes run from every node.

    results_by_source: {source node: [{"target", "via", "ok", "error", ...}]} or {source: None} when the
    source could not run its probes (unreachable from the controller).
    nodes: node names in rank order; they label the rows (from) and columns (to).
    Returns {ok, probes, failures: [{from, to, via, error}], messages, headers, rows, local}; `local` counts the
    probes checked on the source without a connection (results with checked == "local").
    """
    failures: list[dict[str, Any]] = []
    messages: list[str] = []
    rows: list[list[str]] = []
    probes = local = 0
    for source in nodes:
        results = results_by_source.get(source)
        if results is None:
            messages.append("%s: not checked (the controller could not run the probes there)" % source)
            rows.append([source] + ["?"] * len(nodes))
            continue
        by_target: dict[str, list[dict[str, Any]]] = {}
        for result in results:
            probes += 1
            local += result.get("checked") == "local"
            by_target.setdefault(result["target"], []).append(result)
            if not result["ok"]:
                failures.append({"from": source, "to": result["target"], "via": result["via"], "error": result["error"]})
                messages.append("%s %s %s (%s): %s" % (source, arrow, result["target"], result["via"], result["error"]))
        rows.append([source] + [_cell(source, target, by_target.get(target)) for target in nodes])
    return {
        "ok": not failures and all(results_by_source.get(n) is not None for n in nodes),
        "probes": probes,
        "local": local,
        "failures": failures,
        "messages": messages,
        "headers": ["from \\ to"] + list(nodes),
        "rows": rows,
    }


def _cell(source: str, target: str, results: list[dict[str, Any]] | None) -> str:
    if source == target:
        return "-"
    if not results:
        return "?"
    failed = [str(r["via"]) for r in results if not r["ok"]]
    if failed:
        return "FAIL " + ",".join(failed)
    # ok*: checked on the source without logging in (the SSH mesh above its full size).
    return "ok*" if all(r.get("checked") == "local" for r in results) else "ok"
