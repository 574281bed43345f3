"""playbooks/train.yml: a job started on every node at once as systemd units, its logs on shared storage, a failed
node stopping the others, a start that resumes from the last checkpoint, stop, and the pre-flight's refusals."""

import json
import time

import pytest
from testbed_fixtures import CLUSTER, INVENTORY, playbook

JOB = "ddp1"
SHARED = INVENTORY.parent / ".state" / "shared"
JOB_DIR = SHARED / "jobs" / JOB
# The training script of the torchrun rung, as a user would start from it: resumes from the job's checkpoints.
COMMAND = ('torchrun --nnodes="$NNODES" --node_rank="$NODE_RANK" --nproc_per_node="$NPROC_PER_NODE" '
           '--master_addr="$MASTER_ADDR" --master_port="$MASTER_PORT" --redirects 1 --tee 1 /opt/trainops/bin/train_ddp.py '
           '--checkpoint-dir "$TRAINOPS_CHECKPOINT_DIR" --resume auto --steps 200 --save-every 5 --step-seconds 0.5')
OPTIONS = {"train_command": COMMAND, "train_run_opts": ["--volume", "/opt/trainops/bin:/opt/trainops/bin:ro"]}
START = ["-e", "train_job=%s" % JOB, "-e", json.dumps(OPTIONS)]


def train(*args):
    return playbook("train.yml", *args)


def status():
    run = train("-e", "train_job=%s" % JOB, "-e", "train_action=status")
    report = json.loads((INVENTORY.parent / "reports" / ("train-%s.json" % JOB)).read_text())
    return run, report


def steps(node):
    """The steps rank 0 logged, in order."""
    lines = (JOB_DIR / ("%s.log" % node)).read_text().splitlines()
    return [json.loads(line.split("TRAINOPS ", 1)[1])["step"] for line in lines if '"event": "step"' in line]


def wait_for(check, seconds, what):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(1)
    pytest.fail("%s within %d s" % (what, seconds))


@pytest.mark.parametrize("args, message", [
    (["-e", "train_job=x", "-e", "train_action=restart"], "train_action restart is not one of start, status, logs, stop"),
    (["-e", "train_job=x"], "train_command is empty"),
    (["-e", "train_job=../etc", "-e", "train_command=true"], "train_job must be a plain name"),
])
def test_bad_input_is_refused_before_anything_changes(node, args, message):
    run = train(*args)
    assert run.returncode != 0 and message in run.stdout, run.stdout[-2000:]
    assert not node("node1").file("/etc/trainops/jobs/x.env").exists


def test_start_runs_the_job_on_every_node_with_logs_on_shared_storage(node):
    start = time.monotonic()
    run = train(*START)
    assert run.returncode == 0, run.stdout[-3000:]
    print("start: every node running after %.1f s" % (time.monotonic() - start))
    for name in CLUSTER:
        assert node(name).check_output("systemctl is-active trainops-job@%s", JOB) == "active"
    wait_for(lambda: len(steps("node1")) >= 12, 90, "twelve steps")
    running, report = status()
    assert running.returncode == 0 and report["verdict"] == "running"
    assert report["nodes"]["node1"]["step"] >= 12
    assert all((JOB_DIR / ("%s.log" % name)).exists() for name in CLUSTER)
    record = json.loads((JOB_DIR / "job.json").read_text())
    assert record["nodes"] == CLUSTER and record["command"] == COMMAND and record["image"]


def test_a_second_start_of_a_running_job_is_refused():
    run = train(*START)
    assert run.returncode != 0 and "job %s is already running on node1, node2, node3" % JOB in run.stdout


def test_a_failed_node_stops_the_others_and_is_named(node, assert_nothing_left):
    pid = node("node2").check_output("pgrep -f '^/usr/bin/python3[.0-9]* -u /opt/trainops/bin/[t]rain_ddp.py'").split()[0]
    node("node2").check_output("kill -9 %s", pid)
    killed = time.monotonic()
    wait_for(lambda: all(node(n).run("systemctl is-active trainops-job@%s" % JOB).stdout.strip() != "active" for n in CLUSTER),
             30, "every node's part ended")
    stopped_after = time.monotonic() - killed
    print("one node failed: the whole job stopped after %.1f s" % stopped_after)
    assert stopped_after < 15
    failed, report = status()
    assert failed.returncode != 0 and report["first_failed"] == "node2", report
    assert "node2 failed first" in failed.stdout
    # The others lost their peer: each failed on its own (Gloo: connection closed) or was stopped; none runs on.
    assert all(report["nodes"][n]["state"] != "running" for n in CLUSTER)
    assert_nothing_left()


def test_start_again_resumes_after_the_last_checkpoint(node):
    saved = max(int(p.name[5:11]) for p in (JOB_DIR / "checkpoints").glob("step-*.pt"))
    before = steps("node1")
    run = train(*START)
    assert run.returncode == 0, run.stdout[-3000:]
    wait_for(lambda: len(steps("node1")) > len(before) + 2, 90, "steps after the resume")
    resumed = steps("node1")[len(before):]
    assert resumed[0] == saved + 1, (saved, resumed)
    assert "step-%06d.pt" % saved in json.loads((JOB_DIR / "job.json").read_text())["checkpoints"]


def test_stop_ends_the_job_everywhere(node, assert_nothing_left):
    run = train("-e", "train_job=%s" % JOB, "-e", "train_action=stop")
    assert run.returncode == 0, run.stdout[-3000:]
    for name in CLUSTER:
        assert node(name).run("systemctl is-active trainops-job@%s" % JOB).stdout.strip() != "active"
    assert_nothing_left()
    logs = train("-e", "train_job=%s" % JOB, "-e", "train_action=logs")
    assert logs.returncode == 0 and "/jobs/%s/node3.log:" % JOB in logs.stdout


def test_preflight_refuses_a_start_when_the_master_port_is_blocked(node, master_port_dropped):
    with master_port_dropped("node3"):
        start = time.monotonic()
        run = train("-e", "train_job=blocked", "-e", json.dumps({"train_command": COMMAND}))
        print("pre-flight refusal after %.1f s" % (time.monotonic() - start))
    assert run.returncode != 0
    assert "pre-flight: job blocked not started on any node" in run.stdout
    assert "node3 -> node1 (29500): timed out" in run.stdout, run.stdout[-3000:]
    for name in CLUSTER:
        assert not node(name).file("/etc/trainops/jobs/blocked.env").exists
        assert node(name).run("systemctl is-active trainops-job@blocked").stdout.strip() != "active"


def test_preflight_names_the_traps_of_a_llamafactory_config(node):
    # The field guide's LoRA config, with the traps its users report: nothing of LLaMA-Factory runs (the start is
    # refused before), so none needs to be installed.
    config = {"model_name_or_path": "/mnt/shared/models/qwen2-0.5b", "stage": "sft", "finetuning_type": "lora",
              "dataset_dir": "/mnt/shared/data", "output_dir": "/home/train/out", "save_steps": 50}
    (SHARED / "data").mkdir(exist_ok=True)
    (SHARED / "lf.yaml").write_text(json.dumps(config))
    node("node1").check_output("mkdir -p /mnt/shared/models/qwen2-0.5b")
    try:
        run = train("-e", "train_job=lf", "-e", "train_config=/mnt/shared/lf.yaml",
                    "-e", json.dumps({"train_command": "FORCE_TORCHRUN=1 llamafactory-cli train /mnt/shared/lf.yaml"}))
    finally:
        node("node1").check_output("rm -rf /mnt/shared/models /mnt/shared/data /mnt/shared/lf.yaml")
    assert run.returncode != 0 and "pre-flight: job lf not started on any node" in run.stdout, run.stdout[-2000:] + run.stderr[-2000:]
    # The model directory exists on the shared storage that every node mounts: no node is named for it.
    assert "model_name_or_path" not in run.stdout
    assert "output_dir /home/train/out is not on shared storage (/mnt/shared)" in run.stdout
    assert "no tokenized_path and ddp_timeout unset" in run.stdout
    assert not node("node2").file("/etc/trainops/jobs/lf.env").exists
