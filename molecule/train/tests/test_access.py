"""The training key from a management host: cluster_user_key_sources adds a host off the training network (here the
controller's address on the management network) to the key's from= in authorized_keys, so the training user reaches
the nodes from there too; without it only the training network may use the key. A bad entry is refused first."""

import json
import subprocess

from testbed_fixtures import CLUSTER, HOSTVARS, INVENTORY, playbook

KEY = INVENTORY.parent / "credentials" / "train_ed25519"
# The controller's address on the nodes' management network (podman's gateway there): it is not on the training network.
CONTROLLER = HOSTVARS["node1"]["ansible_host"].rsplit(".", 1)[0] + ".1"
USER_STAGE = ["--tags", "cluster_user"]
KEYS = "/home/train/.ssh/authorized_keys"


def login(name):
    """The training user's SSH login with the cluster key from the controller, over the management network."""
    return subprocess.run(["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5", "-o", "StrictHostKeyChecking=no",
                           "-o", "UserKnownHostsFile=/dev/null", "-o", "IdentitiesOnly=yes", "-i", str(KEY),
                           "train@%s" % HOSTVARS[name]["ansible_host"], "true"], capture_output=True, text=True, timeout=30, check=False)


def test_a_bad_source_is_refused_before_anything_changes():
    run = playbook("site.yml", *USER_STAGE, "-e", json.dumps({"cluster_user_key_sources": ["bastion.example"]}))
    assert run.returncode != 0
    assert "cluster_user_key_sources entry 'bastion.example' is not an address or CIDR network" in run.stdout


def test_a_management_host_may_use_the_key_only_when_listed(node):
    assert login("node1").returncode != 0  # from the training network only
    for name in CLUSTER:
        node(name).check_output("cp -a %s %s.before-test" % (KEYS, KEYS))
    try:
        run = playbook("site.yml", *USER_STAGE, "-e", json.dumps({"cluster_user_key_sources": [CONTROLLER]}))
        assert run.returncode == 0, run.stdout[-3000:]
        for name in CLUSTER:
            keys = node(name).file(KEYS).content_string
            assert 'from="%s,%s" ' % (HOSTVARS[name]["cluster_network"], CONTROLLER) in keys, name
            assert login(name).returncode == 0, (name, login(name).stderr)
    finally:
        # Put back by hand (the role's own run without the setting does the same, slower: the converge proved it).
        for name in CLUSTER:
            node(name).run("mv %s.before-test %s" % (KEYS, KEYS))
    assert login("node1").returncode != 0
