# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import pytest

from ansible_collections.trainops.cluster.plugins.plugin_utils.drift_compare import (
    compare,
    format_value,
    render_drift_table,
    render_markdown,
)
from ansible_collections.trainops.cluster.plugins.plugin_utils.tables import render_table

NODE = {
    "driver": "580.159.04",
    "cuda": "13.0",
    "nccl (pip)": "2.28.9",
    "torch": "2.11.0",
    "gpus": "2x NVIDIA H200",
    "ib devices": "",
}


def nodes(**overrides):
    """Three identical nodes; overrides={host: {key: value}} changes some values (None deletes the key)."""
    result = {}
    for host in ("node1", "node2", "node3"):
        facts = dict(NODE)
        for key, value in overrides.get(host, {}).items():
            if value is None:
                del facts[key]
            else:
                facts[key] = value
        result[host] = facts
    return result


def row(comparison, key):
    return next(r for r in comparison["rows"] if r["key"] == key)


def test_all_consistent():
    c = compare(nodes(), {"driver": "critical"})
    assert c["hosts"] == ["node1", "node2", "node3"]
    assert c["keys"] == list(NODE)
    assert not c["failed"]
    assert c["errors"] == [] and c["warnings"] == []
    for r in c["rows"]:
        assert r["consistent"] and r["odd_hosts"] == [] and r["status"] == "ok"
    assert row(c, "driver")["majority"] == "580.159.04"
    assert row(c, "driver")["severity"] == "critical"
    assert row(c, "cuda")["severity"] == "warn"


def test_one_odd_node_critical_fails_and_names_it():
    c = compare(nodes(node2={"driver": "570.86.10"}), {"driver": "critical"})
    r = row(c, "driver")
    assert c["failed"]
    assert not r["consistent"]
    assert r["majority"] == "580.159.04"
    assert r["odd_hosts"] == ["node2"]
    assert r["status"] == "FAIL"
    assert c["errors"] == ["driver: node2 has 570.86.10, others 580.159.04"]
    assert c["warnings"] == []


def test_two_odd_values_grouped_by_value():
    data = nodes(node2={"cuda": "12.8"}, node3={"cuda": "12.8"})
    data["node4"] = dict(NODE, cuda="12.6")
    data["node5"] = dict(NODE)
    data["node6"] = dict(NODE)
    c = compare(data, {})
    r = row(c, "cuda")
    assert r["majority"] == "13.0"
    assert r["odd_hosts"] == ["node2", "node3", "node4"]
    assert c["warnings"] == ["cuda: node2, node3 have 12.8; node4 has 12.6, others 13.0"]


def test_tie_on_two_nodes_has_no_majority():
    data = {"node1": {"driver": "580.159.04"}, "node2": {"driver": "570.86.10"}}
    c = compare(data, {"driver": "critical"})
    r = row(c, "driver")
    assert c["failed"]
    assert r["majority"] is None
    assert r["odd_hosts"] == ["node1", "node2"]
    assert c["errors"] == ["driver differs: 580.159.04 on node1; 570.86.10 on node2"]


def test_tie_one_one_one():
    c = compare(nodes(node2={"torch": "2.10.0"}, node3={"torch": "2.9.1"}), {})
    assert row(c, "torch")["majority"] is None
    assert c["warnings"] == ["torch differs: 2.11.0 on node1; 2.10.0 on node2; 2.9.1 on node3"]


def test_tie_names_every_value_with_its_hosts():
    data = {"node1": {"driver": "a"}, "node2": {"driver": "b"}, "node3": {"driver": "a"}, "node4": {"driver": "b"}}
    c = compare(data, {"driver": "critical"})
    assert c["errors"] == ["driver differs: a on node1, node3; b on node2, node4"]


def test_key_missing_on_one_node():
    c = compare(nodes(node3={"nccl (pip)": None}), {"nccl (pip)": "critical"})
    r = row(c, "nccl (pip)")
    assert c["failed"]
    assert r["values"]["node3"] is None
    assert r["odd_hosts"] == ["node3"]
    assert c["errors"] == ["nccl (pip): node3 has no value, others 2.28.9"]
    assert "| - *" in render_drift_table(c)


def test_none_value_equals_missing_key():
    data = {"node1": {"torch": None}, "node2": {}}
    c = compare(data, {})
    assert row(c, "torch")["consistent"]


def test_key_missing_on_first_host_still_reported():
    data = {"node1": {"driver": "1"}, "node2": {"driver": "1", "nvcc": "13.0"}}
    c = compare(data, {})
    assert c["keys"] == ["driver", "nvcc"]
    assert c["warnings"] == ["nvcc differs: no value on node1; 13.0 on node2"]


def test_ignore_policy():
    c = compare(nodes(node1={"torch": "2.10.0"}), {"torch": "ignore"})
    r = row(c, "torch")
    assert not c["failed"]
    assert c["errors"] == [] and c["warnings"] == []
    assert not r["consistent"] and r["odd_hosts"] == ["node1"]
    assert r["status"] == "ignored"


def test_default_severity_ignore_and_critical():
    data = nodes(node1={"torch": "2.10.0"})
    assert compare(data, None, default_severity="ignore")["warnings"] == []
    assert compare(data, None, default_severity="critical")["failed"]
    assert compare(data, {"torch": "warn"}, default_severity="critical")["failed"] is False


def test_warn_only_difference_not_failed():
    c = compare(nodes(node3={"gpus": "1x NVIDIA H200"}), {"driver": "critical"})
    assert not c["failed"]
    assert c["errors"] == []
    assert c["warnings"] == ["gpus: node3 has 1x NVIDIA H200, others 2x NVIDIA H200"]
    assert row(c, "gpus")["status"] == "WARN"


def test_severity_is_case_insensitive_and_validated():
    assert compare(nodes(node1={"driver": "x"}), {"driver": "CRITICAL"})["failed"]
    with pytest.raises(ValueError, match="fatal"):
        compare(nodes(), {"driver": "fatal"})
    with pytest.raises(ValueError, match="default_severity"):
        compare(nodes(), {}, default_severity="error")


def test_list_values_compare_as_lists():
    ib = ["mlx5_0", "mlx5_1"]
    c = compare(nodes(node1={"ib devices": ib}, node2={"ib devices": tuple(ib)}, node3={"ib devices": ["mlx5_0"]}), {})
    r = row(c, "ib devices")
    assert r["majority"] == ib
    assert r["odd_hosts"] == ["node3"]
    assert c["warnings"] == ["ib devices: node3 has mlx5_0, others mlx5_0, mlx5_1"]
    assert "mlx5_0, mlx5_1" in render_drift_table(c)


def test_list_order_matters():
    c = compare({"a": {"k": [1, 2]}, "b": {"k": [2, 1]}}, {})
    assert not row(c, "k")["consistent"]


def test_numbers_and_strings():
    c = compare({"a": {"gpus": 2}, "b": {"gpus": 2}, "c": {"gpus": "2"}}, {})
    assert row(c, "gpus")["odd_hosts"] == ["c"]


def test_hosts_order_and_absent_host():
    data = nodes()
    c = compare(data, {"driver": "critical"}, hosts_order=["node3", "node9", "node3"])
    assert c["hosts"] == ["node3", "node9", "node1", "node2"]
    assert c["failed"]
    assert "driver: node9 has no value, others 580.159.04" in c["errors"]


def test_host_with_no_facts():
    c = compare({"node1": {"driver": "1"}, "node2": None, "node3": {"driver": "1"}}, {"driver": "critical"})
    assert c["errors"] == ["driver: node2 has no value, others 1"]


def test_empty_input():
    c = compare({}, {})
    assert c == {"hosts": [], "keys": [], "rows": [], "failed": False, "errors": [], "warnings": []}
    assert render_drift_table(c).splitlines()[1] == "| key | status |"


def test_single_host_is_consistent():
    c = compare({"node1": dict(NODE)}, {"driver": "critical"})
    assert not c["failed"] and all(r["consistent"] for r in c["rows"])


@pytest.mark.parametrize("value, text", [
    (None, "-"),
    ("", "(empty)"),
    ([], "(empty)"),
    (["a", "b"], "a, b"),
    (2, "2"),
    (13.0, "13.0"),
    ([1, None], "1, -"),
])
def test_format_value(value, text):
    assert format_value(value) == text


def test_render_table_alignment():
    table = render_table(["a", "longer header", "c"], [["1", "x", "yyyyyyyyyyyy"], ["22222", 3, None], ["only one"]])
    lines = table.splitlines()
    assert len(set(len(line) for line in lines)) == 1
    assert lines[0] == lines[2] == lines[-1] == "+----------+---------------+--------------+"
    assert lines[1] == "| a        | longer header | c            |"
    assert lines[4] == "| 22222    | 3             | None         |"
    assert lines[5] == "| only one |               |              |"


def test_render_table_highlight_and_marker():
    table = render_table(["from", "n1", "n2"], [["n1", "-", "ok"], ["n2", "FAIL", "-"]], highlight=[[1, 1]], marker="!")
    lines = table.splitlines()
    assert len(set(len(line) for line in lines)) == 1
    assert lines[4] == "| n2   | FAIL ! | -  |"
    assert "!" not in lines[3]


def test_render_table_newlines_and_empty():
    lines = render_table(["h"], [["a\nb"]]).splitlines()
    assert lines[3] == "| a b |"
    assert render_table([], []) == ""


def test_render_drift_table():
    c = compare(nodes(node2={"driver": "570.86.10"}, node3={"cuda": "12.8"}), {"driver": "critical"})
    lines = render_drift_table(c).splitlines()
    table, legend = lines[:-1], lines[-1]
    assert len(set(len(line) for line in table)) == 1
    assert table[1].split("|")[1:-1] == [" key        ", " node1          ", " node2          ", " node3          ", " status "]
    driver = [cell.strip() for cell in table[3].split("|")[1:-1]]
    assert driver == ["driver", "580.159.04", "570.86.10 *", "580.159.04", "FAIL"]
    cuda = [cell.strip() for cell in table[4].split("|")[1:-1]]
    assert cuda == ["cuda", "13.0", "13.0", "12.8 *", "WARN"]
    torch = [cell.strip() for cell in table[6].split("|")[1:-1]]
    assert torch == ["torch", "2.11.0", "2.11.0", "2.11.0", "ok"]
    ib = [cell.strip() for cell in table[8].split("|")[1:-1]]
    assert ib == ["ib devices", "(empty)", "(empty)", "(empty)", "ok"]
    assert legend.startswith("* = differs")
    assert "\x1b" not in render_drift_table(c)


def test_render_drift_table_no_legend_when_consistent():
    lines = render_drift_table(compare(nodes(), {})).splitlines()
    assert len(set(len(line) for line in lines)) == 1


def test_render_markdown_bolds_odd_cells():
    c = compare(nodes(node2={"driver": "570.86.10"}, node3={"ib devices": ["mlx5_0"]}), {"driver": "critical"})
    md = render_markdown(c, "Drift report")
    lines = md.splitlines()
    assert lines[0] == "# Drift report"
    assert "**Result: FAILED**" in lines[2]
    header = next(i for i, line in enumerate(lines) if line.startswith("| key"))
    assert [cell.strip() for cell in lines[header].split("|")[1:-1]] == ["key", "node1", "node2", "node3", "status"]
    assert set(lines[header + 1]) == set("| -")
    driver = [cell.strip() for cell in lines[header + 2].split("|")[1:-1]]
    assert driver == ["driver", "580.159.04", "**570.86.10**", "580.159.04", "FAIL"]
    ib = next(line for line in lines if line.startswith("| ib devices"))
    assert [cell.strip() for cell in ib.split("|")[1:-1]] == ["ib devices", "(empty)", "(empty)", "**mlx5\\_0**", "WARN"]
    assert md.count("**") == 2 * 3
    errors = lines.index("## Errors")
    warnings = lines.index("## Warnings")
    assert lines[errors + 2] == "- driver: node2 has 570.86.10, others 580.159.04"
    assert lines[warnings + 2] == "- ib devices: node3 has mlx5\\_0, others (empty)"
    assert md.endswith("\n")


def test_render_markdown_consistent_and_escaping():
    c = compare({"a": {"cmd": "x | y"}, "b": {"cmd": "x | y"}}, {})
    md = render_markdown(c, "T")
    assert "**Result: OK**" in md
    assert "| x \\| y |" in md
    assert md.count("None.") == 2
