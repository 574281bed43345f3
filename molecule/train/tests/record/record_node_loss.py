"""Recorded for tests/fixtures/train (scripts/record-train-fixtures), not run in the suite: a node powered off under a
running job, where no spare stands by: node3 left out and the job goes on on two nodes (train_min_nodes: 2); then the
first node powered off, where the supervisor runs: node2 takes the supervision and the job goes on on node2 and node3,
status says so, collect goes on from node2. Each is repaired by site.yml after it (the suite keeps one node loss, the spare's, last and unrepaired)."""

import subprocess
import time

from test_train_job import SHARED, events, train, wait_for
from test_train_recovery import after_restart, back_on_steps, points, resumed_after_restart, start, status
from testbed_fixtures import INVENTORY, container, playbook, power_on


def test_a_node_powered_off_is_left_out_and_the_job_goes_on_on_the_nodes_left(node, assert_nothing_left, record):
    """node3's container killed (a power cut: no shutdown, its network gone). Its peers' ranks wait in an all-reduce
    that never ends: the stall (15 s) is judged, node3 does not answer, the restart probes it and goes on without it,
    node1 and node2 as ranks 0 and 1 of two. node3 is brought back and repaired by site.yml afterwards."""
    start("poweroff", train_on_stall="restart", train_min_nodes=2)
    wait_for(lambda: len(points("poweroff")) >= 12, 90, "twelve steps")
    subprocess.run(["podman", "kill", container("node3")], check=True, capture_output=True)
    killed = time.time()
    try:
        restart = back_on_steps("poweroff", killed, "a node powered off")
        # Its peers' ranks failed at once (Gloo: "Read error [node3's address]: Connection reset by peer"); node3's part
        # never ends, and is not waited for once it does not answer.
        [failure] = [e for e in events("poweroff") if e["event"] == "failure"]
        assert failure["first"] == "node3" and failure["nodes"] == ["node1", "node2"], failure
        left = [e for e in events("poweroff") if e["event"] == "left out"]
        assert [e["node"] for e in left] == ["node3"] and left[0]["why"].startswith("unreachable on the training network"), left
        assert restart["nodes"] == ["node1", "node2"] and restart["world"] == 2, restart
        step, after = resumed_after_restart("poweroff")
        assert step == restart["checkpoint"] and after[0] == step + 1, (restart, step, after[:3])
        # node2 is rank 1 of two now (NNODES, NODE_RANK and WORLD_SIZE rewritten for this start).
        assert [r["rank"] for r in after_restart("poweroff", "node2") if r.get("event") == "start"] == [1]
        # status and stop go on without node3 (the controller cannot reach it either: ansible-playbook's rc 4).
        run, report = status("poweroff")
        assert report["verdict"] == "running on 2 of 3 nodes (node3 left out)", report["verdict"]
        assert report["nodes"]["node3"]["state"].startswith("left out: unreachable on the training network"), report["nodes"]["node3"]
        assert report["starts_text"] == "restarted 1 time: on 3 nodes, then 2 (node3 lost: unreachable on the training network (train_on_failure: restart))"
        record("poweroff", "node-left-out", unreachable=["node3"])
        run = train("-e", "train_job=poweroff", "-e", "train_action=stop")
        assert run.returncode == 4 and "job poweroff: stopped" in run.stdout, run.stdout[-3000:]
    finally:
        # Stopped before node3 comes back: site.yml's image probe, a container that ends on node1 and node2, would take
        # the job's containers with it in this harness (podman inside podman, cgroup v1).
        train("-e", "train_job=poweroff", "-e", "train_action=stop")
        power_on("node3")
        repaired = playbook("site.yml", "--skip-tags", "verify", timeout=1200)
        assert repaired.returncode == 0, repaired.stdout[-3000:]
    assert_nothing_left()


def test_the_first_node_powered_off_the_next_takes_the_supervision_and_goes_on_without_it(node, assert_nothing_left, record):
    """node1's container killed: the node that supervises the job and serves its rendezvous. No spare; train_min_nodes: 2,
    every other recovery setting at its default. node2 takes the supervision once node1's lease has been silent for
    train_supervisor_silence (30 s), names node1 lost, and restarts the job on node2 and node3 from the newest checkpoint,
    node2 rank 0 and the rendezvous master; status, told by node2 and node3, says so; collect goes on from node2. node1 is
    brought back and repaired by site.yml afterwards: its runner is gone, and nothing of it acts on the job."""
    start("headless", train_min_nodes=2)
    wait_for(lambda: len(points("headless")) >= 12, 90, "twelve steps")
    subprocess.run(["podman", "kill", container("node1")], check=True, capture_output=True)
    killed = time.time()
    try:
        # train_ddp.py logs its steps on rank 0: node2's now.
        restart = back_on_steps("headless", killed, "the first node powered off, the job on the two left", node="node2")
        moved = [e for e in events("headless") if e["event"] == "supervision moved"]
        assert [(e["node"], e["replaces"], e["epoch"]) for e in moved] == [("node2", "node1", 2)], moved
        [failure] = [e for e in events("headless") if e["event"] == "failure"]
        assert failure["first"] == "node1" and failure["lost"] == ["node1"], failure
        assert restart["nodes"] == ["node2", "node3"] and restart["world"] == 2, restart
        step, after = resumed_after_restart("headless", "node2")
        assert step == restart["checkpoint"] and after[0] == step + 1, (restart, step, after[:3])
        # node2 is rank 0 of two and the master now (MASTER_ADDR rewritten for this attempt).
        assert [r["rank"] for r in after_restart("headless", "node2") if r.get("event") == "start"] == [0]
        run, report = status("headless")
        assert report["verdict"] == "running on 2 of 3 nodes (node1 left out)", report["verdict"]
        assert report["note"] is None, report["note"]
        # Stopped (from node2 and node3: ansible-playbook's rc 4, node1 unreachable), recorded, then collected from node2,
        # each file checked by sha256 (a running job's files would change while copied).
        run = train("-e", "train_job=headless", "-e", "train_action=stop")
        assert run.returncode == 4 and "job headless: stopped" in run.stdout, run.stdout[-3000:]
        record("headless", "first-node-moved", unreachable=["node1"])
        run = train("-e", "train_job=headless", "-e", "train_action=collect")
        assert run.returncode == 4 and "each verified by sha256 on the node and at the destination" in run.stdout, run.stdout[-3000:]
        dest, job_dir = INVENTORY.parent / "reports" / "collected" / "headless", SHARED / "jobs" / "headless"
        newest = sorted((job_dir / "checkpoints").glob("step-*.pt"))[-1]
        for name in ["job.json", "node2.log", "node2.exit", "node3.exit", "checkpoints/" + newest.name]:
            assert (dest / name).read_bytes() == (job_dir / name).read_bytes(), name
    finally:
        train("-e", "train_job=headless", "-e", "train_action=stop")
        power_on("node1")
        repaired = playbook("site.yml", "--skip-tags", "verify", timeout=1200)
        assert repaired.returncode == 0, repaired.stdout[-3000:]
    assert_nothing_left()
