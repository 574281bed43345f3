"""Slurm as the scheduler (slurm_enabled): every node idle under one munge key, the ladder and the torchrun rungs
through srun, a drained node named before anything waits on it, and a job of train.yml as one batch job."""

import json
import time

import pytest
# The units' job command (the torchrun rung's training script) is the batch job's too.
from test_train_job import COMMAND, LIGHT
from testbed_fixtures import CLUSTER, INVENTORY, playbook

SHARED = INVENTORY.parent / ".state" / "shared"
JOB = "slurm1"
# The pre-flight and the report page are not this test's subject (test_train_job runs both as a user leaves them).
JOB_ARGS = ["-e", "train_job=%s" % JOB, "-e", "train_launcher=sbatch", "-e", json.dumps(LIGHT)]


def squeue(node):
    return node("node1").check_output("squeue --noheader --name trainops-job-%s --format '%%T %%N'", JOB)


def verdict_reasons(reports):
    """What the failed steps and rungs said, the first lines worth reading when the ladder failed."""
    steps = [json.loads(path.read_text()) for path in (reports / "verify.json", reports / "torchrun.json") if path.exists()]
    return [(step["label"], step.get("reasons") or step.get("runs")) for step in sum(steps, []) if step.get("passed") is False]


@pytest.fixture(name="node2_drained")
def node2_drained_fixture(node):
    node("node1").check_output("scontrol update nodename=node2 state=drain reason='trainops test: disk replaced'")
    try:
        yield
    finally:
        node("node1").check_output("scontrol update nodename=node2 state=resume")


def test_every_node_is_idle_in_one_partition(node):
    lines = node("node1").check_output("sinfo --noheader --Node --format '%N %P %t'").splitlines()
    assert sorted(lines) == ["%s train* idle" % name for name in CLUSTER]


def test_one_munge_key_readable_by_munge_alone(node):
    sums = set()
    for name in CLUSTER:
        key = node(name).file("/etc/munge/munge.key")
        assert (key.user, key.group, key.mode) == ("munge", "munge", 0o400), name
        sums.add(key.sha256sum)
    assert len(sums) == 1
    # A credential made on one node is accepted on another: the keys agree as munge sees them.
    decoded = node("node1").check_output("su train -c 'munge -n | ssh -o BatchMode=yes node3 unmunge'")
    assert "Success (0)" in decoded.splitlines()[0], decoded


def test_the_ladder_and_the_torchrun_rungs_pass_through_srun(ladder):
    # The scenario's ladder run (conftest.py) climbs through srun; its reports are the scenario's.
    reports = INVENTORY.parent / "reports"
    assert ladder.returncode == 0, verdict_reasons(reports) or ladder.stdout[-3000:]
    cpu = next(step for step in json.loads((reports / "verify.json").read_text()) if step["rung"] == "cpu")
    assert cpu["verdict"] == "PASS" and cpu["runs"][0]["ranks"] == 3
    assert (reports / "verify" / "cpu-node1.log").read_text().startswith("$ srun --label --mpi=pmix --nodes=3 --ntasks=3")
    rungs = json.loads((reports / "torchrun.json").read_text())
    assert [(r["rung"], r["passed"]) for r in rungs] == [("torchrun", True), ("train", True)]
    for name in CLUSTER:
        assert (reports / "torchrun" / ("allreduce-%s.log" % name)).read_text().startswith(
            "$ srun --nodes=1 --ntasks=1 --exclusive --kill-on-bad-exit=1 --nodelist=%s" % name)


def test_a_drained_node_is_named_with_slurms_reason(node2_drained):
    doctor = playbook("doctor.yml")
    assert "is IDLE+DRAIN in Slurm (reason: trainops test: disk replaced" in doctor.stdout, doctor.stdout[-3000:]
    assert [line for line in doctor.stdout.splitlines() if "| slurm " in line and "FAIL" in line][0].split("|")[2].strip() == "node2"
    # The ladder through srun refuses before any step, naming it, instead of a step queued behind the drained node.
    start = time.monotonic()
    verify = playbook("verify.yml", "-e", "verify_launcher=srun", "--tags", "verify")
    print("srun ladder refused after %.1f s" % (time.monotonic() - start))
    assert verify.returncode != 0
    assert "Slurm cannot run a job on every node: node2 is IDLE+DRAIN in Slurm" in verify.stdout, verify.stdout[-3000:]


def test_a_job_runs_as_one_batch_job_and_stop_cancels_it(node, assert_nothing_left):
    start = time.monotonic()
    run = playbook("train.yml", *JOB_ARGS, "-e", json.dumps({"train_command": COMMAND, "train_run_opts": [
        "--volume", "/opt/trainops/bin:/opt/trainops/bin:ro"]}))
    submitted = time.monotonic()
    assert run.returncode == 0, run.stdout[-3000:]
    assert squeue(node) in ("RUNNING node[1-3]", "PENDING ")
    # Slurm's own submit time (whole seconds), on the nodes' clock, which is this machine's.
    submit_time = node("node1").check_output("date -d $(squeue --noheader --name trainops-job-%s --format %%V) +%%s", JOB)
    deadline = time.monotonic() + 90
    while not all(node(n).run("pgrep -f '[t]rain_ddp.py'").rc == 0 for n in CLUSTER):
        assert time.monotonic() < deadline, "ranks on every node within 90 s"
        time.sleep(0.5)
    print("train.yml start (sbatch) %.1f s; every node's rank running %.1f s after the start began, %.0f s after sbatch"
          % (submitted - start, time.monotonic() - start, time.time() - int(submit_time)))
    job_dir = SHARED / "jobs" / JOB
    while '"event": "step"' not in (job_dir / "node1.log").read_text():
        assert time.monotonic() < deadline, "a training step within 90 s"
        time.sleep(1)
    status = playbook("train.yml", *JOB_ARGS, "-e", "train_action=status")
    assert status.returncode == 0 and "job %s: running" % JOB in status.stdout, status.stdout[-3000:]
    assert all((job_dir / ("%s.log" % name)).exists() for name in CLUSTER)
    assert json.loads((job_dir / "job.json").read_text())["launcher"] == "sbatch"
    assert "submitted to Slurm as batch job" in run.stdout
    stop = playbook("train.yml", *JOB_ARGS, "-e", "train_action=stop")
    assert stop.returncode == 0 and "job %s: stopped" % JOB in stop.stdout, stop.stdout[-3000:]
    assert squeue(node) == ""
    assert_nothing_left()
