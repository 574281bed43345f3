# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Sockets that stand in for nodes, services and firewalls in the port tests."""

import contextlib
import socket

import pytest


def free_ports(count):
    """Ports nobody listens on right now (the kernel's pick of ephemeral ports)."""
    socks = [socket.socket() for dummy in range(count)]
    for sock in socks:
        sock.bind(("127.0.0.1", 0))
    found = [sock.getsockname()[1] for sock in socks]
    for sock in socks:
        sock.close()
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
