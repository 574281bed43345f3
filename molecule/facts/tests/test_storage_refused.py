"""Storage the cluster brings (nfs_enabled: false, as on rented clusters): site.yml's validation, before anything
changes, accepts the shared directory every node mounts (the converge ran it, on both releases), and names with the
fix a directory the training user cannot write (owned by root), one that is not shared (each node's own), and one
mounted read-only on one node.
The doctor proves it too: no fstab entry expected, a file written as the training user on every node."""

import contextlib
import json
import time

from testbed_fixtures import CLUSTER, INVENTORY, playbook, timed

# Validation alone: the first play of site.yml is tagged always; no other stage has this tag.
VALIDATE = ["--tags", "validation-only"]
HANG_BOUND = 180


def validate(shared_dir):
    start = time.monotonic()
    run = playbook("site.yml", *VALIDATE, "-e", "cluster_shared_dir=%s" % shared_dir, timeout=HANG_BOUND)
    timed("validation of brought storage", time.monotonic() - start, HANG_BOUND)
    assert run.returncode != 0, run.stdout[-3000:] + run.stderr[-2000:]
    return run.stdout


@contextlib.contextmanager
def on_every_node(node, setup, cleanup):
    for name in CLUSTER:
        node(name).check_output(setup)
    try:
        yield
    finally:
        for name in CLUSTER:
            node(name).run(cleanup)


def test_a_directory_owned_by_root_is_refused_on_every_node(node):
    node("node1").check_output("install -d -o 0 -g 0 -m 0755 /mnt/shared/rootowned")
    try:
        out = validate("/mnt/shared/rootowned")
    finally:
        node("node1").run("rmdir /mnt/shared/rootowned")
    for name in CLUSTER:
        assert ("%s: the training user (uid 2000) cannot write to /mnt/shared/rootowned: it belongs to 0:0, mode 0755. Give it "
                "to the training user on the storage (chown 2000:2000 /mnt/shared/rootowned)" % name) in out, name


def test_a_directory_that_is_not_shared_is_refused(node):
    with on_every_node(node, "install -d -o 2000 -g 2000 /srv/local-only", "rm -rf /srv/local-only"):
        out = validate("/srv/local-only")
        # The probe files are gone again: validation changes nothing.
        for name in CLUSTER:
            assert node(name).check_output("ls -A /srv/local-only") == "", name
    for name in ("node2", "node3"):
        assert ("%s: /srv/local-only is not the storage that node1 wrote to: a file written there on node1 is not seen here"
                % name) in out, name
    assert "node1: /srv/local-only is not" not in out


def test_a_read_only_mount_on_one_node_is_refused(node):
    setup = "install -d -o 2000 -g 2000 /mnt/shared/ro-test /mnt/ro && mount --bind /mnt/shared/ro-test /mnt/ro"
    with on_every_node(node, setup, "umount /mnt/ro; rmdir /mnt/ro /mnt/shared/ro-test"):
        node("node3").check_output("mount -o remount,bind,ro /mnt/ro")
        out = validate("/mnt/ro")
    assert "node3: /mnt/ro is on a read-only mount (" in out and "at /mnt/ro" in out
    assert "node1: /mnt/ro" not in out and "node2: /mnt/ro" not in out


def doctor_storage(*args):
    playbook("doctor.yml", *args, timeout=HANG_BOUND)
    report = json.loads((INVENTORY.parent / "reports" / "doctor.json").read_text())
    return {f["node"]: f for f in report["findings"] if f["check"] == "storage"}


def test_the_doctor_proves_brought_storage_on_every_node(node):
    found = doctor_storage()
    assert {n: f["status"] for n, f in found.items()} == {n: "ok" for n in CLUSTER}, found
    node("node1").check_output("install -d -o 0 -g 0 -m 0755 /mnt/shared/rootowned")
    try:
        found = doctor_storage("-e", "cluster_shared_dir=/mnt/shared/rootowned")
    finally:
        node("node1").run("rmdir /mnt/shared/rootowned")
    for name in CLUSTER:
        assert found[name]["status"] == "fail" and "the training user cannot write to /mnt/shared/rootowned" in found[name]["detail"]
        assert "nfs_enabled: false" in found[name]["fix"]
