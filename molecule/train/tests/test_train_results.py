"""train.yml -e train_action=collect: a finished job's records and newest complete checkpoint copied off the cluster and
checked by sha256 at the destination; an interrupted copy completed from what it left; a file that differs named; an
rsync target reached from the first node; bad input refused; nothing on the cluster deleted."""

import hashlib
import json
import os
import time

import pytest
from test_train_job import LIGHT
from testbed_fixtures import CLUSTER, INVENTORY, adhoc, playbook, timed

JOB = "results"
SHARED = INVENTORY.parent / ".state" / "shared"
JOB_DIR = SHARED / "jobs" / JOB
# train_collect_dest's default: beside the reports.
DEST = INVENTORY.parent / "reports" / "collected" / JOB
# The shipped training script, as a user starts it: 20 steps, a checkpoint every 5.
COMMAND = ('torchrun --nnodes="$NNODES" --node_rank="$NODE_RANK" --nproc_per_node="$NPROC_PER_NODE" '
           '--master_addr="$MASTER_ADDR" --master_port="$MASTER_PORT" --redirects 1 --tee 1 /opt/trainops/bin/train_ddp.py '
           '--checkpoint-dir "$TRAINOPS_CHECKPOINT_DIR" --resume auto --steps 20 --save-every 5 --step-seconds 0.5')
OPTIONS = {"train_command": COMMAND, "train_run_opts": ["--volume", "/opt/trainops/bin:/opt/trainops/bin:ro"]}
CHECKPOINT = "checkpoints/step-000020.pt"


def collect(*args, job=JOB):
    return playbook("train.yml", "-e", "train_job=%s" % job, "-e", "train_action=collect", "-e", "cluster_report_page=false", *args)


def sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def cluster_files():
    """The job's files on shared storage, as the nodes see them: {path: sha256}."""
    return {str(path.relative_to(JOB_DIR)): sha256(path) for path in JOB_DIR.rglob("*") if path.is_file()}


def collected_ok(run, where=DEST):
    assert run.returncode == 0, run.stdout[-3000:]
    for name in ["job.json", CHECKPOINT] + ["%s.%s" % (node, kind) for node in CLUSTER for kind in ("log", "exit")]:
        assert sha256(where / name) == sha256(JOB_DIR / name), name


@pytest.fixture(name="finished", scope="module")
def finished_fixture():
    """The job, started and run to its end (every node's exit record says 0), and its files on the cluster then."""
    run = playbook("train.yml", "-e", "train_job=%s" % JOB, "-e", json.dumps(dict(OPTIONS, **LIGHT)))
    assert run.returncode == 0, run.stdout[-3000:]
    deadline = time.monotonic() + 180
    while not all((JOB_DIR / ("%s.exit" % node)).exists() for node in CLUSTER):
        assert time.monotonic() < deadline, "job %s did not end within 180 s" % JOB
        time.sleep(2)
    assert all(json.loads((JOB_DIR / ("%s.exit" % node)).read_text())["rc"] == 0 for node in CLUSTER)
    return cluster_files()


def test_collect_copies_the_records_and_the_newest_checkpoint_verified(finished):
    start = time.monotonic()
    run = collect()
    timed("collect a finished job's results", time.monotonic() - start, 60)
    collected_ok(run)
    assert "checkpoint step-000020.pt: 1 file" in run.stdout
    assert "each verified by sha256 on the node and at the destination" in run.stdout
    assert "safe to release: the job has ended" in run.stdout, run.stdout[-3000:]
    # Older checkpoints stay on the cluster only.
    assert not (DEST / "checkpoints" / "step-000015.pt").exists()
    assert cluster_files() == finished


def test_an_interrupted_copy_is_completed_from_what_it_left(finished):
    # A copy cut off halfway leaves part of the file (under its name here, in rsync's .~tmp~ when rsync itself was
    # stopped): the next collect sends only the rest, and the whole file checks out.
    whole = (DEST / CHECKPOINT).read_bytes()
    (DEST / CHECKPOINT).write_bytes(whole[:len(whole) // 2])
    run = collect()
    collected_ok(run)
    assert "reused " in run.stdout and "already at the destination (an earlier or interrupted copy)" in run.stdout, run.stdout[-3000:]
    (DEST / CHECKPOINT).unlink()
    partial = DEST / "checkpoints" / ".~tmp~" / "step-000020.pt"
    partial.parent.mkdir()
    partial.write_bytes(whole[:len(whole) // 3])
    run = collect()
    collected_ok(run)
    assert "reused " in run.stdout and not partial.parent.exists()
    assert cluster_files() == finished


def test_a_file_that_differs_at_the_destination_is_named(finished):
    # Same size and time: rsync skips it, the sha256 does not.
    target = DEST / "node2.exit"
    stat = target.stat()
    text = target.read_text()
    target.write_text(text.replace('"rc": 0', '"rc": 9'))
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    run = collect()
    assert run.returncode != 0
    assert "job results: what arrived at %s is not what left node1:" % DEST in run.stdout, run.stdout[-3000:]
    assert "node2.exit: sha256 %s at the destination, %s on the node" % (sha256(target), finished["node2.exit"]) in run.stdout
    target.unlink()
    collected_ok(collect())


def test_collect_to_an_rsync_target_reached_from_the_first_node(node, finished):
    # node2 stands for a storage host: the training user of node1 reaches it over SSH. Being a node of this cluster,
    # the copy there is no reason to release the cluster's.
    installed = adhoc("node2", "ansible.builtin.apt", "name=rsync state=present")
    assert installed.returncode == 0, installed.stdout[-2000:]
    node("node2").run("rm -rf /home/train/collected")
    run = collect("-e", "train_collect_dest=train@node2:/home/train/collected/results")
    assert run.returncode == 0, run.stdout[-3000:]
    there = node("node2").check_output("cd /home/train/collected/results && sha256sum job.json %s node3.log", CHECKPOINT)
    assert there.split()[0::2] == [finished["job.json"], finished[CHECKPOINT], finished["node3.log"]]
    assert node("node2").file("/home/train/collected/results/job.json").user == "train"
    assert "NOT safe to release: the destination is on node2, a node of this cluster" in run.stdout


@pytest.mark.parametrize("args, message", [
    (["-e", "train_job=nosuch"], "no such job: nosuch (no job of that name on node1, node2, node3)"),
    (["-e", "train_collect_dest=nosuchhost.invalid:/results"],
     "train_collect_dest nosuchhost.invalid:/results cannot be used from node1 as train: ssh: Could not resolve hostname"),
    (["-e", "train_collect_dest=/proc/results"], "train_collect_dest /proc/results cannot be used: "),
    (["-e", "train_collect_dest=nas::results"], "train_collect_dest nas::results is an rsync daemon"),
])
def test_bad_input_is_refused_naming_it(finished, args, message):
    """A job with nothing to collect (no complete checkpoint) is refused by the same assert with collect.plan's problem
    (tests/unit/plugins/plugin_utils/test_collect.py): no live job of its own (a start and its end, 38 s of the suite)."""
    run = collect(*args)
    assert run.returncode != 0 and message in run.stdout, run.stdout[-3000:]
    assert cluster_files() == finished


def test_the_records_alone_leave_the_checkpoint_on_the_cluster(tmp_path, finished):
    run = collect("-e", "train_collect_checkpoint=false", "-e", "train_collect_dest=%s" % tmp_path)
    assert run.returncode == 0, run.stdout[-3000:]
    assert (tmp_path / "job.json").exists() and not (tmp_path / "checkpoints").exists()
    assert "NOT safe to release: its checkpoint step-000020.pt was not collected (train_collect_checkpoint=false)" in run.stdout
