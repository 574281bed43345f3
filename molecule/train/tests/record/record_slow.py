"""Recorded for tests/fixtures/train (scripts/record-train-fixtures), not run in the suite: jobs slow for real without a
straggler, each classed while it runs: a data loader that waits (input-bound), a save every step (checkpoint-bound),
one node's training link limited with tc (communication-bound, the node named). The unit tests replay the supervisor's
judge on the windows recorded at the verdict (tests/unit/train/test_recorded_jobs.py)."""

import json
import time

from test_train_job import COMMAND, INVENTORY, OPTIONS, SHARED, events, train, wait_for
from testbed_fixtures import CLUSTER, timed, training_interface


# No straggler: every rank's DataLoader waits half a second for each batch; then a 64 MiB save every step.
SLOW_KINDS = (
    ("loader", COMMAND.replace("--steps 200", "--steps 2000").replace("--step-seconds 0.5", "--step-seconds 0 --load-seconds 0.5"),
     "input-bound", "wait for their data"),
    ("saving", COMMAND.replace("--steps 200", "--steps 2000").replace(
        "--save-every 5 --step-seconds 0.5", "--save-every 1 --checkpoint-mb 64 --keep 2 --step-seconds 0"),
     "checkpoint-bound", "save or load checkpoints"),
)


def test_a_waiting_data_loader_and_a_save_every_step_are_classed(node, assert_nothing_left, record):
    """Two jobs slow for real without a straggler: each rank's DataLoader (torch's) waits 0.5 s for each batch, then a
    job saves a 64 MiB checkpoint to shared storage after every step (the other ranks wait at the barrier in its save).
    The runners sample the ranks' Python stacks (py-spy, every second); the supervisor classes each job, input-bound,
    then checkpoint-bound, with every node's share; status says so."""
    for job, command, kind, doing in SLOW_KINDS:
        run = train("-e", "train_job=%s" % job, "-e", json.dumps(dict(OPTIONS, train_command=command, train_stall_seconds=60)))
        assert run.returncode == 0, run.stdout[-3000:]
        started = time.time()
        try:
            def named():
                return [e for e in events(job) if e["event"] == "slow" and e["kind"] == kind]
            wait_for(named, 180, "%s classed %s" % (job, kind))
            found = named()[0]
            timed("%s named (%s)" % (kind, job), found["at"] - started)
            print("%s: %.1f s after the start: %s" % (job, found["at"] - started, found["text"]))
            assert found["node"] is None and sorted(found["shares"]) == sorted(CLUSTER), found
            assert "every node's ranks %s" % doing in found["text"] and min(found["shares"].values()) >= 0.25, found
            # The rank that saves is busy while the others wait for it: the class, not a straggler, is named.
            assert not [e for e in events(job) if e["event"] == "slow" and e["kind"] == "straggler"], events(job)
            train("-e", "train_job=%s" % job, "-e", "train_action=status")
            report = json.loads((INVENTORY.parent / "reports" / ("train-%s.json" % job)).read_text())
            assert report["verdict"].startswith("running, slow: %s: every node's ranks" % kind), report["verdict"]
            record(job, kind)
        finally:
            train("-e", "train_job=%s" % job, "-e", "train_action=stop")
    assert_nothing_left()


# About 4.1 million parameters (16.6 MB of gradients, all-reduced every step) on a batch of 8, no sleep, few saves.
WIDE = COMMAND.replace("--steps 200", "--steps 100000 --hidden 230000 --batch 8").replace(
    "--save-every 5 --step-seconds 0.5", "--save-every 100000 --step-seconds 0")
LIMIT = "tc qdisc add dev %s root tbf rate 40mbit burst 32kbit latency 400ms"


def test_a_node_whose_training_link_is_slowed_is_named(node, assert_nothing_left, record):
    """node2's training interface limited to 40 Mbit/s out (tc's token bucket in its network namespace: a link at a
    fraction of its peers' speed) while the job all-reduces 16.6 MB of gradients a step: every rank waits in the
    all-reduce, and node2's ranks' bytes wait in their sockets. The supervisor classes the job communication-bound and
    names node2; status says so."""
    run = train("-e", "train_job=link", "-e", json.dumps(dict(OPTIONS, train_command=WIDE, train_stall_seconds=120)))
    assert run.returncode == 0, run.stdout[-3000:]
    progress = SHARED / "jobs" / "link" / "node1.progress.json"
    wait_for(lambda: progress.exists() and (json.loads(progress.read_text()).get("step") or 0) >= 5, 120, "five steps")
    interface = training_interface("node2")
    node("node2").check_output(LIMIT % interface)
    cut = time.time()
    try:
        def named():
            return [e for e in events("link") if e["event"] == "slow" and e["at"] > cut and e.get("node") == "node2"]
        wait_for(named, 300, "node2's link named")
        found = named()[0]
        timed("a slowed link named (one node's training link at 40 Mbit/s)", found["at"] - cut)
        print("named %.1f s after the cut: %s" % (found["at"] - cut, found["text"]))
        assert found["kind"] == "communication-bound" and "node2's ranks' sends queue up" in found["text"], found
        others = [kb for n, kb in found["queued"].items() if n != "node2"]
        assert found["queued"]["node2"] > max(others), found
        train("-e", "train_job=link", "-e", "train_action=status")
        report = json.loads((INVENTORY.parent / "reports" / "train-link.json").read_text())
        assert report["verdict"].startswith("running, slow: communication-bound: every node's ranks wait in collectives"), report
        # Held against the ladder's CPU rung on these nodes (verify.json of the converge: about 0.1 GB/s busbw): the job's
        # 5 MB/s is far below it.
        assert "; against the ladder (CPU all-reduce over MPI, all nodes: " in report["verdict"], report["verdict"]
        assert "the network is slower now than when it was verified" in report["verdict"], report["verdict"]
        record("link", "slow-link", ladder=True)
    finally:
        node("node2").run("tc qdisc del dev %s root" % interface)
        train("-e", "train_job=link", "-e", "train_action=stop")
    assert_nothing_left()
