# -*- coding: utf-8 -*-
"""pytest fixtures for testinfra tests of a test cluster: the inventory, and each node over native SSH.

The scenario's inventory is <scenario>/inventory/hosts.yml; the controller's key and known_hosts for the
nodes are in its .state directory (written by tests/testbed/up.yml).
"""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import testinfra

SCENARIO = Path(os.environ.get("MOLECULE_SCENARIO_DIRECTORY", Path.cwd()))
INVENTORY = SCENARIO / "inventory" / "hosts.yml"
STATE = INVENTORY.parent / ".state"


def ansible_inventory():
    exe = shutil.which("ansible-inventory") or str(Path(os.sys.executable).parent / "ansible-inventory")
    out = subprocess.run([exe, "-i", str(INVENTORY), "--list"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


INV = ansible_inventory()
HOSTVARS = INV["_meta"]["hostvars"]
CLUSTER = INV["cluster"]["hosts"]
PAIRS = [(a, b) for a in CLUSTER for b in CLUSTER if a != b]
_hosts = {}


def connect(name):
    """A testinfra host for an inventory node, as root over the management network."""
    if name not in _hosts:
        _hosts[name] = testinfra.get_host(
            "ssh://root@%s" % HOSTVARS[name]["ansible_host"],
            ssh_identity_file=str(STATE / "id_ed25519"),
            ssh_extra_args="-o UserKnownHostsFile=%s -o StrictHostKeyChecking=yes -o ConnectTimeout=5" % (STATE / "known_hosts"),
            controlpath="/tmp/trainops-testinfra-%s" % HOSTVARS[name]["ansible_host"],  # one connection per node
        )
    return _hosts[name]


@pytest.fixture(name="node")
def node_fixture():
    return connect


@pytest.fixture(name="group_vars")
def group_vars_fixture():
    return HOSTVARS[CLUSTER[0]]
