"""The converged 3-node cluster: names, the training user, its keys and the SSH mesh, checked on the nodes."""

import json

import pytest
from testbed_fixtures import CLUSTER, HOSTVARS, INVENTORY, PAIRS, playbook, training_interface

VARS = HOSTVARS[CLUSTER[0]]
USER, UID = VARS["cluster_user_name"], VARS["cluster_user_uid"]
HOME = "/home/%s" % USER
# The cluster key's file name and comment (role cluster_user: id_ed25519_<cluster_name>, <user>@<cluster_name>).
KEY = "id_ed25519_%s" % VARS["cluster_name"]
KEY_COMMENT = "%s@%s" % (USER, VARS["cluster_name"])


@pytest.mark.parametrize("name", CLUSTER)
def test_hostname_is_inventory_name(node, name):
    assert node(name).check_output("hostname") == name


@pytest.mark.parametrize("src, dst", PAIRS + [(n, n) for n in CLUSTER])
def test_every_node_resolves_every_name_to_its_cluster_ip(node, src, dst):
    assert node(src).check_output("getent hosts %s", dst).split()[0] == HOSTVARS[dst]["cluster_ip"]


@pytest.mark.parametrize("name", CLUSTER)
def test_stale_and_loopback_entries_are_gone(node, name):
    hosts = node(name).file("/etc/hosts").content_string
    assert "127.0.1.1" not in hosts
    assert HOSTVARS[name]["testbed_stale_ip"] not in hosts  # prepare.yml's stale entry
    assert hosts.count("# BEGIN trainops.cluster nodes") == 1


@pytest.mark.parametrize("name", CLUSTER)
def test_training_user_is_identical(node, name):
    user = node(name).user(USER)
    assert (user.uid, user.gid, user.home, user.shell) == (UID, UID, HOME, "/bin/bash")
    assert user.password == "*"  # no password can match


@pytest.mark.parametrize("name", CLUSTER)
def test_key_files_and_modes(node, name):
    host = node(name)
    ssh = HOME + "/.ssh"
    expected = {ssh: 0o700, ssh + "/" + KEY: 0o600, ssh + "/authorized_keys": 0o600, ssh + "/config": 0o600}
    for path, mode in expected.items():
        f = host.file(path)
        assert (f.user, f.group, f.mode) == (USER, USER, mode), path
    pub = host.file(ssh + "/%s.pub" % KEY).content_string.strip()
    assert 'from="%s" ' % VARS["cluster_network"] + pub in host.file(ssh + "/authorized_keys").content_string
    assert "StrictHostKeyChecking no" not in host.file(ssh + "/config").content_string
    assert not host.file("/etc/sudoers.d/trainops-%s" % USER).exists


@pytest.mark.parametrize("src, dst", PAIRS)
def test_known_hosts_hold_the_real_host_key(node, src, dst):
    key = node(dst).file("/etc/ssh/ssh_host_ed25519_key.pub").content_string.split()[1]
    line = "%s,%s ssh-ed25519 %s" % (dst, HOSTVARS[dst]["cluster_ip"], key)
    assert line in node(src).file(HOME + "/.ssh/known_hosts").content_string


@pytest.mark.parametrize("via", ["name", "ip"])
@pytest.mark.parametrize("src, dst", PAIRS)
def test_user_reaches_every_node_without_password(node, src, dst, via):
    target = dst if via == "name" else HOSTVARS[dst]["cluster_ip"]
    # ssh's own exit code 255 would read as a failure of testinfra's connection: report it in the output instead.
    out = node(src).run("runuser -u %s -- ssh -o BatchMode=yes -o ConnectTimeout=5 %s hostname; echo rc=$?", USER, target)
    assert out.stdout.split() == [dst, "rc=0"], out.stderr


def test_mesh_report_says_ok():
    report = json.loads((INVENTORY.parent / "reports" / "ssh_mesh.json").read_text())
    assert report["ok"] and report["failures"] == []
    assert report["probes"] == len(CLUSTER) * (len(CLUSTER) - 1)  # by name; by IP is tested above


def test_nodes_without_gpus_give_clean_facts():
    report = json.loads((INVENTORY.parent / "reports" / "drift.json").read_text())
    rows = {r["key"]: r for r in report["rows"]}
    assert not report["failed"] and report["errors"] == []
    assert rows["gpus"]["values"] == {n: "0" for n in CLUSTER}
    assert rows["driver"]["consistent"] and set(rows["driver"]["values"].values()) == {None}
    assert rows["nccl ifname"]["values"] == {n: training_interface(n) for n in CLUSTER}


def test_verify_passes_the_cpu_rung():
    verdicts = json.loads((INVENTORY.parent / "reports" / "verify.json").read_text())
    by_rung = {v["rung"]: v for v in verdicts}
    assert by_rung["network"]["passed"]
    assert [by_rung[r]["skipped"] for r in ("gpu", "node", "pairs", "all")] == ["skipped: no GPUs on node1, node2, node3"] * 4
    cpu = by_rung["cpu"]["runs"][0]
    assert cpu["passed"] and cpu["ranks"] == 3 and cpu["hosts"] == CLUSTER and cpu["busbw_gbps"] > 0
    assert (INVENTORY.parent / "reports" / "verify" / "cpu-node1.log").read_text().count('"wrong": 0') == 3 * 18  # 8 B .. 1 MiB


@pytest.mark.parametrize("name", CLUSTER)
def test_launch_env(node, name):
    env = dict(line.split("=", 1) for line in node(name).file("/etc/trainops/launch.env").content_string.splitlines()
               if line and not line.startswith("#"))
    assert env["NODE_RANK"] == str(CLUSTER.index(name))
    assert (env["NNODES"], env["NPROC_PER_NODE"], env["WORLD_SIZE"]) == ("3", "1", "3")
    assert (env["MASTER_ADDR"], env["MASTER_PORT"]) == (HOSTVARS["node1"]["cluster_ip"], "29500")
    assert env["NCCL_SOCKET_IFNAME"] == training_interface(name)


def writes_skipped(run, names):
    """Whether the launch role skipped writing launch.env on each of names in this run's output."""
    return all("skipping: [%s] => (item=/etc/trainops/launch.env)" % name in run.stdout for name in names)


def test_launch_files_are_rewritten_only_where_they_differ(node):
    """A node whose launch files are current is only looked at; a drifted one is rewritten, the others left alone.
    launch.yml is site.yml's launch stage (site.yml imports it) without the validation, which the converge proved."""
    run = playbook("launch.yml")
    assert run.returncode == 0, run.stdout[-3000:]
    assert writes_skipped(run, CLUSTER), run.stdout[-3000:]
    node("node2").check_output("echo DRIFT=1 >> /etc/trainops/launch.env")
    run = playbook("launch.yml")
    assert run.returncode == 0, run.stdout[-3000:]
    assert "changed: [node2] => (item=/etc/trainops/launch.env)" in run.stdout, run.stdout[-3000:]
    assert writes_skipped(run, [name for name in CLUSTER if name != "node2"])
    assert "DRIFT" not in node("node2").file("/etc/trainops/launch.env").content_string


def test_a_rotated_cluster_key_leaves_no_old_key_authorized(node):
    """An earlier cluster key (the same comment, another key) is removed; a key of the user's own stays."""
    keys = HOME + "/.ssh/authorized_keys"
    old = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOLDOLDOLDOLDOLDOLDOLDOLDOLDOLDOLDOLDOLDOLDOLD1 " + KEY_COMMENT
    own = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMINEMINEMINEMINEMINEMINEMINEMINEMINEMINEMINE1 alice@laptop"
    node("node2").check_output("printf '%%s\\n%%s\\n' '%s' '%s' >> %s" % (old, own, keys))
    run = playbook("site.yml", "--tags", "cluster_user")
    assert run.returncode == 0, run.stdout[-3000:]
    text = node("node2").file(keys).content_string
    assert old not in text and own in text
    pub = node("node2").file("%s/.ssh/%s.pub" % (HOME, KEY)).content_string.strip()
    assert pub in text
    node("node2").check_output("sed -i '/alice@laptop/d' %s" % keys)


def test_a_run_limited_to_one_node_converges_it_and_says_what_it_did_not_check(node):
    """As for a replaced node: site.yml --limit node3 repairs node3, reading the others, and names the checks it left."""
    node("node3").check_output("sed -i '/^WORLD_SIZE=/d' /etc/trainops/launch.env && sed -i '/\\tnode1$/d' /etc/hosts")
    run = playbook("site.yml", "--limit", "node3")
    assert run.returncode == 0, run.stdout[-3000:]
    for check in ("the SSH mesh", "the port matrix", "the drift report", "the verify ladder", "the torchrun rung"):
        assert "NOT CHECKED: %s needs every node of the cluster" % check in run.stdout, check
    env = node("node3").file("/etc/trainops/launch.env").content_string
    assert "WORLD_SIZE=3" in env and "NNODES=3" in env and "NODE_RANK=2" in env
    assert "\tnode1\n" in node("node3").file("/etc/hosts").content_string
