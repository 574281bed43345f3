# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
import pytest

from ansible_collections.trainops.cluster.plugins.plugin_utils.inventory import (
    by_node, nfs_kernel_errors, node_errors, node_records, storage_round_trip_errors, validate)

SETTINGS = {
    "cluster_network": "10.72.0.0/24",
    "cluster_master_port": 29500,
    "cluster_user_name": "train",
    "cluster_user_uid": 2000,
    "cluster_user_gid": 2000,
    "cluster_user_home": "/home/train",
    "cluster_nccl_port_range": "50000-51999",
    "cluster_mpi_btl_ports": "52000-52199",
    "cluster_mpi_oob_ports": "52200-52299",
    "cluster_shared_dir": "/mnt/shared",
}


def cluster(hostvars, settings=None):
    hosts = list(hostvars)
    nodes = node_records(hostvars, hosts)
    by_host = {h: dict(SETTINGS, **(settings or {}).get(h, {})) for h in hosts}
    return nodes, validate(nodes, by_host)


def good():
    return {"node1": {"cluster_ip": "10.72.0.11"}, "node2": {"cluster_ip": "10.72.0.12"}, "node3": {"cluster_ip": "10.72.0.13"}}


def test_sound_inventory_has_no_errors():
    nodes, errors = cluster(good())
    assert errors == []
    assert [n["rank"] for n in nodes] == [0, 1, 2]
    assert nodes[0] == {"host": "node1", "hostname": "node1", "short": "node1", "fqdn": None, "names": ["node1"],
                        "cluster_ip": "10.72.0.11", "rank": 0}


def test_names_put_fqdn_first_and_keep_inventory_name():
    hv = {"gpu-a": {"cluster_ip": "10.72.0.11", "cluster_hostname": "node1.ml.example"}}
    nodes, errors = cluster(hv)
    assert errors == []
    assert nodes[0]["short"] == "node1"
    assert nodes[0]["names"] == ["node1.ml.example", "node1", "gpu-a"]


@pytest.mark.parametrize("ip, needle", [
    ("10.72.0.12", "node3: cluster_ip 10.72.0.12 is shared by node2, node3"),
    ("127.0.0.1", "node3: cluster_ip 127.0.0.1 is a loopback address"),
    ("10.99.0.13", "node3: cluster_ip 10.99.0.13 is outside cluster_network 10.72.0.0/24"),
    ("10.72.0.300", "node3: cluster_ip '10.72.0.300' is not a valid IP address"),
    (None, "node3: cluster_ip is not set"),
])
def test_bad_cluster_ip_names_host_and_variable(ip, needle):
    hv = good()
    hv["node3"]["cluster_ip"] = ip
    errors = cluster(hv)[1]
    assert len(errors) == 1
    assert errors[0].startswith(needle)


def test_duplicate_hostname_is_case_insensitive_and_short():
    hv = good()
    hv["node3"]["cluster_hostname"] = "NODE1.other.example"
    errors = cluster(hv)[1]
    assert errors == ["node3: hostname (short, case-insensitive) node1 is shared by node1, node3. "
                      "Hostnames must be unique or NCCL and SSH reach the wrong node: set cluster_hostname on one of them."]


def test_invalid_hostname():
    hv = good()
    hv["node2"]["cluster_hostname"] = "bad_name"
    errors = cluster(hv)[1]
    assert errors and errors[0].startswith("node2: hostname 'bad_name' is not a valid host name")


@pytest.mark.parametrize("var, value, needle", [
    ("cluster_master_port", 80, "cluster_master_port 80 must be an integer in 1024-65535"),
    ("cluster_master_port", "29500", "cluster_master_port '29500' must be an integer"),
    ("cluster_user_name", "root", "cluster_user_name 'root' is not a valid name"),
    ("cluster_user_name", "Train", "cluster_user_name 'Train' is not a valid name"),
    ("cluster_user_uid", 0, "cluster_user_uid 0 must be an integer in 1000-60000"),
    ("cluster_user_gid", 70000, "cluster_user_gid 70000 must be an integer in 1000-60000"),
    ("cluster_network", "10.72.0.0/33", "cluster_network '10.72.0.0/33' is not a CIDR network"),
    ("cluster_user_key_sources", ["10.1.0.5", "bastion"], "cluster_user_key_sources entry 'bastion' is not an address"),
])
def test_bad_settings_name_the_variable(var, value, needle):
    settings = {h: {var: value} for h in good()}
    errors = cluster(good(), settings)[1]
    assert errors[0].startswith("node1: ")
    assert needle in errors[0]


def test_management_sources_of_the_key_may_be_addresses_and_networks():
    settings = {h: {"cluster_user_key_sources": ["10.1.0.5", "192.168.0.0/16", "fd00::1"]} for h in good()}
    assert cluster(good(), settings)[1] == []


def test_cluster_wide_setting_must_not_differ_per_host():
    errors = cluster(good(), {"node2": {"cluster_user_uid": 2001}})[1]
    assert errors == ["cluster_user_uid differs between nodes (2000 on node1, node3; 2001 on node2). "
                      "Set it once, in group_vars for group 'cluster'."]


def test_empty_cluster():
    assert validate([], {}) == ["inventory: group 'cluster' has no hosts. List the training nodes under group 'cluster', "
                                "the rendezvous master first."]


def test_all_errors_reported_at_once():
    hv = {"a": {"cluster_ip": "127.0.0.1"}, "b": {"cluster_ip": "127.0.0.1"}}
    errors = cluster(hv)[1]
    assert len(errors) == 3  # two loopback, one duplicate


def state(**changes):
    base = {"host": "node2", "cluster_ip": "10.72.0.12", "addresses": ["10.71.0.12", "10.72.0.12"],
            "passwd": {"root": ["x", "0", "0"], "train": ["x", "2000", "2000"]}, "group": {"root": ["x", "0"], "train": ["x", "2000"]},
            "user_name": "train", "uid": 2000, "gid": 2000}
    base.update(changes)
    return base


def test_node_already_converged_is_fine():
    assert node_errors(state()) == []


def test_node_fresh_is_fine():
    assert node_errors(state(passwd={"root": ["x", "0", "0"]}, group={"root": ["x", "0"]})) == []


def test_node_without_cluster_ip():
    assert node_errors(state(addresses=["10.71.0.12"])) == [
        "node2: cluster_ip 10.72.0.12 is not an address of any interface here (it has 10.71.0.12). Fix cluster_ip in the inventory."]


def test_uid_and_gid_taken_by_others():
    errors = node_errors(state(passwd={"intruder": ["x", "2000", "2000"]}, group={"intruder": ["x", "2000"]}))
    assert errors == [
        "node2: cluster_user_uid 2000 already belongs to user intruder here. Choose a uid that is free on every node, or free it on node2.",
        "node2: cluster_user_gid 2000 already belongs to group intruder here. Choose a gid that is free on every node (set cluster_user_gid)."]


def test_user_exists_with_another_uid():
    errors = node_errors(state(passwd={"train": ["x", "1001", "1001"]}))
    assert errors == ["node2: user train exists with uid 1001, not cluster_user_uid 2000. Set cluster_user_uid to match, or fix the account on node2."]


def test_port_ranges_and_shared_dir():
    settings = {h: {"cluster_nccl_port_range": "29000-30000", "cluster_mpi_btl_ports": "52000", "cluster_shared_dir": "mnt"} for h in good()}
    errors = cluster(good(), settings)[1]
    assert errors == [
        "node1: cluster_shared_dir 'mnt' must be an absolute path.",
        "node1: cluster_mpi_btl_ports '52000' must be a port range lo-hi within 1024-65535, e.g. 50000-59999.",
        "node1: cluster_nccl_port_range 29000-30000 contains cluster_master_port 29500. Move one of them.",
    ] + errors[3:] and len(errors) == 9  # the same three for node2 and node3


def test_overlapping_ranges():
    settings = {h: {"cluster_mpi_oob_ports": "52100-52299"} for h in good()}
    assert cluster(good(), settings)[1][0] == ("node1: cluster_mpi_btl_ports and cluster_mpi_oob_ports overlap "
                                               "(52000-52199, 52100-52299). Give each its own ports.")


def test_a_storage_node_outside_the_cluster_serves_at_its_cluster_ip_with_the_clusters_settings():
    storage = {"cluster_nfs_server": "storage1", "cluster_nfs_server_ip": "10.72.0.50", "cluster_nfs_server_network": "10.72.0.0/24"}
    assert cluster(good(), {h: storage for h in good()})[1] == []
    # Settings in group_vars of group cluster only: the storage node does not see them.
    unseen = dict(storage, cluster_nfs_server_network=None)
    assert cluster(good(), {h: unseen for h in good()})[1] == [
        "cluster_nfs_server storage1 is a storage node outside group cluster, and it does not see the cluster's settings "
        "(cluster_network unset there, 10.72.0.0/24 on the nodes). Set the cluster-wide settings in group_vars for group all "
        "(or a group holding storage1 too), not only for group cluster."]
    for address, found in ((None, "it has none"), ("storage1.example", "'storage1.example' is not an IP address")):
        settings = {h: dict(storage, cluster_nfs_server_ip=address) for h in good()}
        assert cluster(good(), settings)[1] == [
            "cluster_nfs_server storage1 is a storage node outside group cluster, and the nodes mount its export at its "
            "cluster_ip: %s. Set cluster_ip for storage1 in the inventory (its address that the nodes reach)." % found]


def test_by_node_reads_a_path_and_gives_none_where_it_is_missing():
    hostvars = {"n1": {"facts": {"gpu": {"count": 8}}}, "n2": {"facts": {}}, "n3": {}}
    assert by_node(["n1", "n2", "n3", "n4"], hostvars, ["facts", "gpu", "count"]) == {"n1": 8, "n2": None, "n3": None, "n4": None}
    assert by_node(["n1"], hostvars, "facts") == {"n1": {"gpu": {"count": 8}}}


def test_by_node_gives_the_default_where_the_path_leads_nowhere_and_keeps_a_null():
    hostvars = {"n1": {"probe": {"results": None}}, "n2": {"probe": {}}, "n3": {"probe": None}}
    assert by_node(["n1", "n2", "n3", "n4"], hostvars, ["probe", "results"], []) == {"n1": None, "n2": [], "n3": [], "n4": []}


def test_a_read_only_port_range_that_differs_is_named_with_the_setting_that_avoids_it():
    read_only = {"writable": False, "live": "32768\t60999", "wanted": "50000-59999"}
    assert node_errors(state(port_range=read_only)) == [
        "node2: net.ipv4.ip_local_port_range cannot be set here (/proc/sys is read-only: a container?); it is 32768-60999, "
        "not cluster_nccl_port_range 50000-59999. Set firewall_pin_port_range: false for node2 to keep its own range and "
        "open it to the cluster in the firewall instead."]
    # Read-only but already right, or writable: nothing to say.
    assert node_errors(state(port_range=dict(read_only, live="50000\t59999"))) == []
    assert node_errors(state(port_range=dict(read_only, writable=True))) == []


def test_a_kernel_without_nfs_is_named_before_anything_changes():
    # As in this machine's containers: no nfsd, no NFS client, no modules directory.
    bare = {"server": True, "client": True, "filesystems": ["ext4", "proc", "tmpfs"], "modules": [], "builtin": None}
    errors = node_errors(state(nfs=bare))
    assert [e.split(" needs")[0] for e in errors] == ["node2: nfs_server_backend kernel", "node2: nfs_mount_state mounted"]
    assert "Set nfs_server_backend: ganesha (user space)" in errors[0] and "Set nfs_mount_state: present" in errors[1]
    # A module on disk, or built in, is enough (modprobe loads it).
    assert node_errors(state(nfs=dict(bare, modules=["nfsd.ko.xz", "nfs.ko.zst"]))) == []
    assert node_errors(state(nfs=dict(bare, builtin="kernel/fs/nfsd/nfsd.ko\nkernel/fs/nfs/nfs.ko\n"))) == []
    assert node_errors(state(nfs=dict(bare, server=False, filesystems=["nfs4"]))) == []


def test_a_storage_node_kernel_without_nfsd_is_named_by_its_own_name():
    kernel = {"host": "storage1", "server": True, "client": False, "filesystems": ["ext4", "proc"], "modules": [], "builtin": ""}
    errors = nfs_kernel_errors(kernel)
    assert len(errors) == 1 and errors[0].startswith("storage1: nfs_server_backend kernel needs the kernel's NFS server")
    assert nfs_kernel_errors(dict(kernel, modules=["nfsd.ko.xz"])) == []
    assert nfs_kernel_errors(dict(kernel, filesystems=["nfsd"])) == []


# Storage the cluster brings (nfs_enabled: false), as the stat module and mount_facts see it: a platform's volume at
# /mnt, the shared directory in it.
MOUNTS = {"/": {"device": "overlay", "fstype": "overlay", "options": "rw,relatime"},
          "/mnt": {"device": "10.0.0.5:/vol1", "fstype": "nfs4", "options": "rw,relatime,vers=4.1"}}


def brought(**stat):
    return {"path": "/mnt/shared", "mounts": MOUNTS,
            "stat": dict({"exists": True, "isdir": True, "uid": 2000, "gid": 2000, "mode": "0755"}, **stat)}


def test_brought_storage_the_training_user_owns_is_fine():
    assert node_errors(state(storage=brought())) == []
    # Writable through its group, or by everyone (a sticky /tmp-like share), is as good.
    assert node_errors(state(storage=brought(uid=0, gid=2000, mode="0775"))) == []
    assert node_errors(state(storage=brought(uid=0, gid=0, mode="1777"))) == []


def test_brought_storage_owned_by_root_is_named_with_its_owner_and_the_fix():
    assert node_errors(state(storage=brought(uid=0, gid=0, mode="0755"))) == [
        "node2: the training user (uid 2000) cannot write to /mnt/shared: it belongs to 0:0, mode 0755. Give it to the "
        "training user on the storage (chown 2000:2000 /mnt/shared), or set cluster_shared_dir to a directory of the share "
        "that it owns."]


def test_brought_storage_missing_or_read_only_is_named():
    [missing] = node_errors(state(storage=brought(exists=False)))
    assert missing.startswith("node2: cluster_shared_dir /mnt/shared does not exist here. With nfs_enabled: false")
    read_only = dict(brought(), mounts=dict(MOUNTS, **{"/mnt": dict(MOUNTS["/mnt"], options="ro,relatime,vers=4.1")}))
    assert node_errors(state(storage=read_only)) == [
        "node2: /mnt/shared is on a read-only mount (10.0.0.5:/vol1 at /mnt, nfs4): checkpoints and logs cannot be written "
        "there. Remount it read-write on node2, or set cluster_shared_dir to writable shared storage."]
    # The mount that holds the path is the longest one above it: a read-only /mnt/shared-old is another one.
    elsewhere = dict(brought(), mounts=dict(MOUNTS, **{"/mnt/shared-old": {"device": "x", "fstype": "ext4", "options": "ro"}}))
    assert node_errors(state(storage=elsewhere)) == []


def test_brought_storage_without_room_is_named_with_the_figure():
    full = dict(brought(), min_free_bytes=10 * 2 ** 30, mounts=dict(MOUNTS, **{"/mnt": dict(MOUNTS["/mnt"], size_available=3 * 2 ** 30)}))
    assert node_errors(state(storage=full)) == [
        "node2: only 3.0 GiB (3221225472 bytes) free in /mnt/shared (10.0.0.5:/vol1 at /mnt), below "
        "validate_storage_min_free_bytes 10.0 GiB (10737418240 bytes): checkpoints and logs need room. Free space on the "
        "storage, set cluster_shared_dir to storage with room, or lower validate_storage_min_free_bytes."]
    # Enough room, no minimum, or a size mount_facts could not read (it timed out, and warned): no error.
    assert node_errors(state(storage=dict(full, min_free_bytes=2 ** 30))) == []
    assert node_errors(state(storage=dict(full, min_free_bytes=0))) == []
    assert node_errors(state(storage=dict(full, mounts=MOUNTS))) == []


def trip(**changes):
    return dict({"host": "node2", "first": "node1", "path": "/mnt/shared", "uid": 2000, "written": True, "write_error": "",
                 "seen": True, "first_wrote": True, "removed": True, "remove_error": ""}, **changes)


def test_the_storage_round_trip_names_a_node_that_cannot_write_or_does_not_share():
    assert storage_round_trip_errors(trip()) == []
    assert storage_round_trip_errors(trip(written=False, write_error="sh: 1: cannot create /mnt/shared/.x: Permission denied\n",
                                          removed=False)) == [
        "node2: the training user (uid 2000) cannot create files in /mnt/shared: sh: 1: cannot create /mnt/shared/.x: "
        "Permission denied. Give the directory to it on the storage, or set cluster_shared_dir to a directory of the share "
        "that it owns."]
    assert storage_round_trip_errors(trip(seen=False)) == [
        "node2: /mnt/shared is not the storage that node1 wrote to: a file written there on node1 is not seen here (a local "
        "directory, or another filesystem). Mount the same shared filesystem at /mnt/shared on every node."]
    # When the first node could not write, only its own error says so: the others' missing read is no news.
    assert storage_round_trip_errors(trip(seen=False, first_wrote=False)) == []
    assert "can create files in /mnt/shared but not remove them" in storage_round_trip_errors(trip(removed=False))[0]
