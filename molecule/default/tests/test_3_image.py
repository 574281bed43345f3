"""The same image everywhere, pinned by digest; an impostor corrected; the archive path; the wrapper's container."""

import json

import pytest
from testbed_fixtures import CLUSTER, HOSTVARS, INVENTORY, playbook, playbook_run, training_interface

# A tag on purpose (inventory/group_vars/all.yml): the role pins it to its digest, served by the registry on node1.
IMAGE = HOSTVARS[CLUSTER[0]]["training_image"]
REPO = IMAGE.rsplit(":", 1)[0]
UID = HOSTVARS[CLUSTER[0]]["cluster_user_uid"]


def image_id(host, ref):
    return json.loads(host.check_output("podman image inspect %s", ref))[0]["Id"]


def pinned(host):
    """The digest reference that trainops-run starts."""
    return host.file("/usr/local/bin/trainops-run").content_string.strip().split()[-2]


def test_every_node_runs_the_same_image_by_digest(node):
    refs = {name: pinned(node(name)) for name in CLUSTER}
    assert len(set(refs.values())) == 1 and refs["node1"].startswith(REPO + "@sha256:")
    ids = {name: image_id(node(name), refs[name]) for name in CLUSTER}
    assert len(set(ids.values())) == 1
    # The tag now names that image everywhere, node2's impostor included.
    assert {name: image_id(node(name), IMAGE) for name in CLUSTER} == ids
    assert node("node2").check_output("podman run --rm %s cat /etc/probe", IMAGE) == "probe-1"


def test_drift_report_compares_the_image():
    report = json.loads((INVENTORY.parent / "reports" / "drift.json").read_text())
    row = next(r for r in report["rows"] if r["key"] == "image")
    assert row["consistent"] and row["severity"] == "critical" and set(row["values"]) == set(CLUSTER)


def test_wrapper_starts_the_image_with_the_launch_environment(node):
    host = node("node2")
    host.check_output("TRAINOPS_RUN_OPTS='--detach --name wrapper-probe' trainops-run sleep 300")
    try:
        info = json.loads(host.check_output("podman inspect wrapper-probe"))[0]
        hc, config = info["HostConfig"], info["Config"]
        assert hc["NetworkMode"] == "host"
        # Host IPC (the host's /dev/shm), read from the namespaces: podman 4.3's inspect says "shareable" either way.
        ns = host.check_output("readlink /proc/%s/ns/ipc /proc/1/ns/ipc", str(info["State"]["Pid"])).split()
        assert ns[0] == ns[1]
        limits = {u["Name"]: (u["Soft"], u["Hard"]) for u in hc["Ulimits"]}
        assert limits["RLIMIT_MEMLOCK"] == (8388608, 8388608) and limits["RLIMIT_STACK"] == (67108864, 67108864)
        assert any(m["Destination"] == "/mnt/shared" and m["Source"] == "/mnt/shared" for m in info["Mounts"])
        assert config["User"] == "%d:%d" % (UID, UID)
        env = dict(item.split("=", 1) for item in config["Env"])
        assert (env["NODE_RANK"], env["NNODES"], env["MASTER_ADDR"], env["MASTER_PORT"]) == ("1", "3", HOSTVARS["node1"]["cluster_ip"], "29500")
        assert env["NCCL_SOCKET_IFNAME"] == training_interface("node2")
        assert info["ImageName"] == pinned(host)
        assert host.check_output("podman exec wrapper-probe id -u") == str(UID)
    finally:
        host.run("podman rm -f wrapper-probe")


@pytest.mark.parametrize("name", CLUSTER)
def test_launch_env_ranks(node, name):
    env = node(name).file("/etc/trainops/launch.env").content_string
    assert "NODE_RANK=%d\n" % CLUSTER.index(name) in env and "MASTER_ADDR=%s\n" % HOSTVARS["node1"]["cluster_ip"] in env


def test_a_node_with_another_image_is_named_and_corrected(node):
    node("node3").check_output("podman tag localhost/trainops-probe:2 %s 2>/dev/null || podman load -i /srv/probe-2.tar"
                               " && podman tag localhost/trainops-probe:2 %s", IMAGE, IMAGE)
    # containers.yml is site.yml's image stage (site.yml imports it) without the validation the converge proved.
    run = playbook("containers.yml")
    assert run.returncode == 0, run.stdout[-3000:]
    assert "node3 held sha256:" in run.stdout and "under %s" % IMAGE in run.stdout
    assert image_id(node("node3"), IMAGE) == image_id(node("node1"), IMAGE)


def test_archive_source_loads_the_same_image_everywhere(node):
    args = ["-e", "training_image_source=archive", "-e", "training_image=localhost/trainops-probe:2",
            "-e", "training_image_archive=/srv/probe-2.tar"]
    configured = {name: pinned(node(name)) for name in CLUSTER}
    try:
        first = playbook("containers.yml", *args)
        assert first.returncode == 0, first.stdout[-3000:]
        ids = {name: image_id(node(name), "localhost/trainops-probe:2") for name in CLUSTER}
        assert len(set(ids.values())) == 1
        again = playbook_run("containers.yml", *args)
        assert again.rc == 0, again.stdout[-3000:]
        assert sorted(again.stats["ok"]) == sorted(CLUSTER)
        assert [again.changed(name) for name in again.stats["ok"]] == [0] * len(CLUSTER)
    finally:
        # The tests after this one (network, doctor) need the configured image back in trainops-run.
        back = playbook("containers.yml")
        assert back.returncode == 0, back.stdout[-3000:]
        assert {name: pinned(node(name)) for name in CLUSTER} == configured
