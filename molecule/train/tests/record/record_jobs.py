"""Recorded for tests/fixtures/train (scripts/record-train-fixtures), not run in the suite: the states of a job whose
decisions the unit tests replay (tests/unit/train/test_recorded_jobs.py): a stall restarted then stopped at the
restart limit, a node cut off the training network named by its peers' reach, a command that always fails stopped by
the crash-loop guard, a job whose steps are not recognised said so, and a stall's diagnosis on a node whose runner
may not trace. Each asserts the live path as the suite did before these moved here."""

import json

from ansible_collections.trainops.cluster.plugins.module_utils import torchrun
from test_train_job import COMMAND, OPTIONS, RANK, SHARED, events, steps_of, train, wait_for
from test_train_node import DDP, log, report, status_step
from test_train_node import train as train_job
from test_train_recovery import start, status
from testbed_fixtures import CLUSTER, HOSTVARS, INVENTORY

# Fails at step 5 on every node, every time: no checkpoint is ever written.
FAILS_AT_5 = "for i in 1 2 3 4 5; do echo \"step $i loss 0.5\"; sleep 0.3; done; echo 'RuntimeError: loss is nan' >&2; exit 1"


def test_a_stall_restarts_every_node_from_the_checkpoint_then_stops_at_the_limit(node, assert_nothing_left, record):
    """train_on_stall: restart, at most once. The first stall ends every node's part and starts it again (the script
    resumes from its newest checkpoint); the second reaches the limit and stops the job; nothing is left on any node.
    The controller is not attached meanwhile: the supervisor on node1 acts on its own."""
    # Steps enough to outlast both stalls.
    options = dict(OPTIONS, train_command=COMMAND.replace("--steps 200", "--steps 2000"), train_on_stall="restart",
                   train_max_auto_restarts=1)
    job = ["-e", "train_job=stall", "-e", json.dumps(options)]
    run = train(*job)
    assert run.returncode == 0, run.stdout[-3000:]
    for attempt in (1, 2):
        wait_for(lambda: len(steps_of("stall", "node1")) >= 8 * attempt, 90, "steps of attempt %d" % attempt)
        node("node3").check_output("pkill -STOP -f '%s'" % RANK)
        if attempt == 1:
            wait_for(lambda: any(e["event"] == "restart" for e in events("stall")), 75, "a restart after the stall")
    wait_for(lambda: all(node(n).run("systemctl is-active trainops-job@stall").stdout.strip() != "active" for n in CLUSTER),
             90, "every node's part stopped at the restart limit")
    # A slow verdict is the supervisor's view of how the job runs, not a step of the stall's handling: on a loaded machine
    # (CI's other scenario beside this one) one came before the first stall once.
    kinds = [e["event"] for e in events("stall") if e["event"] != "slow"]
    assert kinds == ["stall", "diagnosis", "restart", "stall", "diagnosis", "restart limit", "stop"], [
        (e["event"], e.get("text") or e.get("verdict")) for e in events("stall")]
    assert all("rank 2 (node3) is stopped" in e["verdict"] for e in events("stall") if e["event"] == "diagnosis")
    # The restart resumed from the newest complete checkpoint (a save every 5 steps), and went on from the step after.
    records = torchrun.parse_output((SHARED / "jobs" / "stall" / "node1.log").read_text())["records"]
    [resumed] = [r for r in records if r.get("event") == "resumed"]
    after = [r["step"] for r in records[records.index(resumed):] if r.get("event") == "step"]
    assert resumed["step"] % 5 == 0 and after[0] == resumed["step"] + 1, (resumed, after)
    train("-e", "train_job=stall", "-e", "train_action=status")
    report = json.loads((INVENTORY.parent / "reports" / "train-stall.json").read_text())
    assert report["verdict"] == "stopped after a stall (train_on_stall): the restart limit (1)", report["verdict"]
    assert {report["nodes"][n]["state"] for n in CLUSTER} == {"stopped: stalled"}
    assert "rank 2 (node3) is stopped" in report["diagnosis"]
    record("stall", "stall-restart-limit")
    assert_nothing_left()


def test_a_node_cut_off_the_training_network_is_named(node, record):
    """node3's training link gone under a running job (its peers' packets dropped both ways, in a table of the test's
    own): every rank waits and none is stopped; the nodes' reach of each other names node3. The job goes on once the
    link is back."""
    assert train("-e", "train_job=cutoff", "-e", json.dumps(OPTIONS)).returncode == 0
    wait_for(lambda: len(steps_of("cutoff", "node1")) >= 8, 90, "eight steps")
    peers = ", ".join(HOSTVARS[n]["cluster_ip"] for n in CLUSTER if n != "node3")
    cut = ("add table inet trainops_cut; "
           "add chain inet trainops_cut in { type filter hook input priority -10; }; add rule inet trainops_cut in ip saddr { %s } drop; "
           "add chain inet trainops_cut out { type filter hook output priority -10; }; add rule inet trainops_cut out ip daddr { %s } drop"
           % (peers, peers))
    node("node3").check_output("nft '%s'" % cut)
    try:
        run = train("-e", "train_job=cutoff", "-e", "train_action=watch", "-e", "train_watch_seconds=120")
    finally:
        node("node3").run("nft delete table inet trainops_cut")
    assert run.returncode != 0 and "stalled" in run.stdout, run.stdout[-3000:]
    diagnosis = [e for e in events("cutoff") if e["event"] == "diagnosis"][-1]
    assert diagnosis["culprits"][0] == {"rank": None, "node": "node3", "why": (
        "is cut off from the training network (node1, node2 cannot reach it: timed out)")}, diagnosis
    record("cutoff", "cut-off")
    before = steps_of("cutoff", "node1")[-1]
    wait_for(lambda: steps_of("cutoff", "node1")[-1] > before + 2, 120, "steps again after the link came back")
    train("-e", "train_job=cutoff", "-e", "train_action=stop")


def test_a_command_that_always_fails_is_stopped_by_the_crash_loop_guard(node, assert_nothing_left, record):
    start("loop", train_command=FAILS_AT_5, train_max_auto_restarts=10, train_fail_grace=2)
    guard = "crash loop: 3 restarts, no checkpoint at all"
    wait_for(lambda: any(e["event"] == "crash loop" for e in events("loop")), 240, "the crash-loop guard")
    wait_for(lambda: all(node(n).run("systemctl is-active trainops-job@loop").stdout.strip() != "active" for n in CLUSTER),
             60, "every node's part ended for good")
    kinds = [e["event"] for e in events("loop")]
    assert kinds == ["failure", "restart"] * 3 + ["failure", "crash loop", "stop"], kinds
    run, report = status("loop")
    assert run.returncode != 0 and report["verdict"].endswith("failed first; not restarted: %s" % guard), report["verdict"]
    assert guard in run.stdout
    record("loop", "crash-loop")
    assert_nothing_left()


def test_a_job_whose_steps_are_not_recognised_says_so_and_a_pattern_reads_them(node, record):
    command = "python3 -u -c 'import time\nfor i in range(1, 100000):\n    print(\"it=%d | J=%.2f\" % (i, 1.0 / i), flush=True); time.sleep(0.5)'"
    options = {"train_command": command, "train_preflight": False, "train_stall_floor": 10}
    try:
        assert train_job("odd", "-e", json.dumps(options)).returncode == 0
        wait_for(lambda: "progress unknown" in train_job("odd", "-e", "train_action=status").stdout, 60, "the supervisor's word")
        status = train_job("odd", "-e", "train_action=status")
        assert status.returncode == 0 and "job odd: running" in status.stdout
        assert "progress unknown: no step recognised in " in status.stdout and "set train_progress_pattern" in status.stdout
        assert report("odd")["nodes"]["node1"]["step"] is None
        record("odd", "progress-unknown")
    finally:
        train_job("odd", "-e", "train_action=stop")
    options["train_progress_pattern"] = r"it=(?P<step>\d+) \| J=(?P<loss>[\d.]+)"
    try:
        assert train_job("odd", "-e", json.dumps(options)).returncode == 0
        wait_for(lambda: status_step("odd") >= 3, 60, "steps read with the pattern")
        assert report("odd")["note"] is None
    finally:
        train_job("odd", "-e", "train_action=stop")


def test_a_node_whose_root_may_not_trace_is_said_and_its_ranks_shown_as_the_kernel_sees_them(node, assert_nothing_left, record):
    """node2's job runner without CAP_SYS_PTRACE (as on a container instance started without it): a stall's diagnosis
    there reads no stack, says why and what to grant, and shows what the kernel tells of the rank; the stopped rank on
    node3 is still the one named."""
    dropin = "/etc/systemd/system/trainops-job@.service.d"
    node("node2").check_output("mkdir -p %s && printf '[Service]\\nCapabilityBoundingSet=~CAP_SYS_PTRACE\\n' > %s/no-ptrace.conf"
                               " && systemctl daemon-reload" % (dropin, dropin))
    options = {"train_command": DDP, "train_run_opts": ["--volume", "/opt/trainops/bin:/opt/trainops/bin:ro"],
               "train_stall_seconds": 15, "train_preflight": False}
    try:
        assert train_job("noptrace", "-e", json.dumps(options)).returncode == 0
        wait_for(lambda: "TRAINOPS" in log("noptrace", "node1") and log("noptrace", "node1").count('"event": "step"') >= 5, 90,
                 "five steps")
        node("node3").check_output("pkill -STOP -f '%s'" % RANK)
        run = train_job("noptrace", "-e", "train_action=watch", "-e", "train_watch_seconds=120")
    finally:
        node("node3").run("pkill -CONT -f '%s'" % RANK)
        node("node2").run("rm -rf %s && systemctl daemon-reload" % dropin)
        train_job("noptrace", "-e", "train_action=stop")
    assert run.returncode != 0 and "stalled" in run.stdout, run.stdout[-3000:]
    diagnosis = [e for e in events("noptrace") if e["event"] == "diagnosis"][-1]
    assert diagnosis["culprits"] == [{"rank": 2, "node": "node3", "why": "is stopped"}], diagnosis
    assert "stacks unreadable on node2: root here lacks CAP_SYS_PTRACE" in diagnosis["verdict"], diagnosis["verdict"]
    answer = json.loads((SHARED / "jobs" / "noptrace" / "node2.diagnosis.json").read_text())
    [rank] = [p for p in answer["processes"] if "rank" in p]
    assert rank["stack"] is None and "Permission denied" in rank["stack_error"] and rank["kernel"]["threads"], rank
    assert answer["access"]["cap_sys_ptrace"] is False
    record("noptrace", "no-ptrace")
    assert_nothing_left()
