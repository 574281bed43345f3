# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""TCP port reachability between cluster nodes: which ports to probe, short-lived listeners, bounded connects, short reasons.

Every node runs run_matrix() at about the same time: it listens on each port (unless a service already does) until
every peer has connected or a window of seconds has passed, and connects to each peer on each port meanwhile.
Results feed plugin_utils/reachability.py's summarize() on the controller.

Node side: shipped to the nodes inside the modules that import it (port_matrix, torchrun_run); the filter ports uses
it on the controller too.
"""

from __future__ import annotations

import errno
import functools
import ipaddress
import selectors
import socket
import threading
import time
from typing import Any, Callable, Iterable, cast

from ansible_collections.trainops.cluster.plugins.module_utils.mesh import run_parallel

# A refused connect is retried this often: the peer's listener may start a little after ours.
RETRY_INTERVAL = 0.25
# Longest wait of the accept loop between two looks at its deadline.
ACCEPT_POLL = 0.1

ERRNO_REASONS = {
    errno.ECONNREFUSED: "refused",
    errno.ETIMEDOUT: "timed out",
    errno.EHOSTUNREACH: "no route to host",
    errno.ENETUNREACH: "network unreachable",
    errno.ECONNRESET: "reset",
    errno.EACCES: "permission denied",
    # connect() gets EPERM when a netfilter OUTPUT rule on this node drops the packet.
    errno.EPERM: "operation not permitted",
    errno.EADDRINUSE: "address in use",
    errno.EADDRNOTAVAIL: "address not available on this host",
}


def sample_range(low: int, high: int) -> list[int]:
    """The ports probed for the range low-high: first, middle and last; a range is never probed port by port."""
    return sorted({low, (low + high) // 2, high})


def expand_ports(spec: Iterable[int | str]) -> list[int]:
    """Ports to probe, sorted and unique, from a list of ints and "N" or "LOW-HIGH" strings. Raises ValueError."""
    ports: set[int] = set()
    for item in spec:
        text = str(item).strip()
        low_text, sep, high_text = text.partition("-")
        if isinstance(item, bool) or not low_text.strip().isdigit() or (sep and not high_text.strip().isdigit()):
            raise ValueError("port %r is neither a number nor a range LOW-HIGH" % (item,))
        low = int(low_text)
        high = int(high_text) if sep else low
        if not 1 <= low <= high <= 65535:
            raise ValueError("port %r is out of 1-65535 or its range is reversed" % (item,))
        ports.update(sample_range(low, high))
    return sorted(ports)


def classify_error(exc: BaseException | None) -> str:
    """A short reason for a failed socket operation: timed out (filtered/dropped), refused (closed/rejected), ..."""
    if isinstance(exc, socket.gaierror):
        return "name does not resolve"
    # socket.timeout is TimeoutError from Python 3.10 on, a plain OSError subclass before.
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return "timed out"
    number = getattr(exc, "errno", None)
    reason = ERRNO_REASONS.get(number) if number is not None else None
    if reason:
        return reason
    return (getattr(exc, "strerror", None) or str(exc) or type(exc).__name__).lower()


def find_node(nodes: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    """The node record whose inventory name (host) is name, or None."""
    return next((node for node in nodes if node.get("host") == name), None)


def probes_for(nodes: list[dict[str, Any]], self_name: str, ports: list[int]) -> list[dict[str, Any]]:
    """One probe per peer (every node but self_name) and port, in node then port order."""
    return [{"target": node["host"], "via": str(port), "port": port, "address": node["cluster_ip"]}
            for node in nodes if node["host"] != self_name for port in ports]


def _listen(address: str, port: int, socket_factory: Callable[[int, int, int], socket.socket]) -> tuple[socket.socket | None, OSError | None]:
    sock = None
    try:
        family, kind, proto, dummy, sockaddr = socket.getaddrinfo(address, port, 0, socket.SOCK_STREAM, 0, socket.AI_PASSIVE)[0]
        sock = socket_factory(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(sockaddr)
        sock.listen(socket.SOMAXCONN)
        sock.setblocking(False)
    except OSError as exc:
        if sock is not None:
            sock.close()
        return None, exc
    return sock, None


def _answers(address: str, port: int, timeout: float = 0.5) -> bool:
    """Does something accept connections on address:port right now?"""
    try:
        socket.create_connection((address, port), timeout=timeout).close()
    except OSError:
        return False
    return True


def open_listener(address: str, port: int, socket_factory: Callable[[int, int, int], socket.socket] = socket.socket, settle: float = 2.0,
                  clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], object] = time.sleep,
                  answers: Callable[[str, int], bool] = _answers) -> tuple[socket.socket | None, dict[str, Any]]:
    """Listen on address:port. Returns (socket or None, {port, state, error}); state is listening, served or failed.

    A port already in use by a listening service is "served": that service answers the peers instead of us. A port
    held by sockets that do not listen (a program's connections still closing) is retried for `settle` seconds.
    """
    give_up = clock() + settle
    while True:
        sock, exc = _listen(address, port, socket_factory)
        if sock is not None:
            return sock, {"port": port, "state": "listening", "error": None}
        if getattr(exc, "errno", None) != errno.EADDRINUSE:
            return None, {"port": port, "state": "failed", "error": "cannot listen on %s:%s: %s" % (address, port, classify_error(exc))}
        if answers(address, port):
            return None, {"port": port, "state": "served", "error": None}
        if clock() >= give_up:
            # Typically TIME_WAIT connections of a job that just ended (e.g. MPI), whose listener had no SO_REUSEADDR.
            return None, {"port": port, "state": "busy",
                          "error": "%s:%s is held by closing connections of an earlier program" % (address, port)}
        sleep(0.2)


def same_address(text: str) -> object:
    """An address in a form that compares equal however it was written (an IPv4-mapped IPv6 address as IPv4)."""
    try:
        address = ipaddress.ip_address(text.split("%")[0])
    except ValueError:
        return text
    return getattr(address, "ipv4_mapped", None) or address


def accept_until(socks: list[socket.socket], deadline: float, peers: Iterable[str] = (), clock: Callable[[], float] = time.monotonic) -> None:
    """Accept and at once close every connection to the listening socks, then close them.

    They close at deadline, or as soon as every address in peers has connected to every one of them: nobody needs
    them any more, so a healthy cluster does not wait out the window. A peer that connects from another address
    than the one in peers (NAT, a secondary address) only costs the wait until deadline.
    """
    waiting = {sock: {same_address(peer) for peer in peers} for sock in socks}
    with selectors.DefaultSelector() as selector:
        for sock in socks:
            selector.register(sock, selectors.EVENT_READ)
        try:
            while socks and clock() < deadline and (not peers or any(waiting.values())):
                for key, dummy in selector.select(timeout=min(ACCEPT_POLL, max(0.0, deadline - clock()))):
                    listener = cast(socket.socket, key.fileobj)
                    try:
                        conn, source = listener.accept()
                    except OSError:
                        # The prober gave up or reset before we got to it; nothing to report on our side.
                        continue
                    conn.close()
                    waiting[listener].discard(same_address(source[0]))
        finally:
            for sock in socks:
                sock.close()


def connect(address: str, port: int, timeout: float, source: str | None = None) -> None:
    """Open and close one TCP connection, from the address source of this node when given; raises OSError on failure."""
    socket.create_connection((address, port), timeout=timeout, source_address=(source, 0) if source else None).close()


def probe(item: dict[str, Any], connect_timeout: float, retry_deadline: float, connect: Callable[[str, int, float], None] = connect,
          clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], object] = time.sleep) -> dict[str, Any]:
    """Connect to item's address:port. A refused connect is retried until retry_deadline, a timeout is not.

    A probe that has not started by retry_deadline (every thread was busy) is not started: it could only run
    past the peers' listening window.
    """
    start = clock()
    result = dict(item, ok=False, error=None, seconds=0.0)
    if start > retry_deadline:
        result["error"] = "not probed: no free thread before the window closed (raise parallel or window)"
        return result
    while True:
        try:
            connect(item["address"], item["port"], connect_timeout)
        except OSError as exc:
            result["error"] = classify_error(exc)
        else:
            result["ok"], result["error"] = True, None
            break
        if result["error"] != "refused" or clock() + RETRY_INTERVAL > retry_deadline:
            break
        sleep(RETRY_INTERVAL)
    result["seconds"] = round(clock() - start, 3)
    return result


def run_matrix(nodes: list[dict[str, Any]], self_name: str, ports: list[int], bind_address: str, connect_timeout: float,
               window: float, parallel: int) -> dict[str, Any]:
    """Listen on every port of ports and probe every peer on every port meanwhile, from this node's cluster_ip.

    The listeners close when every peer has connected to each of them, at the latest after window seconds.
    Returns {results, listeners, failed_probes, seconds}; takes at most window seconds plus a poll.
    With no peers the listeners are only opened (to tell served ports) and closed.
    """
    start = time.monotonic()
    probes = probes_for(nodes, self_name, ports)
    end = start + window if probes else start
    me = find_node(nodes, self_name)
    if me is None:
        raise ValueError("self %r is not the host of any of nodes" % self_name)
    source = me["cluster_ip"]
    peers = [node["cluster_ip"] for node in nodes if node["host"] != self_name]
    socks: list[socket.socket] = []
    listeners: list[dict[str, Any]] = []
    for port in ports:
        sock, listener = open_listener(bind_address, port)
        listeners.append(listener)
        if sock is not None:
            socks.append(sock)
    acceptor = threading.Thread(target=accept_until, args=(socks, end, peers), name="port_matrix-accept", daemon=True)
    acceptor.start()
    dial = functools.partial(connect, source=source)
    results = run_parallel(probes, lambda item: probe(item, connect_timeout, end - connect_timeout, connect=dial), parallel)
    acceptor.join()
    return {
        "results": results,
        "listeners": listeners,
        "failed_probes": sum(1 for r in results if not r["ok"]),
        "seconds": round(time.monotonic() - start, 3),
    }


def reconcile(results_by_source: dict[str, list[dict[str, Any]] | None],
              listeners_by_node: dict[str, list[dict[str, Any]] | None]) -> dict[str, list[dict[str, Any]] | None]:
    """Probes refused by a node that could not listen on the port ("busy") still prove the path is open.

    A refusal is the target's own answer to the SYN, so the network and firewalls let it through; only a silent
    drop (a timeout) means blocked. Such probes become ok, with a note. Returns a new {source: results} mapping.
    """
    busy: set[tuple[str, str]] = set()
    for node, listeners in listeners_by_node.items():
        for listener in listeners or []:
            if listener.get("state") == "busy":
                busy.add((node, str(listener["port"])))
    out: dict[str, list[dict[str, Any]] | None] = {}
    for source, results in results_by_source.items():
        if results is None:
            out[source] = None
            continue
        kept: list[dict[str, Any]] = []
        out[source] = kept
        for result in results:
            if not result["ok"] and result.get("error") == "refused" and (result["target"], str(result["via"])) in busy:
                result = dict(result, ok=True, error=None,
                              note="refused: %s:%s was held by closing connections, but the path is open" % (result["target"], result["via"]))
            kept.append(result)
    return out


def listener_notes(listeners_by_node: dict[str, list[dict[str, Any]] | None]) -> list[str]:
    """What each node could not listen on, in node order: "node2:29500 busy: ..." or "... (another program holds it;
    that program answered the probes)". A listener in state listening is the normal case and says nothing."""
    notes = []
    for node, listeners in listeners_by_node.items():
        for listener in listeners or []:
            if listener.get("state") == "listening":
                continue
            error = listener.get("error")
            why = ": " + error if error else " (another program holds it; that program answered the probes)"
            notes.append("%s:%s %s%s" % (node, listener.get("port"), listener.get("state"), why))
    return notes
