# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Spare nodes (group cluster_spare, a child of group cluster): converged like every node, outside the training world.
Validation refuses a spare outside group cluster, a spare master and a world of spares alone; launch.env gives a spare
NNODES of the world and a NODE_RANK past its last; the doctor judges it so; the ladder's plays leave it out without
calling themselves limited; a job's settings list the spares apart from its nodes."""

import json

import pytest

from helpers.roles import ROLES, render, role_vars
from ansible_collections.trainops.cluster.plugins.plugin_utils import doctor
from ansible_collections.trainops.cluster.plugins.plugin_utils.inventory import node_records, validate

WORLD = ["node1", "node2", "node3"]
HOSTS = WORLD + ["node4"]
ADDRESSES = {host: "10.72.0.1%d" % (i + 1) for i, host in enumerate(HOSTS)}
HOSTVARS = {host: {"cluster_ip": address} for host, address in ADDRESSES.items()}
SETTINGS = {"cluster_network": "10.72.0.0/24", "cluster_master_port": 29500, "cluster_user_name": "train",
            "cluster_user_uid": 2000, "cluster_user_gid": 2000, "cluster_user_home": "/home/train",
            "cluster_nccl_port_range": "50000-51999", "cluster_mpi_btl_ports": "52000-52199",
            "cluster_mpi_oob_ports": "52200-52299", "cluster_shared_dir": "/mnt/shared", "cluster_master": None}
# Ansible lists a group's own hosts, then its children's.
GROUPS = {"cluster": HOSTS, "cluster_spare": ["node4"], "all": HOSTS}


def validated(hosts, spares, master=None):
    return validate(node_records(HOSTVARS, hosts), {h: dict(SETTINGS, cluster_master=master) for h in hosts}, spares)


def test_validation_accepts_spares_of_group_cluster():
    assert validated(HOSTS, ["node4"]) == []


@pytest.mark.parametrize("hosts, spares, master, error", [
    (WORLD, ["node4"], None, "node4: a host of group cluster_spare outside group cluster. Make cluster_spare a child group of "
                             "cluster (children: cluster_spare under cluster), so that site.yml converges it like every node."),
    (HOSTS, ["node4"], "node4", "cluster_master node4 is a spare (group cluster_spare): the rendezvous master must be a node of "
                                "the training world. Choose another, or take node4 out of cluster_spare."),
    (["node4"], ["node4"], None, "inventory: every host of group cluster is a spare (group cluster_spare): leave at least one node "
                                 "outside cluster_spare to train on."),
])
def test_validation_refuses_a_spare_it_cannot_use_naming_it(hosts, spares, master, error):
    assert validated(hosts, spares, master) == [error]


def cluster_vars(**more):
    return dict(role_vars("cluster"), **dict({"hostvars": HOSTVARS, "groups": GROUPS, "cluster_master": None}, **more))


def test_the_world_leaves_the_spares_out_and_a_play_of_the_world_is_not_limited():
    assert render(cluster_vars(), "{{ cluster_world }}") == WORLD
    assert render(cluster_vars(), "{{ cluster_rank_order }}") == WORLD
    assert render(cluster_vars(cluster_master="node2"), "{{ cluster_rank_order }}") == ["node2", "node1", "node3"]
    limited = {tuple(play): render(cluster_vars(ansible_play_hosts_all=play), "{{ cluster_limited }}")
               for play in (HOSTS, WORLD, ["node1", "node2", "node4"], ["node1", "node2"])}
    assert limited == {tuple(HOSTS): False, tuple(WORLD): False, ("node1", "node2", "node4"): True, ("node1", "node2"): True}
    # The NFS server and the Slurm controller default to the world's first node, never a spare.
    spare_first = cluster_vars(groups=dict(GROUPS, cluster=["node4"] + WORLD))
    assert render(spare_first, "{{ cluster_nfs_server }}") == render(spare_first, "{{ cluster_slurm_controller }}") == "node1"


def launch_env(host):
    variables = dict(role_vars("cluster"), **role_vars("launch"))
    variables.update(hostvars=HOSTVARS, groups=GROUPS, inventory_hostname=host, cluster_ip=ADDRESSES[host],
                     cluster_network="10.72.0.0/24", cluster_master=None, launch_nproc=1, launch_world_size=3,
                     launch_ifname="eth1", ansible_managed="managed")
    text = render(variables, (ROLES / "launch" / "templates" / "launch.env.j2").read_text())
    return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#")), text


def test_launch_env_gives_a_spare_the_worlds_size_and_a_rank_past_its_last():
    envs = {host: launch_env(host)[0] for host in HOSTS}
    assert {host: (env["NODE_RANK"], env["NNODES"]) for host, env in envs.items()} == {
        "node1": ("0", "3"), "node2": ("1", "3"), "node3": ("2", "3"), "node4": ("3", "3")}
    assert "# A spare (group cluster_spare)" in launch_env("node4")[1] and "spare" not in launch_env("node1")[1]
    world = dict(role_vars("cluster"), **role_vars("launch"))
    world.update(hostvars={h: dict(v, launch_nproc=8) for h, v in HOSTVARS.items()}, groups=GROUPS, cluster_master=None,
                 launch_outside={"results": []})
    assert render(world, "{{ launch_world_size }}") == 24


def test_the_doctor_judges_a_spare_outside_the_world():
    nodes = node_records(HOSTVARS, HOSTS)
    envs = {host: {"NNODES": "3", "NODE_RANK": str(rank), "NPROC_PER_NODE": "1", "WORLD_SIZE": "3",
                   "MASTER_ADDR": ADDRESSES["node1"], "MASTER_PORT": "29500"} for rank, host in enumerate(HOSTS)}
    nproc = {host: 1 for host in HOSTS}
    found = {f["node"]: (f["status"], f["detail"]) for f in doctor.ranks(nodes, envs, nproc, 29500, None, None, ["node4"])}
    assert found == {"node1": ("ok", "rank 0"), "node2": ("ok", "rank 1"), "node3": ("ok", "rank 2"),
                     "node4": ("ok", "spare: NODE_RANK 3, outside the world until a job's restart brings it in")}
    # Without the spare known, the same launch.env is wrong four times over.
    assert len([f for f in doctor.ranks(nodes, envs, nproc, 29500, None) if f["status"] == "fail"]) == 4


def test_a_jobs_settings_list_its_world_and_its_spares_apart():
    variables = dict(role_vars("cluster"), **role_vars("train"))
    text = (ROLES / "train" / "templates" / "job.json.j2").read_text()
    variables.update(hostvars=HOSTVARS, groups=GROUPS, inventory_hostname="node4", cluster_master=None, cluster_network="10.72.0.0/24",
                     train_job="j1", train_command="true", train_dir="/mnt/shared/jobs/j1", train_run_id="r1",
                     train_supervisor_used="systemd", train_in_image=False, train_run_opts=[],
                     train_resume={"dir": "/mnt/shared/jobs/j1/checkpoints", "world": 3}, train_resume_override="",
                     train_checkpoint_dir="/mnt/shared/jobs/j1/checkpoints", train_min_nodes=None, train_stall_seconds=None,
                     train_record={})
    conf = json.loads(render(variables, text))
    assert (conf["nodes"], conf["spares"], conf["min_nodes"]) == (WORLD, ["node4"], 3)
    assert sorted(conf["addresses"]) == HOSTS
