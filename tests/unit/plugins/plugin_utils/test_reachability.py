# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
from ansible_collections.trainops.cluster.plugins.plugin_utils.reachability import summarize

NODES = ["node1", "node2", "node3"]


def ok(target, via="name"):
    return {"target": target, "via": via, "ok": True, "error": None}


def bad(target, via, error):
    return {"target": target, "via": via, "ok": False, "error": error}


def test_all_reachable():
    results = {n: [ok(t) for t in NODES if t != n] for n in NODES}
    s = summarize(results, NODES)
    assert s["ok"] and s["probes"] == 6 and s["failures"] == []
    assert s["headers"] == ["from \\ to", "node1", "node2", "node3"]
    assert s["rows"][0] == ["node1", "-", "ok", "ok"]


def test_failed_pair_is_named():
    results = {"node1": [ok("node2"), ok("node3")], "node2": [ok("node1"), ok("node3")],
               "node3": [bad("node1", "name", "connection timed out"), ok("node1", "ip"), ok("node2")]}
    s = summarize(results, NODES, arrow="→")
    assert not s["ok"]
    assert s["failures"] == [{"from": "node3", "to": "node1", "via": "name", "error": "connection timed out"}]
    assert s["messages"] == ["node3 → node1 (name): connection timed out"]
    assert s["rows"][2] == ["node3", "FAIL name", "ok", "-"]


def test_unreachable_source_is_reported_not_ok():
    results = {"node1": [ok("node2"), ok("node3")], "node2": [ok("node1"), ok("node3")], "node3": None}
    s = summarize(results, NODES)
    assert not s["ok"]
    assert s["messages"] == ["node3: not checked (the controller could not run the probes there)"]
    assert s["rows"][2] == ["node3", "?", "?", "?"]
    assert s["rows"][0][3] == "ok"


def test_pairs_checked_locally_are_marked_and_counted():
    results = {n: [ok(t) for t in NODES if t != n] for n in NODES}
    results["node2"][1]["checked"] = "local"  # node2 -> node3 without logging in
    s = summarize(results, NODES)
    assert s["ok"] and s["local"] == 1
    assert s["rows"][1] == ["node2", "ok", "-", "ok*"]
