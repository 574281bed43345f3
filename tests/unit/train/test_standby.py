# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Spare nodes (group cluster_spare) in the node program, with real runners and fake commands: a spare stands by, a
restart that names it brings it in with the NODE_RANK of the node it replaces, and it ends with the supervision or a
user's stop; the supervisor puts a spare that answers in the place of a node left out."""

from __future__ import annotations

import json
import time
from pathlib import Path

from conftest import wait_for
from trainops_job import records, supervisor

# What the spare's command says of its place: NNODES, NODE_RANK and MASTER_ADDR as the restart rewrote them.
PLACE = 'echo "rank $NODE_RANK of $NNODES at $MASTER_ADDR attempt $TRAINOPS_ATTEMPT"; exec sleep 60'
ADDRESSES = {"node1": "10.0.0.1", "node2": "10.0.0.2", "node3": "10.0.0.3", "node4": "10.0.0.4"}


def request(node, **details):
    path = Path(node.conf["job_dir"]) / records.CONTROL_REQUEST
    path.write_text(json.dumps(dict(details, run_id=node.conf["run_id"])))


def test_a_spare_stands_by_until_a_restart_names_it_then_takes_the_rank_it_replaces(cluster):
    spare = cluster(PLACE, nodes=3, spares=1, addresses=ADDRESSES, master_addr="10.0.0.1")[3]
    assert spare.run("start").returncode == 0
    wait_for(lambda: spare.report()["state"] == records.STANDBY, 10, "the spare standing by")
    report = spare.report()
    assert report["running"] and report["standby"] and not report["failed"] and report["log"] == []
    # A restart that goes on without it (node3 left out, no spare wanted) leaves it standing by.
    request(spare, action="restart", id=1, nodes=["node1", "node2"], why="a stall at step 12")
    time.sleep(2.5)
    assert spare.report()["state"] == records.STANDBY
    # The next names it in node2's place: rank 1 of three, the master still node1's.
    request(spare, action="restart", id=2, nodes=["node1", "node4", "node3"], why="node2 failed first (train_on_failure: restart)")
    wait_for(lambda: "rank 1 of 3 at 10.0.0.1 attempt 2" in spare.report()["log"], 15, "the spare's part")
    report = spare.report()
    assert report["state"] == "running" and not report["standby"]
    assert report["log"][0] == "trainops-job: restart 2 on node1, node4, node3 (node2 failed first (train_on_failure: restart))"
    request(spare, action="stop", id=3)
    record = wait_for(spare.exit_record, 15, "the stop")
    assert record["stopped_by"] == records.STALL_STOP and record["attempt"] == 2 and not record["standby"]


def test_a_spare_no_restart_needed_ends_with_the_supervision(cluster):
    spare = cluster(PLACE, nodes=1, spares=1)[1]
    assert spare.run("start").returncode == 0
    wait_for(lambda: spare.report()["state"] == records.STANDBY, 10, "the spare standing by")
    # The first node's runner has ended (its supervisor with it): it says so in the supervisor's view.
    (Path(spare.conf["job_dir"]) / records.SUPERVISOR_VIEW).write_text(json.dumps({"run_id": spare.conf["run_id"], "ended": True}))
    record = wait_for(spare.exit_record, 10, "the spare's end")
    assert (record["rc"], record["stopped_by"], record["final"], record["standby"]) == (0, records.NOT_NEEDED, True, True)
    report = spare.report()
    assert report["state"] == "standby ended: " + records.NOT_NEEDED and report["standby"] and not report["failed"]
    assert not report["running"] and report["log"] == []


def test_a_spare_ends_when_the_user_stops_it(cluster):
    spare = cluster(PLACE, nodes=1, spares=1)[1]
    assert spare.run("start").returncode == 0
    wait_for(lambda: spare.report()["state"] == records.STANDBY, 10, "the spare standing by")
    assert spare.run("stopping").returncode == 0 and spare.run("stop").returncode == 0
    record = spare.exit_record()
    assert (record["stopped_by"], record["standby"]) == (records.USER_STOP, True) and spare.report()["state"] == "stopped"


def supervised(cluster, spares, answers, **settings):
    """The first node's supervisor asked to restart, every node's probe answered as given (None: it can take part)."""
    first = cluster("true", nodes=3, spares=spares, on_failure="restart", max_auto_restarts=3, **settings)[0]
    judge = supervisor.Supervisor(records.Job(first.conf))
    judge.probe = lambda nodes: {node: answers.get(node) for node in nodes}
    judge.restart("node2 failed first (train_on_failure: restart)")
    control = json.loads((Path(first.conf["job_dir"]) / records.CONTROL_REQUEST).read_text())
    events = json.loads((Path(first.conf["job_dir"]) / records.JOB_RECORD).read_text())["events"]
    return control, [{k: v for k, v in e.items() if k in ("event", "node", "why", "replaces", "nodes")} for e in events], judge


def test_the_supervisor_puts_a_spare_that_answers_in_the_place_of_a_node_left_out(cluster):
    gone = "unreachable on the training network (timed out)"
    control, events, judge = supervised(cluster, 2, {"node2": gone, "node4": "its runner has ended (exited 0)"})
    assert control["action"] == "restart" and control["nodes"] == ["node1", "node5", "node3"]
    assert events == [{"event": "left out", "node": "node2", "why": gone},
                      {"event": "spare unfit", "node": "node4", "why": "its runner has ended (exited 0)"},
                      {"event": "spare joined", "node": "node5", "replaces": "node2"},
                      {"event": "restart", "nodes": ["node1", "node5", "node3"], "why": "node2 failed first (train_on_failure: restart)"}]
    # Used or unfit, no spare is left for a later restart.
    assert judge.watch.spares == [] and judge.watch.nodes == ["node1", "node5", "node3"]


def test_without_a_spare_left_the_restart_goes_on_with_fewer_nodes_or_stops(cluster):
    gone = "unreachable on the training network (timed out)"
    control, events, dummy = supervised(cluster, 1, {"node2": gone, "node3": gone}, min_nodes=2)
    assert control["nodes"] == ["node1", "node4"] and [e["event"] for e in events] == ["left out", "left out", "spare joined", "restart"]
    control, events, dummy = supervised(cluster, 0, {"node2": gone, "node3": gone}, min_nodes=2)
    assert control["action"] == "stop" and events[-2]["event"] == "too few nodes"


def test_the_sizes_of_a_scaling_run():
    assert records.scale_sizes({}, 1) == [1] and records.scale_sizes({}, 3) == [1, 2, 3]
    assert records.scale_sizes({}, 8) == [1, 2, 4, 8] and records.scale_sizes({}, 12) == [1, 2, 4, 8, 12]
    assert records.scale_sizes({"sizes": [3, 1, 3]}, 3) == [1, 3]


def test_a_scaling_run_measures_each_size_then_stops(cluster):
    """train_action=scale on three nodes: node1 alone, then node1 and node2, then all three (the others stand by until
    their size), each size's steps per second from node1's steps after the warmup; then every part stopped."""
    # Its launch environment's NNODES is 3 (no launch.env here: a size short of all nodes sets it).
    command = 'd=$(( 5 + 5 * ${NNODES:-3} )); i=0; while :; do i=$((i + 1)); echo "step $i loss 0.5 world $NNODES"; sleep 0.$d; done'
    nodes = cluster(command, nodes=3, scale={"sizes": None, "warmup": 2, "steps": 5, "timeout": 60})
    for node in nodes:
        assert node.run("start").returncode == 0
    wait_for(lambda: nodes[2].report()["state"] == records.SCALE_STANDBY, 10, "node3 standing by")
    # Each size waits a window and a half for its class (perf windows: none here, no ranks), then goes on not judged.
    records_ = [wait_for(node.exit_record, 150, "the end of %s's part" % node.name) for node in nodes]
    assert {(r["stopped_by"], r["final"]) for r in records_} == {(records.SCALED, True)}
    found = [e for e in events(nodes[0]) if e["event"] in ("scale", "scaled")]
    assert [(e["event"], e.get("world"), e.get("nodes")) for e in found] == [
        ("scale", 1, ["node1"]), ("scale", 2, ["node1", "node2"]), ("scale", 3, ["node1", "node2", "node3"]), ("scaled", None, None)]
    # Each size measured (its sleep 0.1, 0.15 and 0.2 s a step): at least the 5 steps asked for, more where the tee read
    # several at once. No order of the rates is asserted: on a loaded machine (CI at c8c61e7: 21.6, 5.5, 6.3 steps/s)
    # the tee's reads move them more than the sleeps do; the table's arithmetic is tested on the recorded scale case.
    rates = [e["steps_per_second"] for e in found[:3]]
    assert all(e["steps"] >= 5 and e["seconds"] > 0 for e in found[:3]) and all(rate > 0 for rate in rates), rates
    assert [e["bound"] for e in found[:3]] == [None] * 3, found
    # Every size started afresh, in its own checkpoint directory.
    log = (Path(nodes[2].conf["job_dir"]) / "node3.log").read_text().splitlines()
    assert log[0] == "trainops-job: restart 2 on node1, node2, node3 (train_action=scale: 3 nodes)" and log[1].startswith("step 1 ")
    assert {p.name for p in Path(nodes[0].conf["checkpoint_dir"]).iterdir()} == {"scale-1-nodes", "scale-2-nodes", "scale-3-nodes"}
    assert nodes[0].report()["state"] == "stopped: scaling measured"


def events(node):
    return json.loads((Path(node.conf["job_dir"]) / records.JOB_RECORD).read_text())["events"]
