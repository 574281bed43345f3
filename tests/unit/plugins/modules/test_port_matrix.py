# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""port_matrix end to end: the module run as two processes, two fake nodes on loopback addresses, probing each other."""

from __future__ import annotations

import json
import time

import pytest

from ansible_collections.trainops.cluster.plugins.plugin_utils.reachability import summarize
from ansible_collections.trainops.cluster.plugins.modules import port_matrix
import helpers.modules
from helpers.sockets import filtered, free_block, free_ports, serving

NODES = [{"host": "node1", "short": "node1", "cluster_ip": "127.0.0.2", "rank": 0},
         {"host": "node2", "short": "node2", "cluster_ip": "127.0.0.3", "rank": 1},
         {"host": "node3", "short": "node3", "cluster_ip": "127.0.0.4", "rank": 2}]


def run_module(capsys, **args):
    return helpers.modules.run_module(port_matrix, capsys, **args)


def test_two_nodes_probe_each_other_at_once(tmp_path):
    """node1 and node2 run the module at the same time; node3 does not run it: one of its ports drops SYNs."""
    p_rdzv, p_served, p_filtered = sorted(free_ports(3))
    # The module probes a range's two ends and its middle; the block must not take a port picked above (CI once drew
    # 24081 twice).
    low, middle, high = free_block(3, avoid=(p_rdzv, p_served, p_filtered))
    window, connect_timeout = 3, 1.0
    spec = [p_rdzv, str(p_served), p_filtered, "%d-%d" % (low, high)]
    with serving("127.0.0.3", p_served), filtered("127.0.0.4", p_filtered):
        start = time.monotonic()
        procs = {name: helpers.modules.start_module(port_matrix, tmp_path / name, nodes=NODES, self=name, ports=spec, window=window,
                                                    connect_timeout=connect_timeout)
                 for name in ("node1", "node2")}
        out = {}
        for name, proc in procs.items():
            stdout, stderr = proc.communicate(timeout=window + connect_timeout + 10)
            assert proc.returncode == 0, stderr
            out[name] = json.loads(stdout)
        wall = time.monotonic() - start
    assert wall < window + connect_timeout + 3

    probed = [p_rdzv, p_served, p_filtered, low, middle, high]
    for name, address in (("node1", "127.0.0.2"), ("node2", "127.0.0.3")):
        result = out[name]
        assert result["changed"] is False and "failed" not in result
        assert result["ports"] == sorted(probed)
        assert result["bind_address"] == address
        assert window - 0.1 < result["seconds"] < window + 1.5
        assert [r["target"] for r in result["results"]] == [n for n in ("node1", "node2", "node3") if n != name for dummy in probed]
        for r in result["results"]:
            assert set(r) == {"target", "via", "port", "address", "ok", "error", "seconds"}
            assert r["via"] == str(r["port"])
    assert {item["port"]: item["state"] for item in out["node2"]["listeners"]}[p_served] == "served"
    assert all(item["state"] == "listening" and item["error"] is None for item in out["node1"]["listeners"])

    def outcome(source, target, port):
        [r] = [r for r in out[source]["results"] if r["target"] == target and r["port"] == port]
        return r["ok"], r["error"]

    for source, target in (("node1", "node2"), ("node2", "node1")):
        assert all(outcome(source, target, port) == (True, None) for port in probed)
        assert outcome(source, "node3", p_filtered) == (False, "timed out")
        assert outcome(source, "node3", p_rdzv) == (False, "refused")
        assert outcome(source, "node3", p_served) == (False, "refused")
        assert out[source]["failed_probes"] == sum(not r["ok"] for r in out[source]["results"]) == len(probed)

    matrix = summarize({name: out[name]["results"] for name in out}, ["node1", "node2", "node3"])
    assert matrix["rows"][0][:3] == ["node1", "-", "ok"] and matrix["rows"][1][:3] == ["node2", "ok", "-"]
    assert "node1 -> node3 (%s): timed out" % p_filtered in matrix["messages"]
    assert "node2 -> node3 (%s): refused" % p_rdzv in matrix["messages"]
    assert matrix["rows"][2] == ["node3", "?", "?", "?"]


def test_check_mode_single_node_reports_listeners_at_once(capsys):
    port = free_ports(1)[0]
    with serving("127.0.0.2", port):
        start = time.monotonic()
        result = run_module(capsys, nodes=NODES[:1], self="node1", ports=[port, str(port + 1)], _ansible_check_mode=True)
    assert time.monotonic() - start < 3.0
    assert result["changed"] is False and result["results"] == [] and result["failed_probes"] == 0
    assert result["listeners"] == [{"port": port, "state": "served", "error": None},
                                   {"port": port + 1, "state": "listening", "error": None}]
    assert result["bind_address"] == "127.0.0.2"


def test_bind_address_override_failure_is_reported(capsys):
    port = free_ports(1)[0]
    result = run_module(capsys, nodes=NODES[:1], self="node1", ports=[port], bind_address="192.0.2.123")
    assert result["listeners"] == [{"port": port, "state": "failed",
                                    "error": "cannot listen on 192.0.2.123:%s: address not available on this host" % port}]


@pytest.mark.parametrize("args, msg", [
    (dict(self="node9"), "self 'node9' is not the host of any of nodes"),
    (dict(ports=[29500, "70000"]), "port '70000' is out of 1-65535 or its range is reversed"),
    (dict(ports=["29500:29510"]), "port '29500:29510' is neither a number nor a range LOW-HIGH"),
    (dict(window=2, connect_timeout=2), "connect_timeout must be above 0 and below window (2 s)"),
    (dict(nodes=[{"host": "node1"}]), "nodes need host and cluster_ip: {'host': 'node1'}"),
])
def test_bad_arguments_fail_before_listening(capsys, args, msg):
    start = time.monotonic()
    result = run_module(capsys, **dict(dict(nodes=NODES, self="node1", ports=[29500]), **args))
    assert result["failed"] is True
    assert result["msg"] == msg
    assert time.monotonic() - start < 2.0
