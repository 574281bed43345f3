"""The job's node program on the cluster: a stop that lets every trainer save and its launcher end (no crash inside
the image), and the stack check on a node that denies ptrace. A job whose steps are not recognised, and a stall's
diagnosis on a node whose runner may not trace, are recorded live (molecule/train/tests/record) and replayed in the unit
tests; DDP, RANK, report, log and status_step serve those recordings."""

import json
import os
import subprocess
import time

from testbed_fixtures import CLUSTER, INVENTORY, playbook, tool
from test_train_job import SHARED, exit_records, wait_for

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
    """train.yml without the report page (its own tests build it)."""
    return playbook("train.yml", "-e", "train_job=%s" % job, "-e", "cluster_report_page=false", *args)


def report(job):
    return json.loads((INVENTORY.parent / "reports" / ("train-%s.json" % job)).read_text())


def status_step(job, name="node1"):
    """The step status shows for a node now (0 where none)."""
    train(job, "-e", "train_action=status")
    return report(job)["nodes"][name]["step"] or 0


def log(job, name):
    return (SHARED / "jobs" / job / ("%s.log" % name)).read_text()


def test_a_stop_lets_every_trainer_save_and_its_launcher_end(node, assert_nothing_left, record):
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
    record("saver", "stopped")
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
