# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
import threading
import time

import pytest

from ansible_collections.trainops.cluster.plugins.module_utils import mesh

NODES = [{"host": "node2", "short": "node2", "cluster_ip": "10.72.0.12", "hostname": "node2"},
         {"host": "node3", "short": "node3", "cluster_ip": "10.72.0.13"}]


def test_probes_by_name_and_ip():
    probes = mesh.probes_for(NODES)
    assert [(p["target"], p["via"], p["address"], p["expected"]) for p in probes] == [
        ("node2", "name", "node2", "node2"), ("node2", "ip", "10.72.0.12", "node2"),
        ("node3", "name", "node3", "node3"), ("node3", "ip", "10.72.0.13", "node3")]


def test_ssh_argv_is_strict_and_bounded():
    argv = mesh.ssh_argv("node2", 5)
    assert argv[0] == "ssh" and argv[-2:] == ["node2", "hostname"]
    assert "BatchMode=yes" in argv and "StrictHostKeyChecking=yes" in argv and "ConnectTimeout=5" in argv


@pytest.mark.parametrize("stderr, reason", [
    ("ssh: Could not resolve hostname node9: Name or service not known\r\n", "name does not resolve"),
    ("ssh: connect to host 10.72.0.13 port 22: Connection timed out\r\n", "connection timed out"),
    ("ssh: connect to host node3 port 22: Connection refused\r\n", "connection refused"),
    ("train@node3: Permission denied (publickey).\r\n", "permission denied"),
    ("No ED25519 host key is known for node3 and you have requested strict checking.\r\nHost key verification failed.\r\n",
     "host key verification failed"),
    ("kex_exchange_identification: weird\r\n", "kex_exchange_identification: weird"),
    # What OpenSSH 9.2 prints for a key of mode 0644 before it falls back and is refused.
    ("@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\r\n@         WARNING: UNPROTECTED PRIVATE KEY FILE!          @\r\n"
     "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\r\nPermissions 0644 for '/home/train/.ssh/id_ed25519_c' are too "
     "open.\r\nThis private key will be ignored.\r\nLoad key \"/home/train/.ssh/id_ed25519_c\": bad permissions\r\n"
     "train@node3: Permission denied (publickey).\r\n", "this node's private key is readable by others"),
])
def test_diagnose(stderr, reason):
    assert mesh.diagnose(255, stderr).startswith(reason)


def test_probe_result_wrong_node_answers():
    probe = mesh.probes_for(NODES)[0]
    result = mesh.probe_result(probe, 0, "node3\n", "", 0.1)
    assert not result["ok"]
    assert result["error"] == "answered as 'node3', expected 'node2' (duplicate hostname or wrong address)"


def test_probe_result_ok_and_timeout():
    probe = mesh.probes_for(NODES)[1]
    assert mesh.probe_result(probe, 0, "node2.ml.example\n", "", 0.1)["ok"]
    timed_out = mesh.probe_result(probe, None, "", "", 15.0, timed_out=True, timeout=15)
    assert timed_out["error"] == "no answer within 15s (hung after connecting)"


def test_run_parallel_is_parallel_and_ordered():
    active, peak, lock = [0], [0], threading.Lock()

    def slow(probe):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.2)
        with lock:
            active[0] -= 1
        return probe["address"]

    probes = mesh.probes_for(NODES * 4)
    start = time.monotonic()
    out = mesh.run_parallel(probes, slow, parallel=64)
    assert out == [p["address"] for p in probes]
    assert peak[0] == len(probes)
    assert time.monotonic() - start < 3.0  # sequential would take 3.2 s (the peak above shows them all at once)


def test_probes_that_hung_are_retried_once_after_the_others():
    calls = []

    def flaky(probe):
        calls.append(probe["address"])
        hung = probe["address"] == "node3" or (probe["address"] == "node2" and calls.count("node2") == 1)
        return mesh.probe_result(probe, None if hung else 0, "" if hung else probe["expected"], "", 0.1, timed_out=hung, timeout=15)

    probes = mesh.probes_for(NODES, by=("name",))
    results = mesh.run_retrying_hangs(probes, flaky, parallel=4)
    assert [r["ok"] for r in results] == [True, False]
    assert results[1]["timed_out"] and results[1]["error"] == "no answer within 15s (hung after connecting)"
    assert sorted(calls) == ["node2", "node2", "node3", "node3"]


def test_transient_refusals_are_retried_but_not_real_errors():
    assert mesh.transient(255, "kex_exchange_identification: Connection closed by remote host\r\n", "")
    assert mesh.transient(255, "ssh_exchange_identification: read: Connection reset by peer\r\n", "")
    assert not mesh.transient(255, "train@node3: Permission denied (publickey).\r\n", "")
    assert not mesh.transient(0, "", "node2\n")
    assert mesh.transient(0, "", "")


SSH_G = """host node2
user train
hostname 10.72.0.12
port 22
userknownhostsfile ~/.ssh/known_hosts ~/.ssh/known_hosts2
globalknownhostsfile /etc/ssh/ssh_known_hosts /etc/ssh/ssh_known_hosts2
hostkeyalias none
"""


def test_ssh_config_takes_the_first_value_of_each_option():
    config = mesh.ssh_config(SSH_G + "hostname other\n")
    assert config["hostname"] == "10.72.0.12"
    assert config["userknownhostsfile"] == "~/.ssh/known_hosts ~/.ssh/known_hosts2"


@pytest.mark.parametrize("extra, key", [
    ("", "10.72.0.12"),
    ("hostkeyalias node2-key\n", "10.72.0.12"),  # the first value wins: "none" above
    ("port 2222\n", "10.72.0.12"),
])
def test_known_hosts_key_first_values(extra, key):
    assert mesh.known_hosts_key(mesh.ssh_config(SSH_G + extra), "node2") == key


def test_known_hosts_key_alias_and_port():
    config = mesh.ssh_config("hostname 10.72.0.12\nport 2222\nhostkeyalias node2-key\n")
    assert mesh.known_hosts_key(config, "node2") == "[node2-key]:2222"
    assert mesh.known_hosts_key({}, "node2") == "node2"


@pytest.mark.parametrize("resolved, known, error", [
    ({"10.72.0.12"}, True, None),
    ("node2: Name or service not known", True, "name does not resolve (missing from /etc/hosts?): node2: Name or service not known"),
    ({"10.72.0.13"}, True, "resolves to 10.72.0.13, not the training address 10.72.0.12 (stale /etc/hosts line?)"),
    ({"10.72.0.12"}, False, "host key verification would fail (known_hosts lacks this name or address)"),
])
def test_local_result(resolved, known, error):
    probe = mesh.probes_for(NODES[:1], ["name"])[0]
    result = mesh.local_result(probe, "10.72.0.12", resolved, known, 0.01)
    assert (result["ok"], result["error"], result["checked"]) == (error is None, error, "local")


TARGETS = [{"host": "node%d" % i} for i in list(range(6, 25)) + list(range(1, 5))]  # node5's view of 24 nodes


@pytest.mark.parametrize("self_host, targets, expected", [
    ("node5", TARGETS, ["node6", "node7"]),  # next two neighbours; the launcher logs into node5, not back
    ("node5", TARGETS[:7], [t["host"] for t in TARGETS[:7]]),  # 8 nodes: everyone
    ("node1", [{"host": "node%d" % i} for i in range(2, 25)], ["node%d" % i for i in range(2, 25)]),  # the launcher: everyone
])
def test_login_targets(self_host, targets, expected):
    assert mesh.login_targets(targets, self_host, 8, 2, ["node1"]) == expected


def test_logins_grow_linearly_and_every_node_is_logged_into():
    hosts = ["node%d" % i for i in range(1, 25)]
    logins = {}
    for rank, host in enumerate(hosts):
        targets = [{"host": h} for h in hosts[rank + 1:] + hosts[:rank]]
        logins[host] = mesh.login_targets(targets, host, 8, 2, ["node1"])
    assert sum(len(v) for v in logins.values()) == 23 + 23 * 2  # the launcher's, then two per other node
    inbound = {h: sum(h in v for v in logins.values()) for h in hosts}
    assert min(inbound.values()) >= 2 and max(inbound.values()) == 3  # the launcher's sshd is not overrun


def test_known_hosts_files_expand_home():
    assert mesh.known_hosts_files(mesh.ssh_config(SSH_G), "/home/train") == [
        "/home/train/.ssh/known_hosts", "/home/train/.ssh/known_hosts2", "/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2"]
