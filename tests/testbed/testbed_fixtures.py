# -*- coding: utf-8 -*-
"""pytest fixtures for testinfra tests of a test cluster: the inventory, and each node over native SSH.

The scenario's inventory is <scenario>/inventory/hosts.yml; the controller's key and known_hosts for the
nodes are in its .state directory (written by tests/testbed/up.yml).
"""

import json
import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
import testinfra

PROJECT = Path(__file__).resolve().parents[2]
SCENARIO = Path(os.environ.get("MOLECULE_SCENARIO_DIRECTORY", Path.cwd()))
INVENTORY = SCENARIO / "inventory" / "hosts.yml"
STATE = INVENTORY.parent / ".state"


def tool(name):
    return shutil.which(name) or str(Path(os.sys.executable).parent / name)


def ansible_inventory():
    out = subprocess.run([tool("ansible-inventory"), "-i", str(INVENTORY), "--list"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def playbook(name, *args, timeout=600):
    """Run playbooks/<name> of this checkout against the scenario's cluster; returns the CompletedProcess."""
    return subprocess.run([tool("ansible-playbook"), "-i", str(INVENTORY), str(PROJECT / "playbooks" / name)] + list(args),
                          capture_output=True, text=True, timeout=timeout, check=False)


class Run:
    """A playbook run through ansible-runner: rc, the output text, and per-host counts from its events."""

    def __init__(self, runner):
        self.rc = runner.rc
        self.stdout = runner.stdout.read()
        # {"ok": {host: n}, "changed": {...}, "failures": {...}, "dark": {...}, "skipped": {...}, ...}
        self.stats = runner.stats or {}

    def changed(self, host):
        return self.stats.get("changed", {}).get(host, 0)


def playbook_run(name, *args, timeout=600):
    """Run playbooks/<name> through ansible-runner, for a test that needs per-host results (changed counts, say) from
    the run's events rather than from its text."""
    import ansible_runner  # only the tests that use it need it

    # The inventory goes on the command line: given as inventory=, runner would copy hosts.yml without its group_vars.
    path = os.pathsep.join([str(Path(tool("ansible-playbook")).parent), os.environ.get("PATH", "")])
    with tempfile.TemporaryDirectory(prefix="trainops-runner-") as private:
        runner = ansible_runner.run(private_data_dir=private, playbook=str(PROJECT / "playbooks" / name),
                                    cmdline=shlex.join(["-i", str(INVENTORY)] + list(args)), quiet=True, timeout=timeout,
                                    envvars={"PATH": path, "ANSIBLE_NOCOLOR": "1"})
        return Run(runner)


INV = ansible_inventory()
HOSTVARS = INV["_meta"]["hostvars"]
CLUSTER = INV["cluster"]["hosts"]
PAIRS = [(a, b) for a in CLUSTER for b in CLUSTER if a != b]
_hosts = {}


def adhoc(pattern, module, args, timeout=300):
    """Run one module on inventory hosts (to put files on nodes, say); returns the CompletedProcess."""
    return subprocess.run([tool("ansible"), "-i", str(INVENTORY), pattern, "-m", module, "-a", args],
                          capture_output=True, text=True, timeout=timeout, check=False)


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


def training_interface(name):
    """The interface holding the node's cluster_ip: podman hands out eth0/eth1 in no fixed order."""
    out = connect(name).check_output("ip -o -4 addr show to %s/32", HOSTVARS[name]["cluster_ip"])
    return out.split()[1]


@pytest.fixture(name="node")
def node_fixture():
    return connect


@pytest.fixture(name="group_vars")
def group_vars_fixture():
    return HOSTVARS[CLUSTER[0]]
