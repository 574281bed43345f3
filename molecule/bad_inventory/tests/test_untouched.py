"""After every bad-inventory run, no node was changed."""

import pytest
from testbed_fixtures import CLUSTER


@pytest.mark.parametrize("name", CLUSTER)
def test_node_untouched(node, name):
    host = node(name)
    assert host.check_output("hostname") == "trainops-molecule-bad-" + name
    assert "trainops.cluster" not in host.file("/etc/hosts").content_string
    assert not host.user("train").exists
    assert not host.file("/home/train").exists


def test_intruder_still_holds_the_uid(node):
    assert node("node2").user("intruder").uid == 2000
