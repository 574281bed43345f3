# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
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
import time
from pathlib import Path

import pytest
import testinfra

PROJECT = Path(__file__).resolve().parents[2]
SCENARIO = Path(os.environ.get("MOLECULE_SCENARIO_DIRECTORY", Path.cwd()))
INVENTORY = SCENARIO / "inventory" / "hosts.yml"
STATE = INVENTORY.parent / ".state"
# How long the timed steps took, one JSON line each, read by `scripts/benchmark timings` (which holds the targets).
TIMINGS = PROJECT / "tests" / "output" / "timings.jsonl"
# Every playbook run of a test, one JSON line each: scripts/summarize-results prints where the scenarios' time went.
PLAYBOOKS = PROJECT / "tests" / "output" / "playbooks.jsonl"


def tool(name):
    return shutil.which(name) or str(Path(os.sys.executable).parent / name)


def timed(what, seconds, hang_bound=None):
    """Records how long `what` took, then fails only on a hang. A speed target is no pass/fail condition (a busy
    machine must not fail a test): scripts/benchmark compares the records with the targets. hang_bound is the
    never-hang guard, about three times the normal time (None where the caller's own wait already bounds it)."""
    TIMINGS.parent.mkdir(parents=True, exist_ok=True)
    with open(TIMINGS, "a") as log:
        log.write(json.dumps({"scenario": SCENARIO.name, "what": what, "seconds": round(seconds, 1)}) + "\n")
    assert hang_bound is None or seconds < hang_bound, "%s took %.1f s, over the never-hang bound of %d s" % (what, seconds, hang_bound)


def ansible_inventory():
    out = subprocess.run([tool("ansible-inventory"), "-i", str(INVENTORY), "--list"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def _what(name, args):
    """The playbook with what picks its work: its train_action, its --tags."""
    picks = [a for a in args if a.startswith("train_action=")]
    picks += [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--tags"]
    return " ".join([name] + picks)


def playbook(name, *args, timeout=600, inventory=INVENTORY):
    """Run playbooks/<name> of this checkout against the scenario's cluster (another inventory of its nodes where given);
    returns the CompletedProcess. Its time goes to PLAYBOOKS."""
    start = time.monotonic()
    run = subprocess.run([tool("ansible-playbook"), "-i", str(inventory), str(PROJECT / "playbooks" / name)] + list(args),
                         capture_output=True, text=True, timeout=timeout, check=False)
    PLAYBOOKS.parent.mkdir(parents=True, exist_ok=True)
    with open(PLAYBOOKS, "a") as log:
        log.write(json.dumps({"scenario": SCENARIO.name, "test": os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0],
                              "playbook": _what(name, args),
                              "rc": run.returncode, "seconds": round(time.monotonic() - start, 1)}) + "\n")
    return run


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


def container(name):
    """The podman container of an inventory node (tests/testbed/up.yml names them)."""
    return "%s-%s" % (HOSTVARS[name]["testbed_name"], name)


def power_on(name, tries=30):
    """Starts a node's container again (stopped or killed) and waits for its sshd. A restart hands out the interfaces
    anew (eth0/eth1 may swap) and rebinds /etc/hostname: site.yml repairs both, the caller runs it."""
    subprocess.run(["podman", "start", container(name)], check=True, capture_output=True)
    for dummy in range(tries):
        if subprocess.run(["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=2", "-o", "UserKnownHostsFile=%s" % (STATE / "known_hosts"),
                           "-i", str(STATE / "id_ed25519"), "root@%s" % HOSTVARS[name]["ansible_host"], "true"],
                          capture_output=True, check=False).returncode == 0:
            return
        time.sleep(2)


# A node lost for good (powered off, its container killed) is what the scenario's last test does to its cluster: the
# cluster is not repaired after it (a near-full site.yml run each time), so pytest_collection_modifyitems puts every test
# marked node_loss after all the others, in file order, wherever its file sorts.
NODE_LOSS = "node_loss"


def pytest_configure(config):
    config.addinivalue_line("markers", "%s: the test powers a node off and leaves it so; it runs after every other test" % NODE_LOSS)


def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: item.get_closest_marker(NODE_LOSS) is not None)  # a stable sort: file order kept


@pytest.fixture(name="node")
def node_fixture():
    return connect


@pytest.fixture(name="group_vars")
def group_vars_fixture():
    return HOSTVARS[CLUSTER[0]]
