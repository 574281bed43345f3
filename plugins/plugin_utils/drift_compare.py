# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Cross-node drift comparison and its rendering (a text table through tables.py, Markdown).

Pure functions, stdlib only. The caller flattens each node's facts into a flat dict of display keys
({"driver": "580.159.04", "cuda": "13.0", ...}); compare() lines the nodes up key by key.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from ansible_collections.trainops.cluster.plugins.plugin_utils.tables import cell_text, grid_line, render_table

SEVERITIES = ("critical", "warn", "ignore")
STATUS_OK = "ok"
STATUS_BY_SEVERITY = {"critical": "FAIL", "warn": "WARN", "ignore": "ignored"}

# A missing key and None are the same thing to the report: the node could not tell us the value.
MISSING_CELL = "-"
MISSING_TEXT = "no value"
EMPTY_CELL = "(empty)"

_MD_SPECIAL = "\\`*_|[]<>"


def format_value(value: object, missing: str = MISSING_CELL) -> str:
    """Display text of one fact value: lists joined by ", ", None as `missing`, "" as (empty)."""
    if value is None:
        return missing
    if isinstance(value, (list, tuple)):
        text = ", ".join(format_value(item, missing) for item in value)
    else:
        text = str(value)
    return text if text else EMPTY_CELL


def _normalize(value: Any) -> Any:
    # Tuples and lists must compare equal: facts may arrive as either depending on the caller.
    if isinstance(value, (list, tuple)):
        return [_normalize(item) for item in value]
    return value


def _check_severity(severity: object, what: str) -> str:
    text = str(severity).lower()
    if text not in SEVERITIES:
        raise ValueError("invalid severity {0!r} for {1}: expected one of {2}".format(severity, what, ", ".join(SEVERITIES)))
    return text


def _host_order(values_by_host: Mapping[str, Any], hosts_order: Iterable[str] | None) -> list[str]:
    # Hosts named in hosts_order but absent from the data are kept: every key then shows them as missing.
    hosts = list(dict.fromkeys(hosts_order or ()))
    hosts.extend(host for host in values_by_host if host not in hosts)
    return hosts


def _key_order(values_by_host: Mapping[str, Any], hosts: list[str]) -> list[str]:
    keys: dict[str, None] = {}
    for host in hosts:
        keys.update(dict.fromkeys(values_by_host.get(host) or {}))
    return list(keys)


def group_values(values: Mapping[str, Any], hosts: Sequence[str]) -> list[dict[str, Any]]:
    """[{"value", "hosts"}] per distinct value, most common first; equal counts keep host order."""
    groups: list[dict[str, Any]] = []
    for host in hosts:
        value = values[host]
        group = next((g for g in groups if g["value"] == value), None)
        if group is None:
            groups.append({"value": value, "hosts": [host]})
        else:
            group["hosts"].append(host)
    return sorted(groups, key=lambda g: -len(g["hosts"]))


def _has_majority(groups: list[dict[str, Any]]) -> bool:
    return len(groups) == 1 or (len(groups) > 1 and len(groups[0]["hosts"]) > len(groups[1]["hosts"]))


def compare_key(key: str, values: Mapping[str, Any], hosts: Sequence[str], severity: str) -> dict[str, Any]:
    """One report row: the values of `key` on every host and who is odd."""
    groups = group_values(values, hosts)
    consistent = len(groups) <= 1
    majority = _has_majority(groups)
    odd_hosts: list[str]
    if consistent:
        odd_hosts = []
    elif majority:
        odd_hosts = [host for host in hosts if host not in groups[0]["hosts"]]
    else:
        # No majority: every host differs from some other, so every host is highlighted.
        odd_hosts = list(hosts)
    return {
        "key": key,
        "values": dict(values),
        "consistent": consistent,
        "majority": groups[0]["value"] if majority else None,
        "odd_hosts": odd_hosts,
        "groups": groups,
        "severity": severity,
        "status": STATUS_OK if consistent else STATUS_BY_SEVERITY[severity],
    }


def describe_row(row: dict[str, Any]) -> str:
    """Human sentence naming the odd host(s), their value and the majority value."""
    groups = row["groups"]
    if _has_majority(groups):
        parts = ["{0} {1} {2}".format(", ".join(g["hosts"]), "has" if len(g["hosts"]) == 1 else "have", format_value(g["value"], MISSING_TEXT))
                 for g in groups[1:]]
        return "{0}: {1}, others {2}".format(row["key"], "; ".join(parts), format_value(groups[0]["value"], MISSING_TEXT))
    parts = ["{0} on {1}".format(format_value(g["value"], MISSING_TEXT), ", ".join(g["hosts"])) for g in groups]
    return "{0} differs: {1}".format(row["key"], "; ".join(parts))


def compare(values_by_host: Mapping[str, Any], policy: Mapping[str, Any] | None, default_severity: str = "warn",
            hosts_order: Iterable[str] | None = None) -> dict[str, Any]:
    """Compare flat per-host fact dicts key by key.

    values_by_host: {host: {key: value}}; policy: {key: "critical"|"warn"|"ignore"} (None for none);
    keys not in policy get default_severity. A key missing on a host counts as the value None.
    Returns {hosts, keys, rows, failed, errors, warnings}; failed is true when a critical key differs.
    """
    default_severity = _check_severity(default_severity, "default_severity")
    policy = dict((key, _check_severity(severity, key)) for key, severity in (policy or {}).items())
    hosts = _host_order(values_by_host, hosts_order)
    keys = _key_order(values_by_host, hosts)
    rows = []
    for key in keys:
        values = dict((host, _normalize((values_by_host.get(host) or {}).get(key))) for host in hosts)
        rows.append(compare_key(key, values, hosts, policy.get(key, default_severity)))
    errors = [describe_row(row) for row in rows if row["status"] == "FAIL"]
    warnings = [describe_row(row) for row in rows if row["status"] == "WARN"]
    return {"hosts": hosts, "keys": keys, "rows": rows, "failed": bool(errors), "errors": errors, "warnings": warnings}


def _drift_cells(comparison: dict[str, Any]) -> tuple[list[str], list[list[str]], list[tuple[int, int]]]:
    hosts = comparison["hosts"]
    headers = ["key"] + list(hosts) + ["status"]
    rows: list[list[str]] = []
    odd: list[tuple[int, int]] = []
    for r, row in enumerate(comparison["rows"]):
        rows.append([row["key"]] + [format_value(row["values"].get(host)) for host in hosts] + [row["status"]])
        odd.extend((r, 1 + hosts.index(host)) for host in row["odd_hosts"])
    return headers, rows, odd


def render_drift_table(comparison: dict[str, Any], marker: str = "*") -> str:
    """compare() result as a text table: one column per host, one row per key, then a status column."""
    headers, rows, odd = _drift_cells(comparison)
    table = render_table(headers, rows, odd, marker)
    if odd:
        table += "\n{0} = differs from the majority value (a row with no majority is marked on every host)".format(marker)
    return table


def _md_escape(text: str) -> str:
    return "".join("\\" + char if char in _MD_SPECIAL else char for char in text)


def _md_table(headers: list[str], rows: list[list[str]]) -> list[str]:
    # Padded like the text table so the raw file reads well too; 3 dashes is the Markdown minimum.
    widths = [max([3] + [len(line[c]) for line in [headers] + rows]) for c in range(len(headers))]
    lines = [grid_line(headers, widths), "| " + " | ".join("-" * w for w in widths) + " |"]
    lines.extend(grid_line(row, widths) for row in rows)
    return lines


def _md_list(title: str, items: list[str]) -> list[str]:
    return ["", "## " + title, ""] + (["- " + _md_escape(item) for item in items] or ["None."])


def render_markdown(comparison: dict[str, Any], title: str = "Cluster drift report") -> str:
    """compare() result as Markdown: summary line, table with odd cells in bold, then errors and warnings."""
    headers, rows, odd = _drift_cells(comparison)
    cells = [[_md_escape(cell_text(value)) for value in row] for row in rows]
    for r, c in odd:
        cells[r][c] = "**" + cells[r][c] + "**"
    summary = "**Result: {0}**: {1} critical difference(s), {2} warning(s) across {3} host(s) and {4} key(s).".format(
        "FAILED" if comparison["failed"] else "OK", len(comparison["errors"]), len(comparison["warnings"]),
        len(comparison["hosts"]), len(comparison["rows"]))
    lines = ["# " + _md_escape(title), "", summary, ""]
    lines += _md_table([_md_escape(h) for h in headers], cells)
    lines += _md_list("Errors", comparison["errors"]) + _md_list("Warnings", comparison["warnings"])
    return "\n".join(lines) + "\n"
