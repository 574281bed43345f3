# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""ports: pure helpers with fakes, listeners and probes for real on loopback addresses (127.0.0.2-5 need no setup on Linux)."""

from __future__ import annotations

import errno
import socket
import threading
import time

import pytest

from ansible_collections.trainops.cluster.plugins.module_utils import ports
from ansible_collections.trainops.cluster.plugins.plugin_utils.reachability import summarize
from helpers.sockets import filtered, free_ports, serving

NODES = [{"host": "node1", "short": "node1", "cluster_ip": "127.0.0.2"},
         {"host": "node2", "short": "node2", "cluster_ip": "127.0.0.3"},
         {"host": "node3", "short": "node3", "cluster_ip": "127.0.0.4"}]


@pytest.mark.parametrize("spec, expected", [
    ([29500], [29500]),
    (["29500", " 29400 "], [29400, 29500]),
    ([29500, "29500-29500", "29500"], [29500]),
    (["40000-40001"], [40000, 40001]),
    (["40000-40100", 29500], [29500, 40000, 40050, 40100]),
    (["1-65535"], [1, 32768, 65535]),
    ([], []),
])
def test_expand_ports(spec, expected):
    assert ports.expand_ports(spec) == expected


@pytest.mark.parametrize("item", [0, 65536, "29501-29500", "abc", "tcp/29500", "29500-", "-29500", "1-2-3", True, -1, 2.5, None])
def test_expand_ports_rejects(item):
    with pytest.raises(ValueError, match="port"):
        ports.expand_ports([29500, item])


def test_a_range_is_never_probed_port_by_port():
    assert len(ports.sample_range(1024, 65535)) == 3
    assert ports.sample_range(29500, 29502) == [29500, 29501, 29502]


@pytest.mark.parametrize("exc, reason", [
    (ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"), "refused"),
    (socket.timeout("timed out"), "timed out"),
    (TimeoutError(errno.ETIMEDOUT, "Connection timed out"), "timed out"),
    (OSError(errno.ETIMEDOUT, "Connection timed out"), "timed out"),
    (OSError(errno.EHOSTUNREACH, "No route to host"), "no route to host"),
    (OSError(errno.ENETUNREACH, "Network is unreachable"), "network unreachable"),
    (socket.gaierror(socket.EAI_NONAME, "Name or service not known"), "name does not resolve"),
    (PermissionError(errno.EACCES, "Permission denied"), "permission denied"),
    (PermissionError(errno.EPERM, "Operation not permitted"), "operation not permitted"),
    (OSError(errno.EADDRNOTAVAIL, "Cannot assign requested address"), "address not available on this host"),
    (BrokenPipeError(errno.EPIPE, "Broken pipe"), "broken pipe"),
    (OSError("weird"), "weird"),
])
def test_classify_error(exc, reason):
    assert ports.classify_error(exc) == reason


def raised_by(address, port, timeout):
    try:
        ports.connect(address, port, timeout)
    except OSError as exc:
        return exc
    return None


def test_classify_real_refused_and_timed_out():
    port = free_ports(1)[0]
    assert ports.classify_error(raised_by("127.0.0.2", port, 1)) == "refused"
    with filtered("127.0.0.5", port):
        start = time.monotonic()
        assert ports.classify_error(raised_by("127.0.0.5", port, 0.5)) == "timed out"
        assert 0.4 < time.monotonic() - start < 2.0


def test_find_node_and_probes_for():
    assert ports.find_node(NODES, "node2") is NODES[1]
    assert ports.find_node(NODES, "127.0.0.3") is None
    probes = ports.probes_for(NODES, "node2", [29500, 40000])
    assert probes == [
        {"target": "node1", "via": "29500", "port": 29500, "address": "127.0.0.2"},
        {"target": "node1", "via": "40000", "port": 40000, "address": "127.0.0.2"},
        {"target": "node3", "via": "29500", "port": 29500, "address": "127.0.0.4"},
        {"target": "node3", "via": "40000", "port": 40000, "address": "127.0.0.4"}]


def test_listener_accepts_until_its_deadline_then_closes():
    port = free_ports(1)[0]
    sock, listener = ports.open_listener("127.0.0.2", port)
    assert listener == {"port": port, "state": "listening", "error": None}
    start = time.monotonic()
    acceptor = threading.Thread(target=ports.accept_until, args=([sock], start + 1.0))
    acceptor.start()
    client = socket.create_connection(("127.0.0.2", port), timeout=1)
    client.settimeout(1)
    assert client.recv(1) == b""  # accepted and closed at once by the listener
    client.close()
    acceptor.join(2)
    assert not acceptor.is_alive()
    assert 0.9 < time.monotonic() - start < 2.5
    assert sock.fileno() == -1
    assert ports.classify_error(raised_by("127.0.0.2", port, 1)) == "refused"


def connect_from(source, address, port):
    client = socket.create_connection((address, port), timeout=1, source_address=(source, 0))
    client.close()


def test_listeners_close_once_every_peer_has_connected_to_each():
    port_a, port_b = free_ports(2)
    socks = [ports.open_listener("127.0.0.2", port)[0] for port in (port_a, port_b)]
    start = time.monotonic()
    acceptor = threading.Thread(target=ports.accept_until, args=(socks, start + 10, ["127.0.0.3", "::ffff:127.0.0.4"]))
    acceptor.start()
    for source, port in (("127.0.0.3", port_a), ("127.0.0.4", port_a), ("127.0.0.3", port_b)):
        connect_from(source, "127.0.0.2", port)
    time.sleep(0.3)
    assert acceptor.is_alive()  # 127.0.0.4 has not connected to port_b yet
    connect_from("127.0.0.4", "127.0.0.2", port_b)
    acceptor.join(5)
    assert not acceptor.is_alive()
    assert time.monotonic() - start < 5  # well before the 10 s deadline, with room for a loaded machine
    assert all(sock.fileno() == -1 for sock in socks)


def test_a_peer_that_never_connects_keeps_the_listener_until_the_deadline():
    port = free_ports(1)[0]
    sock = ports.open_listener("127.0.0.2", port)[0]
    start = time.monotonic()
    acceptor = threading.Thread(target=ports.accept_until, args=([sock], start + 1.0, ["127.0.0.3", "127.0.0.4"]))
    acceptor.start()
    connect_from("127.0.0.3", "127.0.0.2", port)
    connect_from("127.0.0.5", "127.0.0.2", port)  # not a peer: counts for nobody
    acceptor.join(5)
    assert not acceptor.is_alive() and 0.9 < time.monotonic() - start < 3  # the deadline, not a wait for the absent peer


@pytest.mark.parametrize("text, expected", [
    ("10.0.0.1", "10.0.0.1"), ("::ffff:10.0.0.1", "10.0.0.1"), ("fe80::1%eth0", "fe80::1"), ("node1", "node1")])
def test_same_address(text, expected):
    assert str(ports.same_address(text)) == expected


def test_accept_until_without_listeners_returns_at_once():
    start = time.monotonic()
    ports.accept_until([], start + 5)
    assert time.monotonic() - start < 2.5  # well before the deadline, with room for a loaded machine


def test_port_in_use_is_served():
    port = free_ports(1)[0]
    with serving("127.0.0.2", port):
        sock, listener = ports.open_listener("127.0.0.2", port)
        assert sock is None
        assert listener == {"port": port, "state": "served", "error": None}
    # A service on another address of the same port does not serve ours.
    with serving("127.0.0.3", port):
        sock, listener = ports.open_listener("127.0.0.2", port)
        assert listener["state"] == "listening"
        sock.close()


def test_listener_failures_are_reported():
    port = free_ports(1)[0]
    sock, listener = ports.open_listener("192.0.2.123", port)
    assert sock is None
    assert listener == {"port": port, "state": "failed", "error": "cannot listen on 192.0.2.123:%s: address not available on this host" % port}

    made = []

    class Unprivileged(socket.socket):
        def bind(self, address):
            made.append(self)
            raise PermissionError(errno.EACCES, "Permission denied")

    sock, listener = ports.open_listener("127.0.0.2", 80, socket_factory=Unprivileged)
    assert sock is None
    assert listener == {"port": 80, "state": "failed", "error": "cannot listen on 127.0.0.2:80: permission denied"}
    assert made[0].fileno() == -1


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def fake_connect(clock, outcomes, calls):
    """A connect that takes 0.01 s and then raises the next outcome (None: connected)."""
    def connect(address, port, timeout):
        calls.append((address, port, timeout))
        clock.now += 0.01
        outcome = outcomes.pop(0) if outcomes else ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")
        if outcome is not None:
            raise outcome
    return connect


ITEM = {"target": "node1", "via": "29500", "port": 29500, "address": "127.0.0.2"}


def run_probe(outcomes, deadline_in=6.0, late=0.0):
    clock, calls = FakeClock(), []
    clock.now += late
    result = ports.probe(ITEM, 2.0, 100.0 + deadline_in, connect=fake_connect(clock, outcomes, calls), clock=clock, sleep=clock.sleep)
    return result, calls


def test_probe_retries_refused_until_the_peer_listens():
    refused = ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")
    result, calls = run_probe([refused, refused, refused, None])
    assert result == dict(ITEM, ok=True, error=None, seconds=0.79)
    assert calls == [("127.0.0.2", 29500, 2.0)] * 4


def test_probe_gives_up_on_refused_at_the_deadline():
    result, calls = run_probe([], deadline_in=6.0)
    assert result["ok"] is False and result["error"] == "refused"
    # One attempt every 0.26 s (0.01 s connect, 0.25 s wait), the last at 5.98 s, 6 s after the start.
    assert len(calls) == 24
    assert result["seconds"] == 5.99


@pytest.mark.parametrize("exc, reason", [
    (socket.timeout("timed out"), "timed out"),
    (OSError(errno.EHOSTUNREACH, "No route to host"), "no route to host"),
])
def test_probe_does_not_retry_other_failures(exc, reason):
    result, calls = run_probe([exc])
    assert (result["ok"], result["error"], len(calls)) == (False, reason, 1)


def test_probe_that_finds_no_thread_before_the_window_closes_is_not_started():
    result, calls = run_probe([None], deadline_in=6.0, late=6.5)
    assert calls == []
    assert result["ok"] is False and result["error"].startswith("not probed: no free thread")


def run_nodes(names, ports_, window, connect_timeout=1.0, delays=None):
    """run_matrix on several fake nodes at once, each on its own thread after its delay; returns {name: (result, wall)}."""
    out = {}

    def node(name, delay):
        time.sleep(delay)
        start = time.monotonic()
        me = ports.find_node(NODES, name)
        result = ports.run_matrix(NODES, name, ports_, me["cluster_ip"], connect_timeout, window, 64)
        out[name] = (result, time.monotonic() - start)

    threads = [threading.Thread(target=node, args=(name, (delays or {}).get(name, 0))) for name in names]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(window + connect_timeout + 5)
    return out


def test_two_nodes_reach_each_other_a_third_is_down_or_filtered():
    """node1 and node2 run the probes (node2 starts 1 s late); node3 never does: one port drops SYNs, the others refuse."""
    p_served, p_filtered, p_plain = free_ports(3)
    window, connect_timeout = 3, 1.0
    late = {}

    def probe_node1_late():
        # node1 must still listen shortly before its window ends.
        time.sleep(window - 0.6)
        late["error"] = raised_by("127.0.0.2", p_plain, 0.5)

    with serving("127.0.0.3", p_served), filtered("127.0.0.4", p_filtered):
        prober = threading.Thread(target=probe_node1_late)
        prober.start()
        start = time.monotonic()
        out = run_nodes(["node1", "node2"], sorted([p_served, p_filtered, p_plain]), window, connect_timeout, delays={"node2": 1.0})
        wall = time.monotonic() - start
        prober.join()
    assert late["error"] is None
    assert ports.classify_error(raised_by("127.0.0.2", p_plain, 0.5)) == "refused"  # closed after the window

    assert wall < 1.0 + window + connect_timeout + 1.5
    for name in ("node1", "node2"):
        result, seconds = out[name]
        assert window - 0.1 < seconds < window + 0.5
        assert result["seconds"] == pytest.approx(seconds, abs=0.05)
        assert result["failed_probes"] == 3

    listeners = {name: {item["port"]: item["state"] for item in out[name][0]["listeners"]} for name in out}
    assert listeners == {"node1": {p_served: "listening", p_filtered: "listening", p_plain: "listening"},
                         "node2": {p_served: "served", p_filtered: "listening", p_plain: "listening"}}

    by_pair = {(name, r["target"], r["port"]): r for name in out for r in out[name][0]["results"]}
    assert len(by_pair) == 12
    for source, target in (("node1", "node2"), ("node2", "node1")):
        for port in (p_served, p_filtered, p_plain):
            assert by_pair[(source, target, port)]["ok"], by_pair[(source, target, port)]
    # node1 started first: it found node2's listeners refused until node2 came up about 1 s later.
    assert 0.7 < by_pair[("node1", "node2", p_plain)]["seconds"] < 1.6
    assert by_pair[("node2", "node1", p_plain)]["seconds"] < 0.5  # at the first try, not after a retry
    for source in ("node1", "node2"):
        timed_out = by_pair[(source, "node3", p_filtered)]
        assert (timed_out["ok"], timed_out["error"]) == (False, "timed out")
        assert connect_timeout - 0.05 < timed_out["seconds"] < connect_timeout + 0.3
        for port in (p_served, p_plain):
            refused = by_pair[(source, "node3", port)]
            assert (refused["ok"], refused["error"]) == (False, "refused")
            # retried until connect_timeout before the window closed
            assert window - connect_timeout - 0.5 < refused["seconds"] < window - connect_timeout + 0.1

    matrix = summarize({name: out[name][0]["results"] for name in out}, ["node1", "node2", "node3"])
    assert matrix["rows"][:2] == [
        ["node1", "-", "ok", "FAIL %s,%s,%s" % tuple(sorted([p_served, p_filtered, p_plain]))],
        ["node2", "ok", "-", "FAIL %s,%s,%s" % tuple(sorted([p_served, p_filtered, p_plain]))]]
    assert "node2 -> node3 (%s): timed out" % p_filtered in matrix["messages"]
    assert "node1 -> node3 (%s): refused" % p_plain in matrix["messages"]


def test_a_healthy_cluster_does_not_wait_for_the_window():
    """Every node probes from its own cluster_ip, so each listener knows when all its peers have been."""
    test_ports = free_ports(3)
    out = run_nodes(["node1", "node2", "node3"], test_ports, 8, delays={"node3": 0.5})
    for name, (result, seconds) in out.items():
        assert result["failed_probes"] == 0, result["results"]
        assert seconds < 5, (name, seconds)  # well before the 8 s window, with room for a loaded machine


def test_a_single_node_does_not_wait_for_the_window():
    port = free_ports(1)[0]
    with serving("127.0.0.2", port):
        start = time.monotonic()
        result = ports.run_matrix(NODES[:1], "node1", [port, port + 1], "127.0.0.2", 1.0, 8, 64)
    assert time.monotonic() - start < 4  # well before the 8 s window
    assert result["results"] == [] and result["failed_probes"] == 0
    assert [item["state"] for item in result["listeners"]] == ["served", "listening"]


def test_port_held_by_a_socket_that_does_not_listen_is_retried_then_failed():
    holder = socket.socket()
    holder.bind(("127.0.0.2", 0))  # bound, never listening: binds to the port fail, connections are refused
    port = holder.getsockname()[1]
    clock = iter(range(100)).__next__
    sock, info = ports.open_listener("127.0.0.2", port, settle=3, clock=clock, sleep=lambda seconds: None)
    assert sock is None and info == {"port": port, "state": "busy",
                                     "error": "127.0.0.2:%d is held by closing connections of an earlier program" % port}
    holder.close()
    sock, info = ports.open_listener("127.0.0.2", port)
    assert info["state"] == "listening"
    sock.close()


def test_reconcile_refusals_from_a_busy_port():
    results = {"node1": [{"target": "node2", "via": "52000", "ok": False, "error": "refused"},
                         {"target": "node2", "via": "29500", "ok": False, "error": "refused"},
                         {"target": "node3", "via": "52000", "ok": False, "error": "timed out"}],
               "node3": None}
    listeners = {"node2": [{"port": 52000, "state": "busy"}, {"port": 29500, "state": "listening"}],
                 "node3": [{"port": 52000, "state": "busy"}]}
    out = ports.reconcile(results, listeners)
    assert [r["ok"] for r in out["node1"]] == [True, False, False]
    assert out["node1"][0]["note"] == "refused: node2:52000 was held by closing connections, but the path is open"
    assert out["node3"] is None


def test_listener_notes_name_what_a_node_could_not_listen_on_in_node_order():
    listeners = {
        "node1": [{"port": 22, "state": "served", "error": None}, {"port": 29500, "state": "listening", "error": None}],
        "node2": [],
        "node3": [{"port": 80, "state": "failed", "error": "cannot listen on 10.72.0.13:80: permission denied"}],
    }
    assert ports.listener_notes(listeners) == [
        "node1:22 served (another program holds it; that program answered the probes)",
        "node3:80 failed: cannot listen on 10.72.0.13:80: permission denied"]
    assert ports.listener_notes({"node1": None}) == []
