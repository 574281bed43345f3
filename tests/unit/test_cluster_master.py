# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A chosen rendezvous master (cluster_master): it gets NODE_RANK 0 and every node's MASTER_ADDR, the other nodes keep
their inventory order after it; validation refuses a host outside group cluster; the doctor, the torchrun rungs and
train's pre-flight judge by it. Unset, the first node of group cluster is the master, as before."""

import base64

import pytest
from ansible.errors import AnsibleError

from helpers.roles import ROLES, render, role_vars
from ansible_collections.trainops.cluster.plugins.filter.cluster import cluster_rank_order
from ansible_collections.trainops.cluster.plugins.plugin_utils import doctor, jobs, torchrun_verdict
from ansible_collections.trainops.cluster.plugins.plugin_utils.inventory import node_records, rank_order, validate

HOSTS = ["node1", "node2", "node3"]
ADDRESSES = {"node1": "10.72.0.11", "node2": "10.72.0.12", "node3": "10.72.0.13"}
HOSTVARS = {host: {"cluster_ip": address} for host, address in ADDRESSES.items()}
SETTINGS = {"cluster_network": "10.72.0.0/24", "cluster_master_port": 29500, "cluster_user_name": "train",
            "cluster_user_uid": 2000, "cluster_user_gid": 2000, "cluster_user_home": "/home/train",
            "cluster_nccl_port_range": "50000-51999", "cluster_mpi_btl_ports": "52000-52199",
            "cluster_mpi_oob_ports": "52200-52299", "cluster_shared_dir": "/mnt/shared"}


# The rank order.

def test_unset_the_first_node_is_the_master():
    assert rank_order(HOSTS) == rank_order(HOSTS, None) == rank_order(HOSTS, "") == HOSTS
    assert rank_order(HOSTS, "node1") == HOSTS


@pytest.mark.parametrize("master, order", [
    ("node2", ["node2", "node1", "node3"]),
    ("node3", ["node3", "node1", "node2"]),
])
def test_the_chosen_master_comes_first_and_the_others_keep_inventory_order(master, order):
    assert rank_order(HOSTS, master) == order
    assert cluster_rank_order(iter(HOSTS), master) == order
    # Rank records of that order: the master is rank 0.
    assert [(n["host"], n["rank"]) for n in node_records(HOSTVARS, order)] == list(zip(order, range(3)))


def test_a_master_outside_the_group_is_refused_by_the_filter_too():
    message = ("cluster_master node9 is not a host of group cluster (node1, node2, node3). Set it to one of them, in "
               "group_vars for group 'cluster', or leave it unset (null) for the first, node1.")
    with pytest.raises(ValueError) as error:
        rank_order(HOSTS, "node9")
    assert str(error.value) == message
    with pytest.raises(AnsibleError, match="cluster_master node9 is not a host of group cluster"):
        cluster_rank_order(HOSTS, "node9")


# Validation, before anything changes.

def validated(masters):
    nodes = node_records(HOSTVARS, HOSTS)
    return validate(nodes, {host: dict(SETTINGS, cluster_master=masters.get(host)) for host in HOSTS})


def test_validation_accepts_a_host_of_the_group_or_none():
    assert validated({host: "node2" for host in HOSTS}) == []
    assert validated({}) == []


def test_validation_refuses_a_master_outside_the_group_naming_the_variable_and_the_hosts():
    assert validated({host: "gpu9" for host in HOSTS}) == [
        "cluster_master gpu9 is not a host of group cluster (node1, node2, node3). Set it to one of them, in group_vars "
        "for group 'cluster', or leave it unset (null) for the first, node1."]


def test_validation_refuses_a_master_set_per_host():
    assert validated({"node2": "node2"}) == [
        "cluster_master differs between nodes (None on node1, node3; node2 on node2). Set it once, in group_vars for "
        "group 'cluster'."]


# The launch environment, as role launch renders it.

def launch_env(host, master):
    variables = dict(role_vars("cluster"), **role_vars("launch"))
    variables.update(hostvars=HOSTVARS, groups={"cluster": HOSTS, "all": HOSTS}, inventory_hostname=host,
                     cluster_ip=ADDRESSES[host], cluster_network="10.72.0.0/24", cluster_master=master,
                     launch_nproc=1, launch_world_size=3, launch_ifname="eth1", ansible_managed="managed")
    text = render(variables, (ROLES / "launch" / "templates" / "launch.env.j2").read_text())
    return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))


@pytest.mark.parametrize("master, ranks, address", [
    (None, {"node1": "0", "node2": "1", "node3": "2"}, "10.72.0.11"),
    ("node2", {"node2": "0", "node1": "1", "node3": "2"}, "10.72.0.12"),
    ("node3", {"node3": "0", "node1": "1", "node2": "2"}, "10.72.0.13"),
])
def test_launch_env_gives_the_master_node_rank_0_and_every_node_its_address(master, ranks, address):
    envs = {host: launch_env(host, master) for host in HOSTS}
    assert {host: env["NODE_RANK"] for host, env in envs.items()} == ranks
    assert {env["MASTER_ADDR"] for env in envs.values()} == {address}
    assert {(env["NNODES"], env["MASTER_PORT"]) for env in envs.values()} == {("3", "29500")}


def test_the_roles_name_the_master_once():
    variables = dict(role_vars("cluster"), **role_vars("torchrun"))
    variables.update(hostvars=HOSTVARS, groups={"cluster": HOSTS}, cluster_master="node2")
    assert render(variables, "{{ cluster_rank_order }}") == ["node2", "node1", "node3"]
    assert render(variables, "{{ cluster_master_addr }}") == "10.72.0.12"
    assert render(variables, "{{ torchrun_nodes }}") == ["node2", "node1", "node3"]
    assert render(variables, "{{ torchrun_master }}") == "10.72.0.12:29500"


# The doctor.

def env_of(rank, addr="10.72.0.12"):
    return {"NNODES": "3", "NODE_RANK": str(rank), "NPROC_PER_NODE": "1", "WORLD_SIZE": "3", "MASTER_ADDR": addr,
            "MASTER_PORT": "29500"}


def fails(findings):
    return [(f["node"], f["detail"]) for f in findings if f["status"] == "fail"]


NPROC = {host: 1 for host in HOSTS}
NODES = node_records(HOSTVARS, HOSTS)


def test_doctor_ranks_pass_with_the_chosen_master():
    envs = {"node1": env_of(1), "node2": env_of(0), "node3": env_of(2)}
    out = doctor.ranks(NODES, envs, NPROC, 29500, None, "node2")
    assert fails(out) == []
    assert {f["node"]: f["detail"] for f in out} == {"node1": "rank 1", "node2": "rank 0", "node3": "rank 2"}


def test_doctor_names_launch_envs_that_still_follow_the_first_node():
    envs = {host: env_of(rank, "10.72.0.11") for rank, host in enumerate(HOSTS)}
    assert fails(doctor.ranks(NODES, envs, NPROC, 29500, None, "node2")) == [
        ("node1", "NODE_RANK=0, expected 1; MASTER_ADDR=10.72.0.11, expected 10.72.0.12 (node2)"),
        ("node2", "NODE_RANK=1, expected 0; MASTER_ADDR=10.72.0.11, expected 10.72.0.12 (node2)"),
        ("node3", "MASTER_ADDR=10.72.0.11, expected 10.72.0.12 (node2)")]


def test_doctor_warns_of_the_master_port_in_use_on_the_chosen_master():
    envs = {"node1": env_of(1), "node2": env_of(0), "node3": env_of(2)}
    out = doctor.ranks(NODES, envs, NPROC, 29500, "LISTEN 0 4096 *:29500", "node2")
    assert [(f["node"], f["detail"]) for f in out if f["status"] == "warn"] == [
        ("node2", "master port 29500 is in use on node2: LISTEN 0 4096 *:29500")]


def test_doctor_unset_master_is_the_first_node():
    envs = {host: env_of(rank, "10.72.0.11") for rank, host in enumerate(HOSTS)}
    assert fails(doctor.ranks(NODES, envs, NPROC, 29500, None)) == []
    assert fails(doctor.ranks(NODES, envs, NPROC, 29500, None, None)) == []


# The torchrun rungs' judge and train's pre-flight.

def test_torchrun_places_ranks_in_node_rank_order():
    assert torchrun_verdict.expected_ranks(["node2", "node1", "node3"], {"node1": 2, "node2": 2, "node3": 2}) == {
        "node2": [0, 1], "node1": [2, 3], "node3": [4, 5]}
    launches = {"node1": env_of(1), "node2": env_of(0), "node3": env_of(2)}
    assert torchrun_verdict.launch_reasons(launches, ["node2", "node1", "node3"], "10.72.0.12:29500") == []
    launches["node3"] = env_of(2, "10.72.0.11")
    assert torchrun_verdict.launch_reasons(launches, ["node2", "node1", "node3"], "10.72.0.12:29500") == [
        "node3: MASTER_ADDR:MASTER_PORT is 10.72.0.11:29500, the cluster's master is 10.72.0.12:29500"]


def b64(env):
    return base64.b64encode("".join("%s=%s\n" % item for item in env.items()).encode()).decode()


def test_preflight_looks_at_the_master_port_on_the_chosen_master():
    envs = {"node1": b64(env_of(1)), "node2": b64(env_of(0)), "node3": b64(env_of(2))}
    matrix = {"messages": ["node3 -> node2 (29500): timed out", "node3 -> node1 (29500): timed out"]}
    listeners = {"node1": [{"port": 29500, "state": "served"}], "node2": [{"port": 29500, "state": "served"}]}
    writes = {host: {"dest": "/mnt/shared/jobs/.preflight-" + host} for host in HOSTS}
    seen = [".preflight-" + host for host in HOSTS]
    assert jobs.preflight(HOSTS, envs, "10.72.0.12:29500", matrix, listeners, writes, seen, "/mnt/shared/jobs", "node2") == [
        "node2: the master port 29500 is in use (another program listens there; a job still running?)",
        "master port: node3 -> node2 (29500): timed out"]
