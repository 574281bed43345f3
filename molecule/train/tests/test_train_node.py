"""The job's node program on the cluster: a stop that lets every trainer save and its launcher end (no crash inside
the image), a job whose steps are not recognised said so until a pattern reads them, and a node that denies ptrace: its
stacks missing, what the kernel shows of its rank instead, and what to grant."""

import json
import os
import subprocess
import time

from testbed_fixtures import CLUSTER, INVENTORY, playbook, tool
from test_train_job import SHARED, events, exit_records, wait_for

# A trainer that saves on SIGTERM: it takes 2 s to write its file (one per rank), then ends with 0.
SAVER = '''import os, signal, sys, time
rank = os.environ["RANK"]
def save(*_):
    time.sleep(2)
    with open(os.path.join(os.environ["TRAINOPS_CHECKPOINT_DIR"], "saved-by-rank" + rank), "w") as out:
        out.write("saved\\n")
    print("rank %s saved on SIGTERM" % rank, flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, save)
for step in range(1, 100000):
    print("step %d loss 0.5" % step, flush=True)
    time.sleep(0.5)
'''
TORCHRUN = ('torchrun --nnodes="$NNODES" --node_rank="$NODE_RANK" --nproc_per_node="$NPROC_PER_NODE" '
            '--master_addr="$MASTER_ADDR" --master_port="$MASTER_PORT" ')
# The rung's training script, as test_train_job starts it, a step every 0.5 s.
DDP = (TORCHRUN + '--redirects 1 --tee 1 /opt/trainops/bin/train_ddp.py --checkpoint-dir "$TRAINOPS_CHECKPOINT_DIR" '
       '--steps 2000 --save-every 50 --step-seconds 0.5')
RANK = "^/usr/bin/python3[.0-9]* -u /opt/trainops/bin/[t]rain_ddp.py"
CRASH = ("Bus error", "Transport endpoint is not connected", "Fatal Python error")


def train(job, *args):
    return playbook("train.yml", "-e", "train_job=%s" % job, *args)


def report(job):
    return json.loads((INVENTORY.parent / "reports" / ("train-%s.json" % job)).read_text())


def status_step(job, name="node1"):
    """The step status shows for a node now (0 where none)."""
    train(job, "-e", "train_action=status")
    return report(job)["nodes"][name]["step"] or 0


def log(job, name):
    return (SHARED / "jobs" / job / ("%s.log" % name)).read_text()


def test_a_stop_lets_every_trainer_save_and_its_launcher_end(node, assert_nothing_left):
    (SHARED / "saver.py").write_text(SAVER)
    run = train("saver", "-e", json.dumps({"train_command": TORCHRUN + "/mnt/shared/saver.py", "train_preflight": False}))
    assert run.returncode == 0, run.stdout[-3000:]
    wait_for(lambda: all("step 3 " in log("saver", n) for n in CLUSTER), 90, "three steps on every node")
    stopped = time.monotonic()
    run = train("saver", "-e", "train_action=stop")
    assert run.returncode == 0, run.stdout[-3000:]
    print("stop: %.1f s" % (time.monotonic() - stopped))
    # Every rank's SIGTERM handler wrote its file: the container and its files stayed until the rank had ended.
    for rank in range(len(CLUSTER)):
        assert (SHARED / "jobs" / "saver" / "checkpoints" / ("saved-by-rank%d" % rank)).read_text() == "saved\n"
    for name in CLUSTER:
        text = log("saver", name)
        assert "saved on SIGTERM" in text and not any(crash in text for crash in CRASH), text[-2000:]
    # Each node's record says stopped, with the command's own status (torchrun's after its workers ended cleanly).
    records = exit_records("saver")
    assert {r["stopped_by"] for r in records.values()} == {"train_action=stop"} and all(r["rc"] < 128 for r in records.values())
    assert {report("saver")["nodes"][n]["state"] for n in CLUSTER} == {"stopped"}
    assert not any(crash in row[5] for row in report("saver")["rows"] for crash in CRASH)
    assert_nothing_left()


def test_a_job_whose_steps_are_not_recognised_says_so_and_a_pattern_reads_them(node):
    command = "python3 -u -c 'import time\nfor i in range(1, 100000):\n    print(\"it=%d | J=%.2f\" % (i, 1.0 / i), flush=True); time.sleep(0.5)'"
    options = {"train_command": command, "train_preflight": False, "train_stall_floor": 10}
    try:
        assert train("odd", "-e", json.dumps(options)).returncode == 0
        wait_for(lambda: "progress unknown" in train("odd", "-e", "train_action=status").stdout, 60, "the supervisor's word")
        status = train("odd", "-e", "train_action=status")
        assert status.returncode == 0 and "job odd: running" in status.stdout
        assert "progress unknown: no step recognised in " in status.stdout and "set train_progress_pattern" in status.stdout
        assert report("odd")["nodes"]["node1"]["step"] is None
    finally:
        train("odd", "-e", "train_action=stop")
    options["train_progress_pattern"] = r"it=(?P<step>\d+) \| J=(?P<loss>[\d.]+)"
    try:
        assert train("odd", "-e", json.dumps(options)).returncode == 0
        wait_for(lambda: status_step("odd") >= 3, 60, "steps read with the pattern")
        assert report("odd")["note"] is None
    finally:
        train("odd", "-e", "train_action=stop")


def test_a_node_whose_root_may_not_trace_is_said_and_its_ranks_shown_as_the_kernel_sees_them(node, assert_nothing_left):
    """node2's job runner without CAP_SYS_PTRACE (as on a container instance started without it): a stall's diagnosis
    there reads no stack, says why and what to grant, and shows what the kernel tells of the rank; the stopped rank on
    node3 is still the one named."""
    dropin = "/etc/systemd/system/trainops-job@.service.d"
    node("node2").check_output("mkdir -p %s && printf '[Service]\\nCapabilityBoundingSet=~CAP_SYS_PTRACE\\n' > %s/no-ptrace.conf"
                               " && systemctl daemon-reload" % (dropin, dropin))
    options = {"train_command": DDP, "train_run_opts": ["--volume", "/opt/trainops/bin:/opt/trainops/bin:ro"],
               "train_stall_seconds": 15, "train_preflight": False}
    try:
        assert train("noptrace", "-e", json.dumps(options)).returncode == 0
        wait_for(lambda: "TRAINOPS" in log("noptrace", "node1") and log("noptrace", "node1").count('"event": "step"') >= 5, 90,
                 "five steps")
        node("node3").check_output("pkill -STOP -f '%s'" % RANK)
        run = train("noptrace", "-e", "train_action=watch", "-e", "train_watch_seconds=120")
    finally:
        node("node3").run("pkill -CONT -f '%s'" % RANK)
        node("node2").run("rm -rf %s && systemctl daemon-reload" % dropin)
        train("noptrace", "-e", "train_action=stop")
    assert run.returncode != 0 and "stalled" in run.stdout, run.stdout[-3000:]
    diagnosis = [e for e in events("noptrace") if e["event"] == "diagnosis"][-1]
    assert diagnosis["culprits"] == [{"rank": 2, "node": "node3", "why": "is stopped"}], diagnosis
    assert "stacks unreadable on node2: root here lacks CAP_SYS_PTRACE" in diagnosis["verdict"], diagnosis["verdict"]
    answer = json.loads((SHARED / "jobs" / "noptrace" / "node2.diagnosis.json").read_text())
    [rank] = [p for p in answer["processes"] if "rank" in p]
    assert rank["stack"] is None and "Permission denied" in rank["stack_error"] and rank["kernel"]["threads"], rank
    assert answer["access"]["cap_sys_ptrace"] is False
    assert_nothing_left()


def test_the_stack_check_names_a_node_that_denies_ptrace(node):
    # The module as the doctor and the pre-flight run it, in a Python without CAP_SYS_PTRACE (setpriv drops it).
    wrapper = "/usr/local/bin/python3-noptrace"
    node("node2").check_output("printf '#!/bin/sh\\nexec setpriv --inh-caps=-sys_ptrace --bounding-set=-sys_ptrace /usr/bin/python3 "
                               "\"$@\"\\n' > %s && chmod 755 %s" % (wrapper, wrapper))
    try:
        run = subprocess.run([tool("ansible"), "-i", str(INVENTORY), "node2", "-m", "trainops.cluster.stack_access", "-a", "user=train",
                              "-e", "ansible_python_interpreter=%s" % wrapper], capture_output=True, text=True, timeout=120, check=False,
                             # molecule forces colour; the answer is read as JSON.
                             env=dict(os.environ, ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1"))
    finally:
        node("node2").run("rm -f %s" % wrapper)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    result = json.loads(run.stdout.split("=>", 1)[1])
    assert result["cap_sys_ptrace"] is False and result["tried"] and "Permission denied" in result["error"], result
    assert result["grant"].startswith("root here lacks CAP_SYS_PTRACE")
