# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The supervision moves with the nodes (succession): the first node's loss with real runners and fake commands (the
next node takes the supervision, names the lost node and restarts the job without it, the rendezvous master moved), and
the rules around it with a fake clock (each node's turn, one claim per epoch, the word of an epoch that is over ignored,
a supervisor whose epoch is over stepping down)."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import wait_for
from trainops_job import records, runner, succession, supervisor

# Attempt 0 fails at once; a restart's attempt says where it runs and goes on.
FAILS_THEN_RUNS = '[ "$TRAINOPS_ATTEMPT" = 0 ] && exit 3; echo "rank $NODE_RANK of $NNODES at $MASTER_ADDR"; exec sleep 60'


def events(node):
    return json.loads((Path(node.conf["job_dir"]) / records.JOB_RECORD).read_text())["events"]


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_the_next_node_takes_the_supervision_of_a_lost_first_node_and_restarts_without_it(cluster):
    """node1, the supervisor's node, is gone (its runner never started; nothing answers on its address): node2's part
    fails, node2 takes the supervision once the lease has been silent for train_supervisor_silence (3 s here), finds
    node1 lost, and restarts the job on itself alone (train_min_nodes 1), rank 0 of one and the rendezvous master."""
    addresses = {"node1": "127.0.0.1", "node2": "127.0.0.2"}
    node = cluster(FAILS_THEN_RUNS, nodes=2, on_failure="restart", max_auto_restarts=3, supervisor_silence=3, min_nodes=1,
                   addresses=addresses, master_addr="127.0.0.1")[1]
    assert node.run("start").returncode == 0
    wait_for(lambda: "rank 0 of 1 at 127.0.0.2" in node.report()["log"], 60, "node2's part restarted alone")
    found = [{k: e.get(k) for k in ("event", "node", "replaces", "epoch", "first", "lost", "nodes")} for e in events(node)]
    assert found[0] == {"event": "supervision moved", "node": "node2", "replaces": "node1", "epoch": 2, "first": None, "lost": None,
                        "nodes": None}, found
    failure = next(e for e in found if e["event"] == "failure")
    assert (failure["first"], failure["lost"]) == ("node1", ["node1"]), found
    assert [e["event"] for e in found][-2:] == ["left out", "restart"] and found[-1]["nodes"] == ["node2"], found
    log = node.report()["log"]
    assert any(line.startswith("trainops-job: the supervisor on node1 silent for ") and line.endswith(
        ": node2 takes the supervision (epoch 2)") for line in log), log
    lease = json.loads((Path(node.conf["job_dir"]) / records.LEASE).read_text())
    assert (lease["holder"], lease["epoch"]) == ("node2", 2)
    view = json.loads((Path(node.conf["job_dir"]) / records.SUPERVISOR_VIEW).read_text())
    assert (view["holder"], view["epoch"], view["nodes"]) == ("node2", 2, ["node2"])
    # Its report carries the checkpoints' figures now (the holder's, the first node gone).
    assert "checkpoints" in node.report()


def test_each_node_waits_its_turn_the_next_one_first(cluster):
    nodes = cluster("true", nodes=3, spares=1, supervisor_silence=30)
    clock = Clock()
    watches = {n.name: succession.Watch(records.Job(n.conf), clock) for n in nodes}
    view = {"nodes": ["node1", "node2", "node3"], "spares": ["node4"]}
    lease = {"holder": "node1", "epoch": 1, "beat": 7}
    for watch in watches.values():
        watch.look()
    assert {n: w.turn(lease, view) for n, w in watches.items()} == {"node1": None, "node2": 30.0, "node3": 35.0, "node4": 40.0}
    clock.now += 30
    assert [n for n, w in watches.items() if w.due(lease, view)] == ["node2"]
    # The lease moving counts the silence anew; a lease released (its holder left out) is taken at once.
    watches["node3"].job.write(records.LEASE, dict(lease, run_id=watches["node3"].job.run_id, beat=8))
    clock.now += 5
    assert not watches["node3"].due(watches["node3"].look(), view)
    released = dict(lease, released=True)
    watches["node2"].job.write(records.LEASE, dict(released, run_id=watches["node2"].job.run_id))
    assert watches["node2"].due(watches["node2"].look(), view) and not watches["node3"].due(watches["node3"].look(), view)
    # Past every turn and a silence more, a node takes no part: no restart can come. Not where the supervision ended.
    clock.now += 2 * 30 + 3 * succession.STAGGER + 1
    assert watches["node3"].abandoned(lease, view)
    assert not watches["node2"].due(lease, dict(view, ended=True))


def test_one_claim_per_epoch_and_the_word_of_an_epoch_that_is_over_is_ignored(cluster):
    nodes = cluster("exec sleep 60", nodes=3, on_failure="restart", max_auto_restarts=3)
    jobs = [records.Job(n.conf) for n in nodes]
    assert succession.current(jobs[0]) == 1 and not succession.over(jobs[0], 1)
    assert [succession.claim(job, 2) for job in jobs[1:]] == [True, False]
    assert succession.claim(jobs[1], 2)  # its own claim again
    assert succession.current(jobs[0]) == 2 and succession.over(jobs[0], 1)
    # The first node's supervisor, back after the claim: it writes no request, no view, no lease, and steps down.
    old = supervisor.Supervisor(jobs[0])
    old.request("stop")
    old.hold()
    assert old.done.is_set() and not (Path(nodes[0].conf["job_dir"]) / records.CONTROL_REQUEST).exists()
    old.check(None)
    assert not (Path(nodes[0].conf["job_dir"]) / records.SUPERVISOR_VIEW).exists()
    assert not (Path(nodes[0].conf["job_dir"]) / records.LEASE).exists()
    # A request of epoch 1 left in the folder is ignored by every runner; epoch 2's is obeyed.
    part = runner.Runner(jobs[2])
    jobs[1].write(records.CONTROL_REQUEST, {"run_id": jobs[1].run_id, "action": "stop", "id": 4, "epoch": 1})
    assert part._request(None) is None  # pylint: disable=protected-access
    new = supervisor.Supervisor(jobs[1], epoch=2, taken_from="node1")
    assert new.watch.requests == 4  # its requests go on from the last one written
    new.request("stop")
    assert part._request(None) == {"run_id": jobs[1].run_id, "action": "stop", "id": 5, "epoch": 2}  # pylint: disable=protected-access
