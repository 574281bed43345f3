# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import json

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.trainops.cluster.plugins.filter.drift import FilterModule

FILTERS = FilterModule().filters()

DATA = {
    "node1": {"driver": "580.159.04", "cuda": "13.0", "ib devices": ["mlx5_0", "mlx5_1"]},
    "node2": {"driver": "570.86.10", "cuda": "13.0", "ib devices": ["mlx5_0", "mlx5_1"]},
    "node3": {"driver": "580.159.04", "cuda": "13.0"},
}
POLICY = {"driver": "critical"}


def test_filter_names():
    assert sorted(FILTERS) == ["drift_compare", "drift_markdown", "drift_table", "drift_values"]


def test_drift_compare():
    c = FILTERS["drift_compare"](DATA, POLICY)
    assert c["failed"]
    assert c["errors"] == ["driver: node2 has 570.86.10, others 580.159.04"]
    assert c["warnings"] == ["ib devices: node3 has no value, others mlx5_0, mlx5_1"]
    # The result is written as the JSON report.
    assert json.loads(json.dumps(c)) == c


def test_drift_compare_defaults_and_order():
    c = FILTERS["drift_compare"](DATA, hosts_order=["node3"], default_severity="ignore")
    assert c["hosts"] == ["node3", "node1", "node2"]
    assert not c["failed"] and c["warnings"] == []


@pytest.mark.parametrize("args, match", [
    ((["node1"], POLICY), "must be a dictionary"),
    (({"node1": "580"}, POLICY), "values of host node1"),
    ((DATA, ["driver"]), "policy"),
    ((DATA, {"driver": "fatal"}), "invalid severity"),
    ((DATA, POLICY, "error"), "default_severity"),
])
def test_drift_compare_errors(args, match):
    with pytest.raises(AnsibleFilterError, match=match):
        FILTERS["drift_compare"](*args)


def test_drift_table_and_markdown():
    c = FILTERS["drift_compare"](DATA, POLICY)
    table = FILTERS["drift_table"](c)
    assert "570.86.10 *" in table
    assert "570.86.10 !" in FILTERS["drift_table"](c, marker="!")
    md = FILTERS["drift_markdown"](c, title="Cluster X")
    assert md.startswith("# Cluster X\n")
    assert "**570.86.10**" in md
    assert FILTERS["drift_markdown"](c).startswith("# Cluster drift report\n")


@pytest.mark.parametrize("name", ["drift_table", "drift_markdown"])
def test_render_filters_reject_other_input(name):
    with pytest.raises(AnsibleFilterError, match="drift_compare"):
        FILTERS[name]({"rows": []})
    with pytest.raises(AnsibleFilterError, match="dictionary"):
        FILTERS[name]("text")
