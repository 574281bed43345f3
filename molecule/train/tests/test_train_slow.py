"""train.yml on jobs slowed for real, each named while it runs: a node at a fifth of a core (the straggler), a data
loader that waits, a save every step, and one node's training link limited (tc)."""

import json
import subprocess
import time

from test_train_job import COMMAND, INVENTORY, OPTIONS, SHARED, events, train, wait_for
from testbed_fixtures import CLUSTER, container, timed, training_interface

# A compute-bound step (a large batch, no sleep): every rank computes most of the time, none waits long.
COMPUTE_BOUND = COMMAND.replace("--steps 200", "--steps 100000 --batch 200000").replace("--step-seconds 0.5", "--step-seconds 0")


def test_a_node_at_a_fifth_of_a_core_is_named_the_straggler(node, assert_nothing_left):
    """node3's CPU quota cut to a fifth of a core (podman update --cpus 0.2: its cgroup's CFS quota) while a
    compute-bound job runs: its rank is busy the whole step while node1's and node2's wait for it at the all-reduce.
    The supervisor on node1 names node3 the straggler; status says the job runs slow, and why."""
    run = train("-e", "train_job=slow", "-e", json.dumps(dict(OPTIONS, train_command=COMPUTE_BOUND, train_stall_seconds=120)))
    assert run.returncode == 0, run.stdout[-3000:]
    progress = SHARED / "jobs" / "slow" / "node1.progress.json"
    wait_for(lambda: progress.exists() and (json.loads(progress.read_text()).get("step") or 0) >= 5, 120, "five steps")
    subprocess.run(["podman", "update", "--cpus", "0.2", container("node3")], check=True, capture_output=True)
    cut = time.time()
    try:
        def named():
            return [e for e in events("slow") if e["event"] == "slow" and e["at"] > cut and e["node"] == "node3"]
        wait_for(named, 300, "node3 named the straggler")
        found = named()[0]
        timed("a straggler named (one node at a fifth of a core)", found["at"] - cut)
        print("named %.1f s after the cut: %s" % (found["at"] - cut, found["text"]))
        assert found["busy"] >= 0.75 and found["others"] <= found["busy"] - 0.3, found
        run = train("-e", "train_job=slow", "-e", "train_action=status")
        report = json.loads((INVENTORY.parent / "reports" / "train-slow.json").read_text())
        assert report["verdict"].startswith("running, slow: straggler: node3's ranks are busy"), report["verdict"]
        # Every node's windows over time, as the page draws them: node3 the busiest in the last.
        last = {n: report["nodes"][n]["perf"][-1] for n in CLUSTER}
        assert max(last, key=lambda n: last[n]["busy"]) == "node3", last
    finally:
        # The whole machine's two cores back (podman update leaves no other way to lift the quota here).
        subprocess.run(["podman", "update", "--cpus", "2", container("node3")], check=True, capture_output=True)
        train("-e", "train_job=slow", "-e", "train_action=stop")
    assert_nothing_left()


# No straggler: every rank's DataLoader waits half a second for each batch; then a 64 MiB save every step.
SLOW_KINDS = (
    ("loader", COMMAND.replace("--steps 200", "--steps 2000").replace("--step-seconds 0.5", "--step-seconds 0 --load-seconds 0.5"),
     "input-bound", "wait for their data"),
    ("saving", COMMAND.replace("--steps 200", "--steps 2000").replace(
        "--save-every 5 --step-seconds 0.5", "--save-every 1 --checkpoint-mb 64 --keep 2 --step-seconds 0"),
     "checkpoint-bound", "save or load checkpoints"),
)


def test_a_waiting_data_loader_and_a_save_every_step_are_classed(node, assert_nothing_left):
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
        finally:
            train("-e", "train_job=%s" % job, "-e", "train_action=stop")
    assert_nothing_left()


# About 4.1 million parameters (16.6 MB of gradients, all-reduced every step) on a batch of 8, no sleep, few saves.
WIDE = COMMAND.replace("--steps 200", "--steps 100000 --hidden 230000 --batch 8").replace(
    "--save-every 5 --step-seconds 0.5", "--save-every 100000 --step-seconds 0")
LIMIT = "tc qdisc add dev %s root tbf rate 40mbit burst 32kbit latency 400ms"


def test_a_node_whose_training_link_is_slowed_is_named(node, assert_nothing_left):
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
    finally:
        node("node2").run("tc qdisc del dev %s root" % interface)
        train("-e", "train_job=link", "-e", "train_action=stop")
    assert_nothing_left()
