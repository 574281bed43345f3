# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
import json
from pathlib import Path

from ansible_collections.trainops.cluster.plugins.plugin_utils import doctor
from ansible_collections.trainops.cluster.plugins.plugin_utils import slurm as slurm_state
from ansible_collections.trainops.cluster.plugins.plugin_utils.inventory import node_records

HOSTVARS = {"node1": {"cluster_ip": "10.0.0.1"}, "node2": {"cluster_ip": "10.0.0.2"}, "node3": {"cluster_ip": "10.0.0.3"}}
NODES = node_records(HOSTVARS, ["node1", "node2", "node3"])
MODEL = json.loads((Path(__file__).parents[3] / "fixtures" / "models" / "llama-2-7b-config.json").read_text())


def env(rank, **changes):
    base = {"NNODES": "3", "NODE_RANK": str(rank), "NPROC_PER_NODE": "1", "WORLD_SIZE": "3", "MASTER_ADDR": "10.0.0.1",
            "MASTER_PORT": "29500", "NCCL_SOCKET_IFNAME": "eth1"}
    base.update(changes)
    return base


def fails(findings):
    return [(f["node"], f["detail"]) for f in findings if f["status"] == "fail"]


def test_parse_env():
    assert doctor.parse_env("# c\nNODE_RANK=1\nX=a=b\n\n") == {"NODE_RANK": "1", "X": "a=b"}
    assert doctor.parse_env(None) is None


def test_names_missing_line_loopback_and_duplicate_hostname():
    good = {name: n["cluster_ip"] for n in NODES for name in n["names"]}
    resolved = {"node1": dict(good, node2=None), "node2": dict(good, node2="127.0.1.1"), "node3": good}
    hostnames = {"node1": "node1", "node2": "node2", "node3": "node2"}
    assert fails(doctor.names(NODES, resolved, hostnames)) == [
        ("node1", "cannot resolve node2"),
        ("node2", "resolves node2 to loopback 127.0.1.1; has the same hostname (node2) as node3"),
        ("node3", "its hostname is node2, not node3; has the same hostname (node2) as node2")]


def test_interface_missing_and_wrong():
    interfaces = [{"name": "eth0", "addresses": ["10.9.0.2/24"]}, {"name": "eth1", "addresses": ["10.0.0.2/24"]}]
    assert doctor.interface("node2", env(1), interfaces, "10.0.0.2", [])[0]["status"] == "ok"
    assert fails(doctor.interface("node2", env(1, NCCL_SOCKET_IFNAME="ib9"), interfaces, "10.0.0.2", [])) == [
        ("node2", "NCCL_SOCKET_IFNAME=ib9: no such interface (cluster_ip 10.0.0.2 is on eth1)")]
    assert fails(doctor.interface("node2", env(1, NCCL_SOCKET_IFNAME="eth0"), interfaces, "10.0.0.2",
                                  [{"device": "mlx5_0", "port": 1, "state": "DOWN"}])) == [
        ("node2", "NCCL_SOCKET_IFNAME=eth0 does not hold cluster_ip 10.0.0.2 (eth1 does)"),
        ("node2", "InfiniBand/RoCE ports not active: mlx5_0:1 DOWN")]


def test_ranks():
    nproc = {"node1": 1, "node2": 1, "node3": 1}
    envs = {"node1": env(0), "node2": env(0), "node3": env(2, MASTER_ADDR="127.0.0.1")}
    out = doctor.ranks(NODES, envs, nproc, 29500, "LISTEN 0 4096 *:29500 users:((\"python\",pid=7))")
    assert fails(out) == [("node2", "NODE_RANK=0, expected 1 (also on node1)"),
                          ("node3", "MASTER_ADDR=127.0.0.1 is loopback: every node would wait for itself")]
    assert [f["status"] for f in out if f["node"] == "node1"] == ["ok", "warn"]
    assert fails(doctor.ranks(NODES, {"node1": env(0), "node2": None, "node3": env(2)}, nproc, 29500, None)) == [
        ("node2", "no launch environment (launch.env missing)")]
    unknown = dict(nproc, node3=None)  # node3 unreachable: the world size cannot be judged
    assert fails(doctor.ranks(NODES, {"node1": env(0, WORLD_SIZE="7"), "node2": env(1)}, unknown, 29500, None)) == []


def test_limits():
    assert fails(doctor.limits("node2", 64 * 2 ** 20, "unlimited", "inside trainops-run", 2 ** 30)) == [
        ("node2", "/dev/shm inside trainops-run is 64 MiB (< 1024 MiB): NCCL's shared memory and data loaders run out")]
    assert doctor.limits("node2", 2 ** 34, "unlimited", "inside trainops-run", 2 ** 30)[0]["status"] == "ok"


def test_storage():
    ok = {"present": True, "source": "10.0.0.1:/srv", "mounted": True, "expect_mounted": True, "writable": True, "sees": True,
          "free_bytes": 2 ** 40}
    state = {"node1": ok, "node2": dict(ok, present=False, mounted=False, source=None), "node3": dict(ok, sees=False, free_bytes=2 ** 30)}
    assert fails(doctor.storage(["node1", "node2", "node3"], state, "/mnt/shared", 10 * 2 ** 30)) == [
        ("node2", "no /mnt/shared entry in /etc/fstab; /mnt/shared is not mounted"),
        ("node3", "does not see the file another node wrote to /mnt/shared; only 1 GiB free in /mnt/shared (< 10 GiB)")]


def test_brought_storage_needs_no_fstab_entry_and_is_judged_by_its_round_trip():
    ok = {"expect_fstab": False, "present": False, "source": None, "mounted": None, "expect_mounted": True, "writable": True,
          "sees": True, "free_bytes": 2 ** 40}
    state = {"node1": ok, "node2": dict(ok, writable=False), "node3": dict(ok, sees=False)}
    found = doctor.storage(["node1", "node2", "node3"], state, "/mnt/shared", 10 * 2 ** 30)
    assert fails(found) == [("node2", "the training user cannot write to /mnt/shared"),
                            ("node3", "does not see the file another node wrote to /mnt/shared")]
    assert all("nfs_enabled: false" in f["fix"] for f in found if f["status"] == "fail")


def test_a_slow_read_of_the_storage_is_a_warning_naming_the_node_beside_its_other_finding():
    ok = {"expect_fstab": False, "present": False, "source": None, "mounted": None, "expect_mounted": True, "writable": True,
          "sees": True, "free_bytes": 2 ** 40, "read_mbps": 812.5, "read_warning": None}
    slow = "node2: shared storage /mnt/shared read at 95.2 MB/s with every node reading at once, below 200 MB/s. Stage datasets ..."
    state = {"node1": ok, "node2": dict(ok, read_mbps=95.2, read_warning=slow), "node3": dict(ok, read_mbps=None)}
    found = doctor.storage(["node1", "node2", "node3"], state, "/mnt/shared", 10 * 2 ** 30)
    assert [(f["node"], f["status"], f["detail"]) for f in found] == [
        ("node1", "ok", "/mnt/shared in place, read at 812.5 MB/s with every node at once"),
        ("node2", "ok", "/mnt/shared in place, read at 95.2 MB/s with every node at once"),
        ("node2", "warn", slow),
        ("node3", "ok", "/mnt/shared in place")]
    assert "Stage datasets on local disk" in found[2]["fix"]
    assert doctor.summarize(found)["ok"]  # a warning fails nothing


def test_plan():
    assert fails(doctor.plan(MODEL, 3, 1, 6)) == [
        ("-", "tensor parallel 3 does not divide 32 attention heads; tensor parallel 3 does not divide 32 KV heads (nor replicates them evenly)")]
    assert doctor.plan(MODEL, 2, 2, 8)[0]["status"] == "ok"
    assert fails(doctor.plan(MODEL, 4, 3, 24))[0][1] == "pipeline parallel 3 does not divide 32 layers"


def test_gpus_and_summary():
    facts = {"gpu_count": 7, "xid_errors": [{"xid": 79, "pci": "0000:3b:00"}]}
    findings = doctor.gpus("node2", facts, 8) + doctor.reachable(["node1", "node3"], ["node3"])
    summary = doctor.summarize(findings)
    assert not summary["ok"] and summary["failed_checks"] == ["reachable", "gpus"]
    assert summary["rows"][0][:3] == ["reachable", "node3", "FAIL"]
    assert ("node2", "Xid errors since boot: 79 on 0000:3b:00") in fails(findings)
    app = doctor.gpus("node1", {"gpu_count": 8, "xid_errors": [{"xid": 13, "pci": "0000:3b:00"}]}, 8)
    assert [f["status"] for f in app] == ["warn"]


def test_a_gpus_health_is_a_finding_naming_the_node_the_gpu_and_the_threshold():
    sick = {"index": 3, "pci_bus_id": "00000000:9E:00.0", "persistence_mode": "Enabled",
            "health": {"remapped_rows": {"correctable": 1, "uncorrectable": 0, "pending": True, "failure": False}}}
    well = {"index": 0, "pci_bus_id": "00000000:18:00.0", "persistence_mode": "Enabled", "health": {}}
    found = doctor.gpus("node2", {"gpu_count": 2, "gpus": [well, sick], "xid_errors": []}, 2)
    assert fails(found) == [("node2", "GPU 3 (00000000:9E:00.0): a row remap is pending: Yes (threshold: none pending)")]
    assert found[0]["check"] == "gpu health" and found[0]["fix"].startswith("Drain the node, reset the GPU")
    assert doctor.gpus("node1", {"gpu_count": 1, "gpus": [well], "xid_errors": []}, 1)[0]["detail"] == \
        "1 GPUs, no Xid errors; ECC, memory and clocks healthy"


def test_a_down_node_is_named_once_not_blamed_on_the_others():
    good = {name: n["cluster_ip"] for n in NODES for name in n["names"]}
    resolved = {"node1": good, "node2": good}  # node3 is down: only the others resolved names
    assert fails(doctor.names(NODES, resolved, {"node1": "node1", "node2": "node2"})) == []
    drift = {"hosts": ["node1", "node2", "node3"], "rows": [
        {"key": "net plugins", "consistent": False, "severity": "critical", "majority": [], "odd_hosts": ["node3"],
         "values": {"node1": [], "node2": [], "node3": None}},
        {"key": "nccl", "consistent": False, "severity": "critical", "majority": "2.21.5", "odd_hosts": ["node2"],
         "values": {"node1": "2.21.5", "node2": "2.19.3", "node3": None}}]}
    assert fails(doctor.versions(drift, ["node1", "node2"])) == [("node2", "nccl is 2.19.3, others 2.21.5")]


def test_an_interface_set_down_is_named_though_it_keeps_its_address():
    interfaces = [{"name": "eth0", "state": "UP", "addresses": ["10.9.0.2/24"]},
                  {"name": "eth1", "state": "DOWN", "addresses": ["10.0.0.2/24"]}]
    assert fails(doctor.interface("node2", env(1), interfaces, "10.0.0.2", [])) == [
        ("node2", "eth1 is DOWN (it holds cluster_ip 10.0.0.2): every path to and from node2 times out")]
    # Virtual links without carrier detection say UNKNOWN: not down.
    interfaces[1]["state"] = "UNKNOWN"
    assert fails(doctor.interface("node2", env(1), interfaces, "10.0.0.2", [])) == []


def test_the_training_users_ids_on_every_node():
    user = {"name": "train", "uid": "2000", "gid": "2000"}
    accounts = {"node1": ["x", "2000", "2000", "", "/home/train", "/bin/bash"], "node2": ["x", "2001", "2000", "", "/home/train", "/bin/bash"],
                "node3": None}
    assert fails(doctor.users(["node1", "node2", "node3"], accounts, user)) == [
        ("node2", "train is uid 2001 gid 2000, not 2000:2000 (cluster_user_uid, cluster_user_gid): its files on shared storage "
                  "belong to someone else on the other nodes"),
        ("node3", "no user train")]


def test_the_ssh_verdict_says_what_a_login_proved():
    nodes = ["node%d" % i for i in range(1, 11)]
    # Above 8 nodes node5 logs into its 2 neighbours and the launcher; the other pairs are checked without a login.
    cells = {n: ["-" if m == n else "ok*" for m in nodes] for n in nodes}
    cells["node5"] = ["ok", "ok*", "ok*", "ok*", "-", "ok", "ok", "ok*", "ok*", "ok*"]
    summary = {"failures": [], "rows": [[n] + cells[n] for n in nodes]}
    found = {f["node"]: f["detail"] for f in doctor.ssh(summary, nodes)}
    assert found["node5"] == ("logs into 3 nodes; 6 more checked without a login (name -> training address, known_hosts; "
                              "the port matrix connects to their port 22)")
    small = {"failures": [], "rows": [["node1", "-", "ok"], ["node2", "ok", "-"]]}
    assert [f["detail"] for f in doctor.ssh(small, ["node1", "node2"])] == ["logs into every node (1)", "logs into every node (1)"]


def test_slurm_names_a_drained_node_and_a_munge_key_that_differs():
    show = ("NodeName=node1 State=IDLE NodeAddr=10.0.0.1 Gres=(null)\n"
            "NodeName=node2 State=IDLE+DRAIN NodeAddr=10.0.0.2 Gres=(null) Reason=maint [root@2026-12-01T10:00:00]\n"
            "NodeName=node3 State=ALLOCATED NodeAddr=10.0.0.3 Gres=(null)\n")
    out = doctor.slurm(NODES, ["node1", "node2", "node3"], slurm_state.parse_show_node(show), {},
                       {"node1": "k1", "node2": "k1", "node3": "k2"}, "node1")
    assert fails(out) == [
        ("node2", "is IDLE+DRAIN in Slurm (reason: maint [root@2026-12-01T10:00:00]): jobs that need it wait"),
        ("node3", "has another munge key than node1: Slurm refuses its credentials (Invalid credential, Zero Bytes were "
                  "transmitted)")]
    assert [(f["node"], f["detail"]) for f in out if f["status"] == "ok"] == [("node1", "takes work (IDLE)")]
    # A node the controller did not answer for is not judged; slurmctld silent is one failure, not three.
    assert [f["node"] for f in doctor.slurm(NODES, ["node1"], slurm_state.parse_show_node(show), {}, {}, "node1")] == ["node1"]
    assert fails(doctor.slurm(NODES, ["node1"], None, {}, {}, "node2")) == [("node2", "slurmctld did not answer scontrol on node2")]


def test_stacks_a_node_whose_root_may_not_trace_is_warned_with_what_to_grant():
    denied = {"ptrace_scope": 1, "cap_sys_ptrace": False, "tried": True, "error": "Error: Permission denied (os error 13)",
              "grant": "root here lacks CAP_SYS_PTRACE (a container started without it): start the node's container with --cap-add SYS_PTRACE"}
    [found] = doctor.stacks("node2", denied)
    assert (found["status"], found["fix"]) == ("warn", denied["grant"])
    assert found["detail"].startswith("a stall's diagnosis cannot read the ranks' Python stacks (Error: Permission denied (os error 13))")
    # py-spy not installed yet, the kernel allows it; py-spy tried and read a stack.
    assert doctor.stacks("node1", {"ptrace_scope": 1, "cap_sys_ptrace": True, "tried": False, "error": None, "grant": None})[0]["status"] == "ok"
    assert doctor.stacks("node1", {"ptrace_scope": 0, "cap_sys_ptrace": True, "tried": True, "error": None, "grant": None})[0]["detail"] == (
        "py-spy reads a rank's stack as root")
    # py-spy failed where the kernel gives no reason (a seccomp profile, say): the usual grant is suggested.
    assert doctor.stacks("node3", {"ptrace_scope": 1, "cap_sys_ptrace": True, "tried": True, "error": "Error: Operation not permitted",
                                   "grant": None})[0]["fix"] == doctor.STACKS_FIX
