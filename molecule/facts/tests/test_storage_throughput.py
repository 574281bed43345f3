"""Storage the cluster brings, proven before anything changes: its free space against a minimum, and a short read
throughput check with every node reading one test file at once (a figure per node; a warning naming the node below
the threshold, not a failure). The doctor makes a slow read a warning finding."""

import json
import re
import time

from testbed_fixtures import CLUSTER, INVENTORY, playbook, timed

# Validation alone: the first play of site.yml is tagged always; no other stage has this tag.
VALIDATE = ["--tags", "validation-only"]
HANG_BOUND = 180
SIZE_MIB = 16  # validate_storage_read_mib of this scenario's group_vars
FIGURE = r"(\d+(?:\.\d+)?) MB/s"
# Molecule forces colour on the playbooks the tests run: the recap's counts sit between escape codes.
COLOUR = re.compile(r"\x1b\[[0-9;]*m")


def validate(*args):
    start = time.monotonic()
    run = playbook("site.yml", *VALIDATE, *args, timeout=HANG_BOUND)
    timed("validation with the storage read check", time.monotonic() - start, HANG_BOUND)
    return run


def test_every_node_reports_its_read_figure_and_the_check_is_timed(node):
    run = validate()
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    out = run.stdout
    took = re.search(r"every node reading one %d MiB test file at once \(the check took ([\d.]+) s, the reads began within "
                     r"([\d.]+) s of each other\)" % SIZE_MIB, out)
    assert took, out[-3000:]
    timed("storage read throughput check (3 nodes, %d MiB)" % SIZE_MIB, float(took.group(1)), 60)
    # Every node waited for the common start: the reads began together, not one after another.
    assert float(took.group(2)) < 0.5, took.group(0)
    for name in CLUSTER:
        line = re.search(r"%s: %s reading %d MiB of /mnt/shared/.trainops-storage-check-read in [\d.]+ s" % (name, FIGURE, SIZE_MIB), out)
        assert line and float(line.group(1)) > 0, name
    # A fast enough share is no warning, and the test file is gone again: validation changes nothing.
    assert "WARNING node" not in out
    assert node("node1").check_output("ls -A /mnt/shared") == ""


def test_an_unreachable_threshold_warns_naming_each_node_and_its_figure_and_fails_nothing():
    run = validate("-e", "validate_storage_min_read_mbps=1000000000")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    for name in CLUSTER:
        warning = re.search(r"WARNING %s: shared storage /mnt/shared read at %s with every node reading at once, below "
                            r"1000000000 MB/s\. Stage datasets on local disk" % (name, FIGURE), run.stdout)
        assert warning, name
        # The figure in the warning is the node's own, as its line of the figures says.
        assert re.search(r"%s: %s MB/s reading" % (name, re.escape(warning.group(1))), run.stdout), name


def test_too_little_free_space_fails_validation_before_anything_changes(node):
    run = playbook("site.yml", "-e", "validate_storage_min_free_bytes=%d" % 2 ** 60, timeout=HANG_BOUND)
    assert run.returncode != 0
    for name in CLUSTER:
        assert re.search(r"%s: only [\d.]+ GiB \(\d+ bytes\) free in /mnt/shared \(.* at /mnt/shared\), below "
                         r"validate_storage_min_free_bytes 1073741824\.0 GiB \(%d bytes\): checkpoints and logs need room\. "
                         r"Free space on the storage" % (name, 2 ** 60), run.stdout), name
    # Validation is the first play: no later one ran, and nothing changed on any node.
    assert "PLAY [Every node knows every node by name]" not in run.stdout
    recap = COLOUR.sub("", run.stdout)
    assert all(re.search(r"%s\s+: ok=\d+\s+changed=0 " % name, recap) for name in CLUSTER), recap[-2000:]
    assert node("node1").check_output("ls -A /mnt/shared") == ""


def test_the_doctor_warns_about_a_slow_read_naming_the_node():
    start = time.monotonic()
    playbook("doctor.yml", "-e", "validate_storage_min_read_mbps=1000000000", timeout=HANG_BOUND)
    timed("doctor with the storage read check", time.monotonic() - start, HANG_BOUND)
    report = json.loads((INVENTORY.parent / "reports" / "doctor.json").read_text())
    storage = [f for f in report["findings"] if f["check"] == "storage"]
    for name in CLUSTER:
        [ok] = [f for f in storage if f["node"] == name and f["status"] == "ok"]
        assert re.fullmatch(r"/mnt/shared in place, read at %s with every node at once" % FIGURE, ok["detail"]), ok
        [warn] = [f for f in storage if f["node"] == name and f["status"] == "warn"]
        assert warn["detail"].startswith("%s: shared storage /mnt/shared read at " % name) and "below 1000000000 MB/s" in warn["detail"]
        assert "Stage datasets on local disk" in warn["fix"]
