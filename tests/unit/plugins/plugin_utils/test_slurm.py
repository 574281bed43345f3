# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Slurm's views, on scontrol output recorded on the molecule train cluster (Debian 12, Slurm 22.05.8), node3 drained."""

from pathlib import Path

from ansible_collections.trainops.cluster.plugins.filter.slurm import slurm_cpu_layout
from ansible_collections.trainops.cluster.plugins.plugin_utils import slurm
from ansible_collections.trainops.cluster.plugins.plugin_utils.inventory import node_records

SHOW = (Path(__file__).parents[3] / "fixtures" / "slurm" / "scontrol-show-node.txt").read_text()
HOSTVARS = {"node1": {"cluster_ip": "10.98.0.11"}, "node2": {"cluster_ip": "10.98.0.12"}, "node3": {"cluster_ip": "10.98.0.13"}}
RECORDS = node_records(HOSTVARS, ["node1", "node2", "node3"])
NODES = ["node1", "node2", "node3"]


def test_parse_show_node_reads_values_with_spaces_and_nulls():
    nodes = slurm.parse_show_node(SHOW)
    assert sorted(nodes) == NODES
    node3 = nodes["node3"]
    assert node3["State"] == "IDLE+DRAIN" and node3["NodeAddr"] == "10.98.0.13"
    assert node3["Reason"] == "ECC errors on gpu 3 [root@2026-12-01T23:01:09]"
    assert node3["Gres"] is None and node3["AllocTRES"] is None and node3["CfgTRES"] == "cpu=2,mem=24105M,billing=2"
    assert nodes["node1"]["OS"].startswith("Linux 6.18.44-fc-v857 #1 SMP PREEMPT_DYNAMIC")
    assert slurm.parse_show_node("") == {}


def test_unavailable_names_the_state_and_reason():
    nodes = slurm.parse_show_node(SHOW)
    assert slurm.unavailable(nodes["node1"]) is None
    assert slurm.unavailable(nodes["node3"]) == "IDLE+DRAIN in Slurm (reason: ECC errors on gpu 3 [root@2026-12-01T23:01:09])"
    assert slurm.unavailable({"State": "DOWN+NOT_RESPONDING"}) == "DOWN+NOT_RESPONDING in Slurm"
    assert slurm.unavailable({"State": "MIXED"}) is None and slurm.unavailable({"State": "ALLOCATED"}) is None
    assert slurm.unavailable({"State": "idle*"}) == "IDLE+NOT_RESPONDING in Slurm"
    assert slurm.unavailable({"State": "IDLE+MAINT"}) == "IDLE+MAINT in Slurm"
    # Slurm's own reasons hold "key=value" text: the reason is all of it.
    rebooted = slurm.parse_show_node("NodeName=n1 State=DOWN NodeAddr=10.0.0.1 Reason=Node unexpectedly rebooted "
                                     "boot_time=1764600000 last response=1764599000 [slurm@2026-12-01T10:00:00]")["n1"]
    assert rebooted["Reason"] == ("Node unexpectedly rebooted boot_time=1764600000 last response=1764599000 "
                                  "[slurm@2026-12-01T10:00:00]") and rebooted["NodeAddr"] == "10.0.0.1"


def test_gres_gpus():
    assert [slurm.gres_gpus(g) for g in (None, "gpu:8", "gpu:h200:8(S:0-1)", "gpu:2,shard:4", "gpu:a:2,gpu:b:2")] == [0, 8, 8, 2, 4]


def test_check_records_names_each_node_and_cause():
    shown = slurm.parse_show_node(SHOW)
    shown["node2"] = dict(shown["node2"], NodeAddr="10.97.0.12", Gres="gpu:4")
    munge = {"node1": "aa", "node2": "aa", "node3": None}
    problems = slurm.check_records(RECORDS[:3], shown, {"node1": 0, "node2": 8}, munge)
    assert [(node, problem) for node, problem, _fix in problems] == [
        ("node2", "is known to Slurm at 10.97.0.12, not at its cluster_ip 10.98.0.12"),
        ("node2", "has 4 GPUs in Slurm's Gres but 8 found on the node"),
        ("node3", "has no munge key"),
        ("node3", "is IDLE+DRAIN in Slurm (reason: ECC errors on gpu 3 [root@2026-12-01T23:01:09]): jobs that need it wait")]
    assert problems[-1][2] == "fix the cause, then: scontrol update nodename=node3 state=resume"
    other_key = slurm.check_records(RECORDS[:2], shown, {}, {"node1": "aa", "node2": "bb"})
    assert other_key[0][:2] == ("node2", "has another munge key than node1: Slurm refuses its credentials (Invalid "
                                         "credential, Zero Bytes were transmitted)")
    assert slurm.check_records(RECORDS, {}, {}, {})[0][1] == "is not a Slurm node (slurm.conf lists no node1)"
    # The key most nodes hold is the reference: a stale key on the first node is named there, not on the others.
    stale_first = slurm.check_records(RECORDS, shown, {}, {"node1": "old", "node2": "new", "node3": "new"})
    assert [(node, problem[:40]) for node, problem, _fix in stale_first if "munge" in problem] == [
        ("node1", "has another munge key than node2: Slurm ")]


def test_check_records_uses_slurms_short_names():
    records = node_records({"a": {"cluster_ip": "10.98.0.11", "cluster_hostname": "node1.example.org"}}, ["a"])
    assert slurm.check_records(records, {"node1": {"State": "IDLE", "NodeAddr": "10.98.0.11"}}, {}, {}) == []


def test_job_state_reads_squeue():
    assert slurm.job_state("") == {"ActiveState": "inactive"}
    assert slurm.job_state("18|RUNNING|2026-12-01T22:54:21|node[1-3]\n") == {
        "ActiveState": "active", "SlurmJobId": "18", "SlurmState": "RUNNING", "ExecMainStartTimestamp": "2026-12-01T22:54:21",
        "SlurmNodes": "node[1-3]", "SlurmReason": None}
    assert slurm.job_state("19|PENDING|N/A||Resources")["ActiveState"] == "activating"
    assert slurm.job_state("19|PENDING|N/A||ReqNodeNotAvail")["SlurmReason"] == "ReqNodeNotAvail"
    assert slurm.job_state("19|PENDING|N/A|")["ExecMainStartTimestamp"] is None
    assert slurm.job_state("19|COMPLETING|2026-12-01T22:54:21|node1")["ActiveState"] == "deactivating"


def test_cpu_layout_states_sockets_cores_and_threads_where_they_make_up_the_cpus():
    h200_server = {"processor_vcpus": 224, "processor_count": 2, "processor_cores": 56, "processor_threads_per_core": 2}
    assert slurm.cpu_layout(h200_server) == {"CPUs": 224, "Sockets": 2, "CoresPerSocket": 56, "ThreadsPerCore": 2}
    assert slurm_cpu_layout(h200_server) == "CPUs=224 Sockets=2 CoresPerSocket=56 ThreadsPerCore=2"
    # This machine's two vCPUs, as the podman nodes see them.
    assert slurm.cpu_layout({"processor_vcpus": 2, "processor_count": 1, "processor_cores": 2, "processor_threads_per_core": 1}) == {
        "CPUs": 2, "Sockets": 1, "CoresPerSocket": 2, "ThreadsPerCore": 1}


def test_cpu_layout_states_cpus_alone_where_the_layout_does_not_add_up():
    # A cpuinfo without physical ids: every CPU counted as a socket of the reported cores.
    assert slurm.cpu_layout({"processor_vcpus": 144, "processor_count": 144, "processor_cores": 72, "processor_threads_per_core": 1}) == {
        "CPUs": 144}
    assert slurm.cpu_layout({"processor_vcpus": 8, "processor_count": "NA"}) == {"CPUs": 8}
    assert slurm.cpu_layout({"processor_vcpus": 8}) == {"CPUs": 8}
