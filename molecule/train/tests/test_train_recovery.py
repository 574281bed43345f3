"""Recovery on the cluster, with no controller attached (the supervisor on node1 acts on its own): a killed rank brings
the job back on every node from its newest complete checkpoint (train_on_failure: restart); a command that always
fails is stopped by the crash-loop guard, with that verdict; a node powered off mid-job (its container killed) is left
out and the job goes on, on the two nodes left (train_min_nodes: 2); the first node powered off ends the supervision,
and the others' parts end saying so, collect going on from node2. Nothing of a job is left on any node after each
case. The times go to scripts/benchmark (timed); the waits here are never-hang bounds."""

import contextlib
import datetime
import json
import subprocess
import time

import yaml

from ansible_collections.trainops.cluster.plugins.module_utils import torchrun
from test_train_job import COMMAND, OPTIONS, RANK, SHARED, events, exit_records, train, wait_for
from testbed_fixtures import CLUSTER, INVENTORY, container, playbook, power_on, timed

# Steps enough to outlast every case; a checkpoint every 5 steps.
RECOVER = dict(OPTIONS, train_command=COMMAND.replace("--steps 200", "--steps 2000"), train_on_failure="restart",
               train_max_auto_restarts=3)
# Fails at step 5 on every node, every time: no checkpoint is ever written.
FAILS_AT_5 = "for i in 1 2 3 4 5; do echo \"step $i loss 0.5\"; sleep 0.3; done; echo 'RuntimeError: loss is nan' >&2; exit 1"


def start(job, inventory=INVENTORY, **options):
    run = train("-e", "train_job=%s" % job, "-e", json.dumps(dict(RECOVER, **options)), inventory=inventory)
    assert run.returncode == 0, run.stdout[-3000:]


def status(job, inventory=INVENTORY):
    run = train("-e", "train_job=%s" % job, "-e", "train_action=status", inventory=inventory)
    return run, json.loads((INVENTORY.parent / "reports" / ("train-%s.json" % job)).read_text())


def points(job, node="node1"):
    """[time, step, loss] of every step the node logged (its progress record)."""
    path = SHARED / "jobs" / job / ("%s.progress.json" % node)
    return (json.loads(path.read_text()).get("points") or []) if path.exists() else []


def restarted(job):
    return [e for e in events(job) if e["event"] == "restart"]


def after_restart(job, node):
    """What the node's ranks logged after the runner's last restart line (train_ddp.py's records)."""
    text = (SHARED / "jobs" / job / ("%s.log" % node)).read_text()
    return torchrun.parse_output(text[text.rindex("trainops-job: restart "):])["records"]


def resumed_after_restart(job, node="node1"):
    """(the step the restarted job resumed from, the steps after it)."""
    after = after_restart(job, node)
    [resumed] = [r for r in after if r.get("event") == "resumed"]
    return resumed["step"], [r["step"] for r in after if r.get("event") == "step"]


def back_on_steps(job, killed, what):
    """Waits for the restart and its first new step; records both times. Returns the restart event."""
    wait_for(lambda: restarted(job), 150, "a restart")
    restart = restarted(job)[-1]
    wait_for(lambda: any(p[0] > restart["at"] for p in points(job)), 150, "a step after the restart")
    first = next(p for p in points(job) if p[0] > restart["at"])
    timed("%s: restart decided" % what, restart["at"] - killed)
    timed("%s: first step after the restart" % what, first[0] - restart["at"])
    print("%s: restart %.1f s after, its first step %.1f s later (step %d)" % (what, restart["at"] - killed, first[0] - restart["at"], first[1]))
    return restart


def stop(job):
    run = train("-e", "train_job=%s" % job, "-e", "train_action=stop")
    assert run.returncode == 0, run.stdout[-3000:]


def test_a_killed_rank_restarts_the_job_from_its_newest_checkpoint(node, assert_nothing_left):
    start("crash")
    wait_for(lambda: len(points("crash")) >= 12, 90, "twelve steps")
    pid = node("node2").check_output("pgrep -f '%s'" % RANK).split()[0]
    node("node2").check_output("kill -9 %s", pid)
    killed = time.time()
    restart = back_on_steps("crash", killed, "a killed rank")
    # Every node's torchrun failed (the others' ranks lost their peer): node2's rank, killed, is named first.
    [failure] = [e for e in events("crash") if e["event"] == "failure"]
    assert failure["first"] == "node2" and restart["why"] == "node2 failed first (train_on_failure: restart)", failure
    assert restart["nodes"] == CLUSTER and restart["world"] == 3, restart
    # From the newest complete checkpoint, on from the step after it.
    step, after = resumed_after_restart("crash")
    assert step == restart["checkpoint"] and step % 5 == 0 and after[0] == step + 1, (restart, step, after[:3])
    run, report = status("crash")
    assert run.returncode == 0 and report["verdict"] == "running", report["verdict"]
    assert report["starts_text"] == "restarted 1 time: on 3 nodes, then 3 (node2 failed first (train_on_failure: restart))"
    assert "restarted 1 time" in run.stdout
    stop("crash")
    assert_nothing_left()


def test_a_command_that_always_fails_is_stopped_by_the_crash_loop_guard(node, assert_nothing_left):
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
    assert_nothing_left()


def test_a_node_powered_off_is_left_out_and_the_job_goes_on_on_the_nodes_left(node, assert_nothing_left):
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
        assert report["starts_text"] == "restarted 1 time: on 3 nodes, then 2 (node3 failed first (train_on_failure: restart))"
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


@contextlib.contextmanager
def spare_inventory(spare):
    """The scenario's inventory of the same nodes with one of them a spare (group cluster_spare, a child of group
    cluster), beside it: its group_vars and reports are the scenario's."""
    data = yaml.safe_load(INVENTORY.read_text())
    cluster = data["all"]["children"]["testbed"]["children"]["cluster"]
    cluster["children"] = {"cluster_spare": {"hosts": {spare: cluster["hosts"].pop(spare)}}}
    path = INVENTORY.parent / "hosts-spare.yml"
    path.write_text(yaml.safe_dump(data))
    try:
        yield path
    finally:
        path.unlink()


def test_a_node_powered_off_is_replaced_by_a_spare(node, assert_nothing_left):
    """node3 a spare: launch.yml (site.yml's launch stage) gives it NNODES of the world of two and a NODE_RANK past its
    last; node1 and node2 train, node3's part stands by. node2's container killed (a power cut): the restart leaves it
    out and brings node3 in, in its place (rank 1), from the newest complete checkpoint. Afterwards node2 is brought
    back and site.yml, with the scenario's own inventory, makes node3 a node of the world again."""
    with spare_inventory("node3") as spare:
        launched = playbook("launch.yml", inventory=spare)
        assert launched.returncode == 0, launched.stdout[-3000:]
        env = node("node3").check_output("grep -E '^(NNODES|NODE_RANK)=' /etc/trainops/launch.env").split()
        assert env == ["NNODES=2", "NODE_RANK=2"], env
        start("spare", inventory=spare)
        wait_for(lambda: len(points("spare")) >= 12, 90, "twelve steps")
        assert status("spare", spare)[1]["nodes"]["node3"]["state"] == "standby (a spare)"
        subprocess.run(["podman", "kill", container("node2")], check=True, capture_output=True)
        killed = time.time()
        try:
            restart = back_on_steps("spare", killed, "a node powered off, a spare in its place")
            joined = [e for e in events("spare") if e["event"] == "spare joined"]
            assert [(e["node"], e["replaces"]) for e in joined] == [("node3", "node2")], joined
            assert restart["nodes"] == ["node1", "node3"] and restart["world"] == 2, restart
            step, after = resumed_after_restart("spare")
            assert step == restart["checkpoint"] and after[0] == step + 1, (restart, step, after[:3])
            # node3 is rank 1 of two, node2's place.
            assert [r["rank"] for r in after_restart("spare", "node3") if r.get("event") == "start"] == [1]
            run, report = status("spare", spare)
            assert report["verdict"] == "running on 2 nodes: node3 (a spare) in place of node2", report["verdict"]
            run = train("-e", "train_job=spare", "-e", "train_action=stop", inventory=spare)
            assert run.returncode == 4 and "job spare: stopped" in run.stdout, run.stdout[-3000:]
        finally:
            train("-e", "train_job=spare", "-e", "train_action=stop", inventory=spare)
            power_on("node2")
            repaired = playbook("site.yml", "--skip-tags", "verify", timeout=1200)
            assert repaired.returncode == 0, repaired.stdout[-3000:]
    assert node("node3").check_output("grep -E '^NODE_RANK=' /etc/trainops/launch.env") == "NODE_RANK=2"
    assert_nothing_left()


def final_records(job, nodes):
    """{node: its exit record} where the node's part has ended for good in this start."""
    return {name: record for name, record in exit_records(job).items() if name in nodes and record.get("final")}


def test_the_first_node_powered_off_ends_the_supervision_and_says_so(node, assert_nothing_left):
    """node1's container killed: the supervisor runs there, so no restart can come. node2's and node3's parts fail
    (their peer went away), wait for the supervisor's word for train_supervisor_silence (20 s here), then end for good
    and say why; status, told by node2, says the job failed and was not restarted because of node1; collect copies the
    job's records and newest checkpoint from node2. node1 is brought back and repaired by site.yml afterwards."""
    start("headless", train_supervisor_silence=20)
    wait_for(lambda: len(points("headless")) >= 12, 90, "twelve steps")
    subprocess.run(["podman", "kill", container("node1")], check=True, capture_output=True)
    killed = time.time()
    others = ["node2", "node3"]
    try:
        wait_for(lambda: len(final_records("headless", others)) == 2, 180, "node2's and node3's parts ended for good")
        ended = final_records("headless", others)
        timed("the first node powered off: the others' parts ended",
              max(datetime.datetime.fromisoformat(r["ended"]).timestamp() for r in ended.values()) - killed)
        assert all(r["rc"] != 0 and r["not_restarted"] == "the supervisor is silent" for r in ended.values()), ended
        for name in others:
            assert "the supervisor on node1 is silent: no restart will come" in (SHARED / "jobs" / "headless" / ("%s.log" % name)).read_text()
        run, report = status("headless")
        assert run.returncode != 0 and report["first_failed"] == "node1", report
        assert report["verdict"] == "failed: node1 failed first; not restarted: node1, where the supervisor runs, gave no report"
        assert report["note"].startswith("node1 gave no report: the job's supervisor runs there")
        assert report["nodes"]["node2"]["state"].endswith("; not restarted: the supervisor is silent"), report["nodes"]["node2"]
        # collect goes on from node2 (ansible-playbook's rc 4: node1 unreachable), each file checked by sha256.
        run = train("-e", "train_job=headless", "-e", "train_action=collect")
        assert run.returncode == 4 and "each verified by sha256 on the node and at the destination" in run.stdout, run.stdout[-3000:]
        dest, job_dir = INVENTORY.parent / "reports" / "collected" / "headless", SHARED / "jobs" / "headless"
        newest = sorted((job_dir / "checkpoints").glob("step-*.pt"))[-1]
        for name in ["job.json", "node2.log", "node2.exit", "node3.exit", "checkpoints/" + newest.name]:
            assert (dest / name).read_bytes() == (job_dir / name).read_bytes(), name
    finally:
        power_on("node1")
        repaired = playbook("site.yml", "--skip-tags", "verify", timeout=1200)
        assert repaired.returncode == 0, repaired.stdout[-3000:]
    assert_nothing_left()
