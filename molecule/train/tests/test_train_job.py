"""playbooks/train.yml: a job started on every node at once as systemd units, its logs on shared storage, a stopped
rank named by the stall's diagnosis, a rank killed by the kernel's OOM killer (node2's memory run out) stopping the
others and named, a start that resumes from the last checkpoint, stop, the runner without systemd, the pre-flight's
refusals (a job slowed for real: test_train_slow). A node cut off the training network and a stall restarted up to its
limit are recorded live (molecule/train/tests/record) and replayed in the unit tests."""

import hashlib
import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest
from ansible_collections.trainops.cluster.plugins.module_utils import torchrun
from testbed_fixtures import CLUSTER, INVENTORY, container, playbook, timed

JOB = "ddp1"
SHARED = INVENTORY.parent / ".state" / "shared"
JOB_DIR = SHARED / "jobs" / JOB
# The training script of the torchrun rung, as a user would start from it: resumes from the job's checkpoints.
COMMAND = ('torchrun --nnodes="$NNODES" --node_rank="$NODE_RANK" --nproc_per_node="$NPROC_PER_NODE" '
           '--master_addr="$MASTER_ADDR" --master_port="$MASTER_PORT" --redirects 1 --tee 1 /opt/trainops/bin/train_ddp.py '
           '--checkpoint-dir "$TRAINOPS_CHECKPOINT_DIR" --resume auto --steps 200 --save-every 5 --step-seconds 0.5')
# A stall is judged after 15 s without a new step (steps come every 0.5 s, checkpoints every 5).
OPTIONS = {"train_command": COMMAND, "train_run_opts": ["--volume", "/opt/trainops/bin:/opt/trainops/bin:ro"], "train_stall_seconds": 15}
# The first start of the job runs as the docs say (the pre-flight, the report page); the runs whose subject is neither
# leave both out: the pre-flight's port probes and the page's build are seconds of every run, proved by their own tests.
LIGHT = {"train_preflight": False, "cluster_report_page": False}
RANK = "^/usr/bin/python3[.0-9]* -u /opt/trainops/bin/[t]rain_ddp.py"
# The job's data staged on every node's disk (train_stage): a dataset folder on shared storage (the nodes' /mnt/shared),
# and a file of the controller's (copied to the job's folder on shared storage first).
DATASET = SHARED / "datasets" / JOB
VOCAB = INVENTORY.parent / ".state" / "vocab.json"
# Its ranks read a shard of the node's own copy every step (train_ddp.py --data): the stage's folder is in the job's
# container, at the path TRAINOPS_STAGE_DIR names.
STAGED = dict(OPTIONS, train_command=COMMAND + ' --data "$TRAINOPS_STAGE_DIR/%s/shards/0.jsonl" --read-kb 64' % JOB,
              train_stage=["/mnt/shared/datasets/%s" % JOB, str(VOCAB)])
STAGE_DIR = "/var/tmp/trainops-stage/%s" % JOB
START = ["-e", "train_job=%s" % JOB, "-e", json.dumps(STAGED)]


def light(options):
    """The start's options with the pre-flight and the page left out."""
    return json.dumps(dict(options, **LIGHT))


def train(*args, **kwargs):
    return playbook("train.yml", *args, **kwargs)


def train_light(*args, **kwargs):
    """train.yml without the report page (status, watch, stop, logs: the page's own tests build it)."""
    return train(*args, "-e", "cluster_report_page=false", **kwargs)


def status():
    run = train_light("-e", "train_job=%s" % JOB, "-e", "train_action=status")
    report = json.loads((INVENTORY.parent / "reports" / ("train-%s.json" % JOB)).read_text())
    return run, report


def running(verdict):
    """Status's verdict of a job whose every part runs: "running", or the ranks' sleep between steps (--step-seconds, in
    the script's own code) named once the supervisor has judged it (the live test of that: the start's)."""
    return verdict == "running" or verdict.startswith("running, slow: wait-bound: ")


def steps_of(job, node):
    """The steps rank 0 of job logged, in order, read as the torchrun rungs read them."""
    log = SHARED / "jobs" / job / ("%s.log" % node)
    records = torchrun.parse_output(log.read_text())["records"] if log.exists() else []
    return [record["step"] for record in records if record.get("event") == "step"]


def steps(node):
    return steps_of(JOB, node)


def wait_for(check, seconds, what):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(1)
    pytest.fail("%s within %d s" % (what, seconds))


@pytest.mark.parametrize("args, message", [
    (["-e", "train_job=x", "-e", "train_action=restart"], "train_action restart is not one of start, status, watch"),
    (["-e", "train_job=x"], "train_command is empty"),
    (["-e", "train_job=../etc", "-e", "train_command=true"], "train_job must be a plain name"),
    (["-e", "train_job=x", "-e", "train_command=true", "-e", '{"train_input_functions": ["get batch"]}'],
     "train_input_functions holds get batch: give function names"),
    (["-e", "train_job=x", "-e", "train_command=true", "-e", "train_supervisor_silence=2"], "train_supervisor_silence is 2: give at least 6 s"),
    (["-e", "train_job=x", "-e", "train_command=true", "-e", '{"train_stage": ["/nonexistent/data"]}'],
     "train_stage holds /nonexistent/data: give paths on shared storage (under /mnt/shared) that every node reads, or on the controller"),
])
def test_bad_input_is_refused_before_anything_changes(node, args, message):
    run = train(*args)
    assert run.returncode != 0 and message in run.stdout, run.stdout[-2000:]
    assert not node("node1").file("/etc/trainops/jobs/x.json").exists


def test_start_runs_the_job_on_every_node_with_logs_on_shared_storage(node):
    """As the docs say, its dataset staged: every node's copy made and checked against the first node's manifest, and read
    by its ranks in the image."""
    (DATASET / "shards").mkdir(parents=True, exist_ok=True)
    for index in range(3):
        (DATASET / "shards" / ("%d.jsonl" % index)).write_bytes(os.urandom(1 << 20))
    (DATASET / "dataset_info.json").write_text('{"ddp1": {"file_name": "shards"}}\n')
    VOCAB.write_text(json.dumps({"<pad>": 0, "hello": 1}))
    start, began = time.monotonic(), time.time()
    run = train(*START)
    assert run.returncode == 0, run.stdout[-3000:]
    print("start: every node running after %.1f s" % (time.monotonic() - start))
    for name in CLUSTER:
        assert node(name).check_output("systemctl is-active trainops-job@%s", JOB) == "active"
        # The copy is the shared file's, byte for byte, and the training user's.
        copy = node(name).file("%s/%s/shards/2.jsonl" % (STAGE_DIR, JOB))
        assert copy.sha256sum == hashlib.sha256((DATASET / "shards" / "2.jsonl").read_bytes()).hexdigest() and copy.user == "train", name
        assert node(name).file("%s/vocab.json" % STAGE_DIR).sha256sum == hashlib.sha256(VOCAB.read_bytes()).hexdigest(), name
        assert "%s 3.15 MB (3.15 MB copied at " % name in run.stdout, run.stdout[-3000:]
    wait_for(lambda: len(steps("node1")) >= 12, 90, "twelve steps")
    run, report = status()
    assert run.returncode == 0 and running(report["verdict"]), report["verdict"]
    assert report["nodes"]["node1"]["step"] >= 12
    assert all((JOB_DIR / ("%s.log" % name)).exists() for name in CLUSTER)
    record = json.loads((JOB_DIR / "job.json").read_text())
    assert record["nodes"] == CLUSTER and record["command"] == STAGED["train_command"] and record["image"]
    # Its ranks sleep 0.5 s a step in the script's own code (no DataLoader, no collective): the supervisor names the wait
    # with its frame, the live path of wait-bound (its words: tests/unit/train/test_perf_own_wait.py).

    def waits():
        return [e for e in events() if e["event"] == "slow" and e.get("kind") == "wait-bound"]
    wait_for(waits, 150 - (time.monotonic() - start), "the ranks' wait in the script's own code named")
    found = waits()[0]
    assert found["node"] is None and found["frame"].startswith("train_ddp.py:main:"), found
    assert "; they wait in train_ddp.py:main (line " in found["text"], found["text"]
    timed("a wait in the job's own code named, from the start", found["at"] - began)
    print("named %.1f s after the start: %s" % (found["at"] - began, found["text"]))


def test_a_second_start_of_a_running_job_is_refused():
    run = train(*START)
    assert run.returncode != 0 and "job %s is already running on node1, node2, node3" % JOB in run.stdout


def events(job=JOB):
    return json.loads((SHARED / "jobs" / job / "job.json").read_text()).get("events", [])


def test_a_stopped_rank_is_named_by_the_stall_diagnosis_on_the_cluster(node):
    """A rank stopped mid-run (SIGSTOP: alive, silent, like a rank stuck in a driver): the others wait in DDP's
    all-reduce. The supervisor on node1 judges the stall, every node diagnoses its processes (py-spy), the verdict
    names rank 1 on node2; watch returns with it. The job goes on once the rank does (train_on_stall: report)."""
    pid = node("node2").check_output("pgrep -f '%s'" % RANK).split()[0]
    node("node2").check_output("kill -STOP %s", pid)
    stopped = time.monotonic()
    try:
        run = train_light("-e", "train_job=%s" % JOB, "-e", "train_action=watch", "-e", "train_watch_seconds=120")
        named = time.monotonic() - stopped
    finally:
        node("node2").check_output("kill -CONT %s", pid)
    timed("a stalled rank named (stall time 15 s)", named)
    assert run.returncode != 0 and "stalled" in run.stdout, run.stdout[-3000:]
    diagnosis = [e for e in events() if e["event"] == "diagnosis"][-1]
    assert diagnosis["culprits"] == [{"rank": 1, "node": "node2", "why": "is stopped"}], diagnosis
    # Where the others wait depends on where the signal caught rank 1 (mostly its sleep between steps: they wait in the
    # next backward; on a loaded host also its all-reduce of the loss or a checkpoint's barrier): the places' words
    # are the unit tests' (test_verdict.py on the recorded stall).
    assert "rank 1 (node2) is stopped; ranks 0, 2 wait in " in diagnosis["verdict"], diagnosis["verdict"]
    assert diagnosis["verdict"] in run.stdout
    # Every node answered with its processes' states and every rank's Python stack.
    for name in CLUSTER:
        answer = json.loads((JOB_DIR / ("%s.diagnosis.json" % name)).read_text())
        [rank] = [p for p in answer["processes"] if "rank" in p]
        assert rank["stack"] and rank["stack_error"] is None, answer
    # The never-hang bound; the measure (stall time + diagnosis, at most 15 + 30 s) is scripts/benchmark's.
    assert named < 15 + 60
    before = steps("node1")[-1]
    wait_for(lambda: steps("node1")[-1] > before + 2, 60, "steps again after the rank continued")
    run, report = status()
    # Running again, perhaps slow: the windows around the stop may name a class for a while (its rank catching up).
    assert run.returncode == 0 and report["verdict"].partition(", slow: ")[0] == "running", report["verdict"]
    assert report["nodes"]["node1"]["steps_per_minute"] > 0


def exit_records(job=JOB):
    """This start's exit records: {node: record}."""
    run_id = json.loads((SHARED / "jobs" / job / "job.json").read_text())["run_id"]
    found = {}
    for name in CLUSTER:
        path = SHARED / "jobs" / job / ("%s.exit" % name)
        record = json.loads(path.read_text()) if path.exists() else {}
        if record.get("run_id") == run_id:
            found[name] = record
    return found


# Fills a node's memory from a process of its own, 16 MiB at a time, until the process named (the rank) is gone.
FILL = ("import os, sys\nheld = []\nwhile os.path.exists('/proc/' + sys.argv[1]) and len(held) < 256:\n"
        "    held.append(b'x' * (16 << 20))\n")


def memory_filled(node, name, pid):
    """The node's memory runs out with its rank the kernel's first choice: its container limited to what it uses now
    and 64 MiB (the host's cgroup, v1 or v2), then filled. The kernel's OOM killer takes the rank (oom_score_adj 1000), as
    it takes the largest process of a node whose memory ran out. The limit goes as soon as the rank is gone."""
    node(name).check_output("echo 1000 > /proc/%s/oom_score_adj" % pid)
    path, conmon = subprocess.run(["podman", "inspect", "-f", "{{.State.CgroupPath}} {{.State.ConmonPid}}", container(name)], check=True,
                                  capture_output=True, text=True).stdout.split()
    path = path.lstrip("/")
    v1 = Path("/sys/fs/cgroup/memory", path)
    usage, limit, unlimited = ((v1 / "memory.usage_in_bytes", v1 / "memory.limit_in_bytes", "-1") if v1.exists() else
                               (Path("/sys/fs/cgroup", path, "memory.current"), Path("/sys/fs/cgroup", path, "memory.max"), "max"))
    limit.write_text(str(int(usage.read_text()) + (64 << 20)))
    try:
        subprocess.run(["podman", "exec", container(name), "python3", "-c", FILL, pid], capture_output=True, timeout=60, check=False)
    finally:
        limit.write_text(unlimited)
        # The node's conmon, seeing its container's memory run out, leaves a file named oom in the folder it runs in
        # (the checkout's tests/testbed, where the scenario's create started it).
        (Path("/proc", conmon, "cwd").resolve() / "oom").unlink(missing_ok=True)


def test_a_rank_killed_for_memory_stops_the_others_and_is_named(node, assert_nothing_left):
    pid = node("node2").check_output("pgrep -f '%s'" % RANK).split()[0]
    memory_filled(node, "node2", pid)
    killed = time.monotonic()
    wait_for(lambda: len(exit_records()) == len(CLUSTER), 45, "every node's exit record")
    # About 11 s normally: the wait above is the never-hang bound.
    timed("a failed node stops the whole job", time.monotonic() - killed)
    # At once, while the runners may still be telling their peers: a part that has recorded its end has ended.
    failed, report = status()
    timed("a rank killed for memory named", time.monotonic() - killed)
    assert failed.returncode != 0 and report["first_failed"] == "node2", report
    # The kernel's log says why (its pid is the kernel's, not the one node2's runner knew as rank 1's: the testbed's
    # nodes are containers; on a server the rank is named too: tests/unit/train/test_oom_state.py).
    # The kernel names the process as its comm: python3.13 in the training image.
    oom = "killed by the kernel's OOM killer: python3"
    state = report["nodes"]["node2"]["state"]
    assert oom in state and " held " in state and state.endswith("GiB (its container's memory limit)"), report["nodes"]
    assert report["verdict"].startswith("failed: node2 failed first (%s" % oom), report["verdict"]
    assert "node2 failed first (killed by the kernel" in failed.stdout  # the apostrophe as the output's YAML quotes it
    # The others lost their peer: each failed on its own (Gloo: connection closed) or was stopped; none runs on.
    assert all(report["nodes"][n]["state"] != "running" for n in CLUSTER), report["nodes"]
    wait_for(lambda: all(node(n).run("systemctl is-active trainops-job@%s" % JOB).stdout.strip() != "active" for n in CLUSTER),
             45, "every node's runner ended")
    assert_nothing_left()


def task_results(stdout, task):
    """{node: ok|changed|skipping|...} of a task in a run's output (the default callback's lines, colours taken out)."""
    section = re.sub(r"\x1b\[[0-9;]*m", "", stdout).split("TASK [trainops.cluster.train : %s]" % task, 1)[1].split("TASK [", 1)[0]
    return {line.split("[", 1)[1].split("]", 1)[0]: line.split(":", 1)[0] for line in section.splitlines() if ": [" in line}


def test_start_again_resumes_after_the_last_checkpoint(node):
    saved = max(int(p.name[5:11]) for p in (JOB_DIR / "checkpoints").glob("step-*.pt"))
    before = steps("node1")
    # node2's copy of the node program damaged: its sha256 differs, it is installed again there alone.
    node("node2").check_output("echo >> /opt/trainops/lib/trainops_job.zip")
    run = train("-e", "train_job=%s" % JOB, "-e", light(STAGED))
    assert run.returncode == 0, run.stdout[-3000:]
    assert task_results(run.stdout, "Install the node program") == {"node1": "skipping", "node2": "changed", "node3": "skipping"}
    # The stage is there and whole on every node: nothing copied again.
    assert "node1 3.15 MB (kept: unchanged), node2 3.15 MB (kept: unchanged), node3 3.15 MB (kept: unchanged)" in run.stdout, run.stdout[-3000:]
    wait_for(lambda: len(steps("node1")) > len(before) + 2, 90, "steps after the resume")
    resumed = steps("node1")[len(before):]
    assert resumed[0] == saved + 1, (saved, resumed)
    assert "step-%06d.pt" % saved in json.loads((JOB_DIR / "job.json").read_text())["checkpoints"]


def test_stop_ends_the_job_everywhere(node, assert_nothing_left):
    run = train_light("-e", "train_job=%s" % JOB, "-e", "train_action=stop")
    assert run.returncode == 0, run.stdout[-3000:]
    for name in CLUSTER:
        assert node(name).run("systemctl is-active trainops-job@%s" % JOB).stdout.strip() != "active"
        assert not node(name).file(STAGE_DIR).exists, name  # the stage goes with the job (train_stage_keep: false)
    assert_nothing_left()
    logs = train_light("-e", "train_job=%s" % JOB, "-e", "train_action=logs")
    assert logs.returncode == 0 and "/jobs/%s/node3.log:" % JOB in logs.stdout


def test_without_systemd_the_runner_detaches_itself_and_stops(node, assert_nothing_left):
    # As on a container instance: no unit, the runner detached from the controller's session, a pid file.
    detached = ["-e", "train_job=detached", "-e", "train_supervisor=detached"]
    try:
        run = train(*detached, "-e", light(OPTIONS))
        assert run.returncode == 0, run.stdout[-3000:]
        for name in CLUSTER:
            assert node(name).file("/run/trainops/jobs/detached.%s.pid" % name).exists
            assert node(name).check_output("systemctl show -P ActiveState trainops-job@detached") == "inactive"
        wait_for(lambda: len(steps_of("detached", "node1")) >= 2, 90, "two steps of the detached job")
        run = train_light(*detached, "-e", "train_action=status")
        assert run.returncode == 0 and "job detached: running" in run.stdout, run.stdout[-3000:]
    finally:
        run = train_light(*detached, "-e", "train_action=stop")
    assert run.returncode == 0 and "job detached: stopped" in run.stdout, run.stdout[-3000:]
    assert_nothing_left()
    # Stopped by the user: no node failed, so none was told to stop by another.
    assert not list((SHARED / "jobs" / "detached").glob("*.stopped-by"))


def test_preflight_refuses_a_start_when_the_master_port_is_blocked(node, master_port_dropped):
    with master_port_dropped("node3"):
        start = time.monotonic()
        run = train("-e", "train_job=blocked", "-e", json.dumps({"train_command": COMMAND}))
        print("pre-flight refusal after %.1f s" % (time.monotonic() - start))
    assert run.returncode != 0
    assert "pre-flight: job blocked not started on any node" in run.stdout
    assert "node3 -> node1 (29500): timed out" in run.stdout, run.stdout[-3000:]
    for name in CLUSTER:
        assert not node(name).file("/etc/trainops/jobs/blocked.json").exists
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
    assert not node("node2").file("/etc/trainops/jobs/lf.json").exists


def lf_config(name, **changes):
    """A LLaMA-Factory config on shared storage whose paths all exist there; its output_dir is /mnt/shared/NAME-out."""
    for path in ("models/tiny", "data", "tokenized", name + "-out"):
        (SHARED / path).mkdir(parents=True, exist_ok=True)
    (SHARED / "models/tiny/model.safetensors").write_bytes(b"0" * 1024)
    config = {"model_name_or_path": "/mnt/shared/models/tiny", "stage": "sft", "finetuning_type": "full",
              "dataset_dir": "/mnt/shared/data", "tokenized_path": "/mnt/shared/tokenized",
              "output_dir": "/mnt/shared/%s-out" % name, "save_steps": 10, "max_steps": 100}
    config.update(changes)
    (SHARED / ("%s.yaml" % name)).write_text(json.dumps(config))
    return "/mnt/shared/%s.yaml" % name


def trainer_checkpoint(output_dir, step, ranks):
    """The files transformers' Trainer writes into checkpoint-STEP, with an RNG state for each of ranks."""
    directory = output_dir / ("checkpoint-%d" % step)
    directory.mkdir(parents=True)
    for name in ["model.safetensors", "optimizer.pt", "scheduler.pt", "trainer_state.json"] + ["rng_state_%d.pth" % r for r in ranks]:
        (directory / name).write_bytes(b"0" * 4096)


def test_a_llamafactory_start_resumes_from_the_newest_complete_checkpoint(node):
    # Rank 1 died while checkpoint-20 was being saved: its RNG state is missing. LLaMA-Factory would pick
    # checkpoint-20 (the highest number); the start names it and passes checkpoint-10 on. The command only echoes its
    # arguments: what matters is what the product adds to it.
    config = lf_config("lfresume")
    trainer_checkpoint(SHARED / "lfresume-out", 10, [0, 1, 2])
    trainer_checkpoint(SHARED / "lfresume-out", 20, [0, 2])
    run = train("-e", "train_job=lfresume", "-e", "train_config=%s" % config,
                "-e", json.dumps({"train_command": "echo llamafactory-cli train %s" % config}))
    assert run.returncode == 0, run.stdout[-3000:]
    assert "/mnt/shared/lfresume-out/checkpoint-20 is incomplete (rng_state of rank 1 missing): not loaded" in run.stdout
    assert "resuming from /mnt/shared/lfresume-out/checkpoint-10 (step 10)" in run.stdout
    assert "checkpoint space: 9 checkpoints of 28.0 KiB (measured from checkpoint-10)" in run.stdout, run.stdout[-3000:]
    wait_for(lambda: all((SHARED / "jobs/lfresume" / ("%s.exit" % n)).exists() for n in CLUSTER), 30, "the echo on every node")
    for name in CLUSTER:
        log = (SHARED / "jobs/lfresume" / ("%s.log" % name)).read_text()
        assert "train %s resume_from_checkpoint=/mnt/shared/lfresume-out/checkpoint-10" % config in log, log
    record = json.loads((SHARED / "jobs/lfresume/job.json").read_text())
    assert record["resume_from"] == "checkpoint-10" and list(record["incomplete"]) == ["checkpoint-20"]


def test_a_full_fine_tune_without_room_for_its_checkpoints_or_its_load_is_refused(node):
    config = lf_config("lfspace")
    # 2 TiB of weights, sparse: a full fine-tune's checkpoints would take 6x that, 10 times.
    with open(SHARED / "models/tiny/model.safetensors", "wb") as weights:
        weights.truncate(2 * 2 ** 40)
    try:
        run = train("-e", "train_job=lfspace", "-e", "train_config=%s" % config,
                    "-e", json.dumps({"train_command": "echo llamafactory-cli train %s" % config}))
    finally:
        (SHARED / "models/tiny/model.safetensors").unlink()
    assert run.returncode != 0 and "pre-flight: job lfspace not started on any node" in run.stdout, run.stdout[-3000:]
    assert "but the 10 checkpoints to come take about 122880.0 GiB (each 12288.0 GiB, estimated: 6x the model's " \
           "2048.0 GiB of weights for a full fine-tune)" in run.stdout, run.stdout[-3000:]
    # Nor would a node's one rank load those weights into its host memory (this machine's 24 GiB): each node named.
    for name in CLUSTER:
        assert "%s: 1 rank loads the model's 2048.0 GiB of weights into host memory at once (2048.0 GiB), but MemAvailable is " % name \
            in run.stdout, run.stdout[-3000:]
    assert not node("node1").file("/etc/trainops/jobs/lfspace.json").exists
