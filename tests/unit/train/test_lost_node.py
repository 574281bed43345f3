# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A node lost mid-job is a failure whatever its peers' launchers do (trainops_job.supervisor): its heartbeat silent
for LOST_AFTER seconds of the supervisor's clock and the probe not reaching it make the job restart without it
(train_on_failure: restart) or stop naming it; a silent node the probe still reaches is left alone, and the lost node,
not a survivor, is the one said to have failed first. The probe's answers are given (no SSH here): the probe itself is
the live tests' (molecule train)."""

from __future__ import annotations

import getpass
import json
from pathlib import Path

from trainops_job import records, supervisor
from trainops_job._job_events import Event

NODES = ["node1", "node2", "node3"]
GONE = "unreachable on the training network (timed out)"


class Probed(supervisor.Supervisor):
    """The supervisor with the probe's answers given: {node: why it cannot take part}; the others can."""

    def __init__(self, job: records.Job, clock: list, answers: dict):
        super().__init__(job, clock=lambda: clock[0])
        self.answers, self.asked = answers, []

    def probe(self, nodes):
        self.asked.append(list(nodes))
        return {node: self.answers.get(node) for node in nodes}


def job(tmp_path: Path, **settings) -> records.Job:
    conf = dict({"job": "ddp1", "node": "node1", "nodes": NODES, "run_id": "run-1", "job_dir": str(tmp_path), "user": getpass.getuser(),
                 "addresses": {n: "10.0.0.%d" % i for i, n in enumerate(NODES, 1)}, "on_failure": "restart", "min_nodes": 2}, **settings)
    (tmp_path / "job.json").write_text(json.dumps({"name": "ddp1", "run_id": "run-1"}))
    return records.Job(conf)


def beat(tmp_path: Path, node: str, count: int) -> None:
    (tmp_path / (records.NODE_FILES["alive"] % node)).write_text(json.dumps({"run_id": "run-1", "node": node, "attempt": 0, "beat": count}))


def events(tmp_path: Path) -> list:
    return [{k: v for k, v in e.items() if k not in ("run_id", "at")} for e in json.loads((tmp_path / "job.json").read_text())["events"]]


def test_a_node_silent_and_unreachable_is_lost_and_the_job_restarts_without_it(tmp_path):
    clock = [1000.0]
    judge = Probed(job(tmp_path), clock, {"node3": GONE})
    beat(tmp_path, "node2", 1)
    beat(tmp_path, "node3", 1)
    judge.lost(clock[0])
    # node2 beats on, node3 stops: not before LOST_AFTER of silence.
    for seconds, count in ((10, 2), (20, 3), (29, 4)):
        clock[0] = 1000.0 + seconds
        beat(tmp_path, "node2", count)
        judge.lost(clock[0])
    assert judge.asked == [] and not (tmp_path / records.CONTROL_REQUEST).exists()
    clock[0] = 1000.0 + supervisor.LOST_AFTER
    beat(tmp_path, "node2", 5)
    judge.lost(clock[0])
    why = "node3 stopped answering: " + GONE
    assert events(tmp_path)[:2] == [
        {"event": Event.FAILURE, "attempt": 0, "nodes": ["node3"], "first": "node3", "lost": ["node3"], "why": why, "rc": {}},
        {"event": Event.LEFT_OUT, "node": "node3", "why": GONE}]
    assert events(tmp_path)[2]["event"] == Event.RESTART and events(tmp_path)[2]["nodes"] == ["node1", "node2"]
    control = json.loads((tmp_path / records.CONTROL_REQUEST).read_text())
    assert control["action"] == "restart" and control["nodes"] == ["node1", "node2"] and control["why"] == why + " (train_on_failure: restart)"
    # Decided once for the attempt: no second failure while it restarts.
    clock[0] += 60
    judge.lost(clock[0])
    assert [e["event"] for e in events(tmp_path)].count(Event.FAILURE) == 1


def test_with_failures_not_restarted_every_part_is_stopped_naming_the_lost_node(tmp_path):
    clock = [1000.0]
    judge = Probed(job(tmp_path, on_failure="stop"), clock, {"node2": GONE})
    judge.lost(clock[0])  # neither has beaten yet: first sight
    clock[0] += supervisor.LOST_AFTER
    beat(tmp_path, "node3", 1)
    judge.lost(clock[0])
    assert judge.asked == [["node2"]]
    why = "node2 stopped answering: " + GONE
    assert events(tmp_path) == [
        {"event": Event.FAILURE, "attempt": 0, "nodes": ["node2"], "first": "node2", "lost": ["node2"], "why": why, "rc": {}},
        {"event": Event.STOP, "why": why, "guard": True}]
    control = json.loads((tmp_path / records.CONTROL_REQUEST).read_text())
    assert control["action"] == "stop" and control["by"] == "node2"


def test_a_silent_node_that_still_answers_is_left_alone_and_asked_again_later(tmp_path):
    clock = [1000.0]
    judge = Probed(job(tmp_path), clock, {})
    judge.lost(clock[0])
    clock[0] += supervisor.LOST_AFTER
    judge.lost(clock[0])
    assert judge.asked == [["node2", "node3"]] and not (tmp_path / "job.json").read_text().count("failure")
    clock[0] += 5
    judge.lost(clock[0])
    assert len(judge.asked) == 1  # not probed again before LOST_AFTER
    # A node whose part has ended (its exit record) is never silent.
    (tmp_path / (records.NODE_FILES["exit"] % "node3")).write_text(json.dumps({"run_id": "run-1", "rc": 0, "attempt": 0}))
    assert judge.silent(clock[0]) == ["node2"]


def test_a_node_that_never_ends_its_part_is_the_one_that_failed_not_the_survivor(tmp_path):
    """The peers' ranks failed because node3 went away (their parts failed, node2's first); node3, powered off, wrote
    nothing: once the survivors' parts ended and node3 is unreachable, the failure names node3."""
    clock = [1000.0]
    judge = Probed(job(tmp_path), clock, {"node3": GONE})
    judge.gone = lambda nodes, waited: waited >= 6  # the training network's probe: node3 unreachable
    for node, ended in (("node1", "2026-12-06T10:00:09Z"), ("node2", "2026-12-06T10:00:05Z")):
        (tmp_path / (records.NODE_FILES["exit"] % node)).write_text(json.dumps(
            {"node": node, "run_id": "run-1", "rc": 1, "attempt": 0, "final": False, "stopped_by": None, "ended": ended}))
    judge.failure(clock[0])
    clock[0] += 7
    judge.failure(clock[0])
    failure = events(tmp_path)[0]
    assert (failure["event"], failure["first"], failure["lost"]) == (Event.FAILURE, "node3", ["node3"])
    assert json.loads((tmp_path / records.CONTROL_REQUEST).read_text())["nodes"] == ["node1", "node2"]


def test_the_restart_on_fewer_nodes_says_the_accumulation_that_keeps_the_global_batch(tmp_path):
    clock = [1000.0]
    judge = Probed(job(tmp_path, batch={"keep": True, "accumulation": 4, "overrides": False}), clock, {"node3": GONE})
    judge.restart("node3 lost")
    [restart] = [e for e in events(tmp_path) if e["event"] == Event.RESTART]
    assert (restart["nodes"], restart["accumulation"], restart["batch_change"]) == (["node1", "node2"], 6, 0.0)
    # Not kept (the default): the restart says nothing of the batch.
    other = tmp_path / "other"
    other.mkdir()
    Probed(job(other), clock, {"node3": GONE}).restart("node3 lost")
    assert "accumulation" not in [e for e in events(other) if e["event"] == Event.RESTART][0]
