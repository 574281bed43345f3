# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""SSH mesh probes: the commands to run, their parallel execution, and a short diagnosis of each failure.

Node side: shipped to the nodes inside the modules that import it (port_matrix, ssh_mesh, torchrun_run); the filter
cluster uses it on the controller too.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Sequence, TypeVar

_T = TypeVar("_T")
_R = TypeVar("_R")

# ssh's stderr -> a diagnosis a user can act on; first match wins.
SSH_ERRORS = (
    # ssh then goes on to other keys and ends "Permission denied": the cause lies on the node that dials.
    ("UNPROTECTED PRIVATE KEY FILE", "this node's private key is readable by others, so ssh ignores it (UNPROTECTED PRIVATE "
                                     "KEY FILE): the key file must be mode 0600"),
    ("Could not resolve hostname", "name does not resolve (missing from /etc/hosts?)"),
    ("REMOTE HOST IDENTIFICATION HAS CHANGED", "host key changed since known_hosts was written"),
    ("Host key verification failed", "host key verification failed (known_hosts lacks this name or address)"),
    ("Permission denied", "permission denied: the cluster key is not in the training user's authorized_keys"),
    ("Connection timed out", "connection timed out"),
    ("Operation timed out", "connection timed out"),
    ("Connection refused", "connection refused (sshd down or port 22 closed)"),
    ("No route to host", "no route to host"),
    ("Network is unreachable", "network is unreachable"),
    ("Connection closed", "connection closed by the remote side"),
    ("Connection reset", "connection reset by the remote side"),
)


# sshd drops connections beyond MaxStartups (10 unauthenticated by default) while every node dials every other
# at once; such a drop is worth one more try.
TRANSIENT = ("Connection closed", "Connection reset", "kex_exchange_identification")


def transient(rc: int, stderr: str, stdout: str) -> bool:
    """A refused handshake, or an empty answer from a successful ssh (seen at 16 nodes on 2 cores): one more try."""
    if rc == 0:
        return not stdout.strip()
    return rc == 255 and any(needle in stderr for needle in TRANSIENT)


def ssh_argv(address: str, connect_timeout: int, ssh: str = "ssh", command: str = "hostname") -> list[str]:
    """The probe: non-interactive, strict host key checking, a bounded connect."""
    return [ssh, "-n", "-T",
            "-o", "BatchMode=yes",
            "-o", "StrictHostKeyChecking=yes",
            "-o", "ConnectTimeout=%d" % connect_timeout,
            "-o", "ConnectionAttempts=1",
            "-o", "ServerAliveInterval=%d" % connect_timeout,
            "-o", "ServerAliveCountMax=1",
            address, command]


def ssh_config(text: str) -> dict[str, str]:
    """`ssh -G <host>` output -> {option: value}, the first value of each option (as ssh uses it)."""
    config: dict[str, str] = {}
    for line in text.splitlines():
        key, _sep, value = line.strip().partition(" ")
        config.setdefault(key.lower(), value.strip())
    return config


def known_hosts_key(config: dict[str, str], address: str) -> str:
    """The name ssh looks up in known_hosts for a dial of `address`: its HostKeyAlias, else its HostName,
    bracketed with the port when that is not 22."""
    name = config.get("hostkeyalias") or config.get("hostname") or address
    if name == "none":
        name = config.get("hostname") or address
    port = config.get("port", "22")
    return name if port == "22" else "[%s]:%s" % (name, port)


def known_hosts_files(config: dict[str, str], home: str) -> list[str]:
    """The known_hosts files ssh reads for a host, from `ssh -G` (which leaves ~ unexpanded)."""
    files = (config.get("userknownhostsfile", "") + " " + config.get("globalknownhostsfile", "")).split()
    return [home + f[1:] if f.startswith("~/") else f for f in files]


def local_result(probe: dict[str, Any], cluster_ip: str, resolved: str | set[str], known: bool, seconds: float) -> dict[str, Any]:
    """Judge a pair checked on the source without logging in: the dialled name must resolve to the target's
    training address and known_hosts must trust a key for it.

    resolved: the addresses the dialled name resolves to, or an error text; known: whether a known_hosts file
    holds the name ssh looks up.
    """
    result = dict(probe, ok=False, answered=None, error=None, seconds=round(seconds, 3), timed_out=False, checked="local")
    if isinstance(resolved, str):
        result["error"] = "name does not resolve (missing from /etc/hosts?): %s" % resolved
    elif cluster_ip not in resolved:
        result["error"] = "resolves to %s, not the training address %s (stale /etc/hosts line?)" % (", ".join(sorted(resolved)), cluster_ip)
    elif not known:
        result["error"] = "host key verification would fail (known_hosts lacks this name or address)"
    else:
        result["ok"] = True
    return result


def diagnose(rc: int, stderr: str, timed_out: bool = False, timeout: float | None = None) -> str:
    """A one-line reason for a failed probe."""
    if timed_out:
        return "no answer within %ss (hung after connecting)" % timeout
    for needle, reason in SSH_ERRORS:
        if needle in stderr:
            return reason
    lines = [line.strip() for line in stderr.splitlines() if line.strip() and not line.startswith("Warning:")]
    return lines[-1] if lines else "ssh exited with %s" % rc


def probe_result(probe: dict[str, Any], rc: int, stdout: str, stderr: str, seconds: float, timed_out: bool = False,
                 timeout: float | None = None) -> dict[str, Any]:
    """Judge one probe: it must connect and the node that answers must be the expected one."""
    result = dict(probe, ok=False, answered=None, error=None, seconds=round(seconds, 3), timed_out=timed_out, checked="ssh")
    if rc != 0 or timed_out:
        result["error"] = diagnose(rc, stderr, timed_out, timeout)
        return result
    answered = stdout.strip().split(".", 1)[0]
    result["answered"] = answered
    expected = probe.get("expected")
    if expected and answered.lower() != expected.split(".", 1)[0].lower():
        result["error"] = "answered as %r, expected %r (duplicate hostname or wrong address)" % (answered, expected)
    else:
        result["ok"] = True
    return result


def probes_for(nodes: list[dict[str, Any]], by: Sequence[str] = ("name", "ip")) -> list[dict[str, Any]]:
    """One probe per node record (host, short, cluster_ip, hostname) and way of addressing it (by name, by IP)."""
    probes = []
    for node in nodes:
        for via in by:
            address = node["short"] if via == "name" else node["cluster_ip"]
            probes.append({"target": node["host"], "via": via, "address": address, "expected": node.get("hostname") or node["short"]})
    return probes


def login_targets(targets: list[dict[str, Any]], self_host: str, full_max: int, neighbours: int, launchers: Sequence[str]) -> list[str]:
    """The targets a node logs into. Up to `full_max` nodes, all of them (N x N). Above, its next `neighbours`
    nodes (targets come neighbour first, so every node is logged into by its predecessors), and a launcher logs into
    every node, as mpirun and pdsh do from there. Nobody else logs into a launcher on purpose: N-1 handshakes at
    once would overrun its sshd's MaxStartups. The rest are checked locally."""
    hosts = [t["host"] for t in targets]
    if len(hosts) + 1 <= full_max or self_host in launchers:
        return hosts
    return hosts[:neighbours]


def run_parallel(probes: Sequence[_T], run_one: Callable[[_T], _R], parallel: int) -> list[_R]:
    """Run run_one(probe) for every probe on `parallel` threads; the result keeps the probe order."""
    with ThreadPoolExecutor(max_workers=max(1, min(parallel, len(probes) or 1))) as pool:
        return list(pool.map(run_one, probes))


def run_retrying_hangs(probes: Sequence[_T], run_one: Callable[[_T], dict[str, Any]], parallel: int) -> list[dict[str, Any]]:
    """run_parallel, then once more for the probes that hung: while every node dials every other at once, a
    loaded node can miss the timeout (seen at 16 nodes on 2 cores); a path that hangs twice is reported."""
    results = run_parallel(probes, run_one, parallel)
    hung = [i for i, result in enumerate(results) if result["timed_out"]]
    for i, result in zip(hung, run_parallel([probes[i] for i in hung], run_one, parallel)):
        results[i] = result
    return results
