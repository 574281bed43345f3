"""Fixtures of the train scenario: the testbed's nodes, a master port dropped from one node, and nothing left behind."""

import contextlib

import pytest
from testbed_fixtures import CLUSTER, HOSTVARS, node_fixture, group_vars_fixture  # noqa: F401  pylint: disable=unused-import


@pytest.fixture(name="master_port_dropped")
def master_port_dropped_fixture(node):
    """A context in which node1 drops the rendezvous port from one node, in a table of the test's own (the role's
    table is not touched)."""
    @contextlib.contextmanager
    def dropped(source):
        rule = ("add table inet trainops_test; add chain inet trainops_test in { type filter hook input priority -10; }; "
                "add rule inet trainops_test in ip saddr %s tcp dport 29500 drop" % HOSTVARS[source]["cluster_ip"])
        node("node1").check_output("nft '%s'" % rule)
        try:
            yield
        finally:
            node("node1").run("nft delete table inet trainops_test")
    return dropped


@pytest.fixture(name="assert_nothing_left")
def assert_nothing_left_fixture(node):
    """Asserts that no node still runs torchrun, its ranks or a container of theirs."""
    def check():
        for name in CLUSTER:
            host = node(name)
            # [t]: the pattern does not match the shell that runs pgrep.
            procs = host.run("pgrep -a -f '[t]orchrun|[t]rainops_allreduce|[t]rain_ddp'").stdout.strip()
            assert (procs, host.check_output("podman ps -q")) == ("", ""), name
    return check
