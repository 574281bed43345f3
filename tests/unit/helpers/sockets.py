# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Sockets that stand in for nodes, services and firewalls in the port tests."""

import contextlib
import random
import socket

import pytest


# Below the kernel's ephemeral range (32768-60999 by default), where concurrent programs' own connections and
# port-0 binds land: a port picked there can be taken between the pick and the test's use of it.
PICK_LOW, PICK_HIGH = 20000, 32000


def _free_everywhere(port):
    """Nothing holds port on any address: a bind to the wildcard address conflicts with every other bind."""
    with socket.socket() as sock:
        try:
            sock.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def free_block(length, avoid=()):
    """length consecutive ports that no program on this machine holds right now, none of them in or next to `avoid`
    (ports a test already picked: nothing holds them until the test binds them, so a second pick could return them)."""
    rng = random.SystemRandom()
    taken = {port + step for port in avoid for step in (-1, 0, 1)}
    for dummy in range(200):
        start = rng.randrange(PICK_LOW, PICK_HIGH - length)
        block = list(range(start, start + length))
        if not taken.intersection(block) and all(_free_everywhere(port) for port in block):
            return block
    pytest.fail("no %d consecutive free ports in %d-%d" % (length, PICK_LOW, PICK_HIGH))


def free_ports(count):
    """count distinct ports, each free with its next port free too (tests probe port + 1)."""
    found = []
    while len(found) < count:
        port = free_block(2)[0]
        if port not in found and port + 1 not in found and port - 1 not in found:
            found.append(port)
    return found


@contextlib.contextmanager
def serving(address, port, backlog=64):
    """Another service already listening on address:port (it never accepts; the kernel completes handshakes)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((address, port))
    sock.listen(backlog)
    try:
        yield
    finally:
        sock.close()


@contextlib.contextmanager
def filtered(address, port):
    """address:port drops SYNs like a firewall DROP rule: a listener whose accept queue is full. Connects time out."""
    with serving(address, port, backlog=0), contextlib.ExitStack() as held:
        for dummy in range(8):
            try:
                held.enter_context(socket.create_connection((address, port), timeout=0.3))
            except socket.timeout:
                break
        else:
            pytest.fail("the accept queue of %s:%s never filled up" % (address, port))
        yield
