# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Job folders recorded from live runs on molecule's train cluster (tests/fixtures/train, README there), replayed: each
node's report made anew by the real node program from the recorded folder, the controller's status of them, the
supervisor's events, and its judges on what the nodes wrote at the verdict (the windows a class was named from, the
diagnoses a stall was named from). What the suite once proved with a live job per verdict, in milliseconds; the live
path itself keeps one molecule test per mechanism."""

from __future__ import annotations

import getpass
import json
import shutil
from pathlib import Path

from ansible_collections.trainops.cluster.plugins.module_utils import torchrun
from ansible_collections.trainops.cluster.plugins.plugin_utils import jobs
from conftest import Node, recorded_windows
from trainops_job import judge, records, supervisor, verdict

FIXTURES = Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "train"


def meta(case: str) -> dict:
    return json.loads((FIXTURES / case / "meta.json").read_text())


def events(case: str) -> list:
    """The recorded start's events, as the supervisor wrote them into the job record."""
    return json.loads((FIXTURES / case / "job" / "job.json").read_text())["events"]


def kinds(case: str) -> list:
    """The events' kinds, a slow verdict aside: how the job runs is judged beside a stall's or a failure's handling, and
    on a loaded machine one may come between them."""
    return [e["event"] for e in events(case) if e["event"] != "slow"]


def replayed(case: str, tmp_path: Path) -> dict:
    """The controller's status of the recorded job: every node that answered then reports anew through the node program
    (python3 -m trainops_job report, its settings as the role wrote them, the folder as recorded; no runner is alive
    now), a node the controller could not reach then gives no report."""
    recorded = meta(case)
    job_dir = tmp_path / "jobs" / recorded["job"]
    shutil.copytree(FIXTURES / case / "job", job_dir)
    reports, conf = {}, {}
    for path in sorted((FIXTURES / case / "conf").glob("*.json")):
        conf = json.loads(path.read_text())
        conf.update(job_dir=str(job_dir), checkpoint_dir=str(job_dir / "checkpoints"), user=getpass.getuser())
        reports[conf["node"]] = json.loads(Node(tmp_path, conf["node"], conf).run("report").stdout)
    nodes = conf["nodes"] + (conf.get("spares") or [])
    return jobs.status(nodes, {n: reports.get(n) for n in nodes}, conf["addresses"], unreachable=recorded["unreachable"])


def windows(case: str) -> tuple:
    """Every node's window as recorded at the verdict, and a moment just after the last of them."""
    return recorded_windows(FIXTURES / case / "job")


def diagnoses(case: str) -> dict:
    return {path.name.split(".")[0]: json.loads(path.read_text()) for path in sorted((FIXTURES / case / "job").glob("*.diagnosis.json"))}


# Each case (the README says what the live run was and what its replay asserts).
CASES = ["checkpoint-bound", "crash-loop", "cut-off", "field-report", "field-report-staged", "first-node-lost", "first-node-moved",
         "input-bound", "no-ptrace", "node-left-out", "progress-unknown", "scale", "slow-link", "stall-restart-limit", "stopped",
         "straggler", "succeeded"]
# Judged from its diagnoses alone: the nodes' settings of that start were rewritten by the job's next start before the
# copy was made (README).
WITHOUT_SETTINGS = {"cut-off"}


def test_every_case_is_a_folder_of_a_live_run_with_its_settings_and_when():
    cases = sorted(p.name for p in FIXTURES.iterdir() if p.is_dir())
    assert cases == sorted(CASES), cases
    for case in cases:
        recorded = meta(case)
        assert recorded["case"] == case and recorded["recorded"] and (FIXTURES / case / "job" / "job.json").exists(), case
        answered = [] if case in WITHOUT_SETTINGS else [n for n in ("node1", "node2", "node3") if n not in recorded["unreachable"]]
        assert sorted(p.stem for p in (FIXTURES / case / "conf").glob("*.json")) == answered, case
        run_id = json.loads((FIXTURES / case / "job" / "job.json").read_text())["run_id"]
        assert {json.loads(p.read_text())["run_id"] for p in (FIXTURES / case / "conf").glob("*.json")} <= {run_id}, case


def test_a_stall_restarted_then_stopped_at_the_restart_limit(tmp_path):
    """train_on_stall: restart, at most once; node3's rank stopped twice (SIGSTOP)."""
    assert kinds("stall-restart-limit") == ["stall", "diagnosis", "restart", "stall", "diagnosis", "restart limit", "stop"]
    assert all("rank 2 (node3) is stopped" in e["verdict"] for e in events("stall-restart-limit") if e["event"] == "diagnosis")
    # The restart resumed from the newest complete checkpoint (a save every 5 steps), and went on from the step after.
    records = torchrun.parse_output((FIXTURES / "stall-restart-limit" / "job" / "node1.log").read_text())["records"]
    [resumed] = [r for r in records if r.get("event") == "resumed"]
    after = [r["step"] for r in records[records.index(resumed):] if r.get("event") == "step"]
    assert resumed["step"] % 5 == 0 and after[0] == resumed["step"] + 1, (resumed, after)
    status = replayed("stall-restart-limit", tmp_path)
    assert status["verdict"] == "stopped after a stall (train_on_stall): the restart limit (1)", status["verdict"]
    assert {status["nodes"][n]["state"] for n in ("node1", "node2", "node3")} == {"stopped: stalled"}
    assert "rank 2 (node3) is stopped" in status["diagnosis"]


def test_a_command_that_always_fails_is_stopped_by_the_crash_loop_guard(tmp_path):
    assert kinds("crash-loop") == ["failure", "restart"] * 3 + ["failure", "crash loop", "stop"]
    status = replayed("crash-loop", tmp_path)
    assert status["verdict"].endswith("failed first; not restarted: crash loop: 3 restarts, no checkpoint at all"), status["verdict"]
    assert not any(seen["running"] for seen in status["nodes"].values())


def test_the_first_node_lost_the_others_end_saying_why_and_status_says_so(tmp_path):
    """node1, where the supervisor runs, powered off: node2's and node3's parts ended for good after the supervisor's
    silence; status, told by node2 and node3 alone, names node1."""
    status = replayed("first-node-lost", tmp_path)
    assert status["first_failed"] == "node1", status
    assert status["verdict"] == "failed: node1 failed first; not restarted: node1, where the supervisor runs, gave no report"
    assert status["note"].startswith("node1 gave no report: the job's supervisor runs there"), status["note"]
    for name in ("node2", "node3"):
        assert status["nodes"][name]["state"].endswith("; not restarted: the supervisor is silent"), status["nodes"][name]
        assert status["nodes"][name]["not_restarted"] == "the supervisor is silent"
    # The records collect would copy, told by the nodes that answer.
    assert {"job.json", "node2.log", "node2.exit", "node3.exit"} <= set(status["records"]), status["records"]


def test_the_first_node_lost_the_next_takes_the_supervision_and_the_job_goes_on_without_it(tmp_path):
    """node1, the supervisor's node and the rendezvous master, powered off, no spare, train_min_nodes: 2: node2 took the
    supervision (epoch 2), named node1 lost and restarted the job on node2 and node3, node2 rank 0 and the master (the
    live run asserted the rank and that status said `running on 2 of 3 nodes (node1 left out)` with no note). Recorded
    after the user's stop, told by node2 and node3 alone."""
    found = kinds("first-node-moved")
    assert found == ["supervision moved", "failure", "left out", "restart"], found
    moved = events("first-node-moved")[0]
    assert (moved["node"], moved["replaces"], moved["epoch"]) == ("node2", "node1", 2), moved
    [failure] = [e for e in events("first-node-moved") if e["event"] == "failure"]
    assert failure["first"] == "node1" and failure["lost"] == ["node1"], failure
    [restart] = [e for e in events("first-node-moved") if e["event"] == "restart"]
    assert restart["nodes"] == ["node2", "node3"] and restart["world"] == 2, restart
    status = replayed("first-node-moved", tmp_path)
    assert [status["nodes"][n]["state"] for n in ("node2", "node3")] == ["stopped", "stopped"], status["nodes"]
    assert status["nodes"]["node1"]["state"].startswith("left out: unreachable on the training network"), status["nodes"]["node1"]
    # node2 supervises: no word of a job whose supervisor is gone, though node1 gave no report.
    assert status["note"] is None and status["first_failed"] is None, status
    assert status["starts_text"] == ("restarted 1 time: on 3 nodes, then 2 (node1 stopped answering: unreachable on the training "
                                     "network (timed out) (train_on_failure: restart))"), status["starts_text"]


def test_a_node_powered_off_is_left_out_and_the_restart_goes_on_without_it(tmp_path):
    """node3 powered off, no spare: the peers' ranks failed at once, node3 did not answer, the restart went on with node1
    and node2 as a world of two (train_min_nodes: 2)."""
    [failure] = [e for e in events("node-left-out") if e["event"] == "failure"]
    assert failure["first"] == "node3" and failure["nodes"] == ["node1", "node2"], failure
    [left] = [e for e in events("node-left-out") if e["event"] == "left out"]
    assert left["node"] == "node3" and left["why"].startswith("unreachable on the training network"), left
    [restart] = [e for e in events("node-left-out") if e["event"] == "restart"]
    assert restart["nodes"] == ["node1", "node2"] and restart["world"] == 2, restart
    status = replayed("node-left-out", tmp_path)
    # Recorded after the user's stop: node1's and node2's parts stopped, node3 still left out.
    assert [status["nodes"][n]["state"] for n in ("node1", "node2")] == ["stopped", "stopped"], status["nodes"]
    assert status["nodes"]["node3"]["state"].startswith("left out: unreachable on the training network"), status["nodes"]["node3"]
    assert status["starts_text"] == "restarted 1 time: on 3 nodes, then 2 (node3 failed first (train_on_failure: restart))"


def test_a_clean_stop_is_every_nodes_stop_with_its_commands_status(tmp_path):
    status = replayed("stopped", tmp_path)
    assert {status["nodes"][n]["state"] for n in ("node1", "node2", "node3")} == {"stopped"}, status["nodes"]
    assert {status["nodes"][n]["stopped_by"] for n in ("node1", "node2", "node3")} == {"train_action=stop"}
    assert status["first_failed"] is None and status["verdict"] == "stopped", status["verdict"]


def test_a_scaling_run_shows_each_size_judged_and_what_it_buys(tmp_path):
    """train_action=scale: node1, then node1 and node2, then all three, each size measured over the same steps and judged
    from its runners' windows; 128 samples a rank and step (train_scale_batch)."""
    rows = jobs.scale_table(events("scale"))
    assert [(r["world"], r["nodes"]) for r in rows] == [(1, ["node1"]), (2, ["node1", "node2"]), (3, ["node1", "node2", "node3"])]
    assert all(r["steps_per_second"] > 0 and r["error"] is None and r["bound"] is not None for r in rows), rows
    assert rows[0]["speedup"] == 1.0 and [r["samples_per_second"] for r in rows] == [
        round(r["steps_per_second"] * 128 * r["world"], 2) for r in rows]
    status = replayed("scale", tmp_path)
    assert status["verdict"] == jobs.scale_text(rows) and status["verdict"].startswith("scaled: 2 nodes "), status["verdict"]
    assert {status["nodes"][n]["state"] for n in ("node1", "node2", "node3")} == {"stopped: scaling measured"}


def test_a_job_that_ran_to_its_end_succeeded_on_every_node(tmp_path):
    status = replayed("succeeded", tmp_path)
    assert status["verdict"] == "succeeded" and status["first_failed"] is None, status["verdict"]
    assert {status["nodes"][n]["state"] for n in ("node1", "node2", "node3")} == {"exited 0"}
    # Its last step, 20 of 20, as rank 0 logs them (train_ddp.py's records: the other ranks log none).
    assert [status["nodes"][n]["step"] for n in ("node1", "node2", "node3")] == [20, None, None], status["nodes"]


def test_a_job_whose_steps_are_not_recognised_is_said_so(tmp_path):
    status = replayed("progress-unknown", tmp_path)
    assert status["note"].startswith("progress unknown: no step recognised in "), status["note"]
    assert "set train_progress_pattern" in status["note"] and status["nodes"]["node1"]["step"] is None


def test_the_stalls_diagnoses_name_the_stopped_rank_and_a_node_cut_off():
    """Every node's answer to the stall's diagnosis, as recorded, judged again: a rank stopped (SIGSTOP) on node3 while
    node2's runner may not trace; and node3 cut off the training network (its peers' packets dropped)."""
    nodes = ["node1", "node2", "node3"]
    [said] = [e for e in events("no-ptrace") if e["event"] == "diagnosis"][-1:]
    found = verdict.verdict(said["step"], diagnoses("no-ptrace"), nodes)
    assert found["culprits"] == [{"rank": 2, "node": "node3", "why": "is stopped"}], found
    assert "stacks unreadable on node2: root here lacks CAP_SYS_PTRACE" in found["text"], found["text"]
    assert found["text"] == said["verdict"]
    [said] = [e for e in events("cut-off") if e["event"] == "diagnosis"][-1:]
    found = verdict.verdict(said["step"], diagnoses("cut-off"), nodes)
    assert found["culprits"][0] == {"rank": None, "node": "node3",
                                    "why": "is cut off from the training network (node1, node2 cannot reach it: timed out)"}, found
    assert found["text"] == said["verdict"]


def test_the_classes_are_judged_from_the_windows_recorded_at_their_verdicts():
    """The supervisor's judge (judge.bottleneck) on every node's window as each live job wrote it when its class was named:
    every rank's DataLoader waiting, a save after every step, one node's link at 40 Mbit/s, one node at a fifth of a core."""
    perfs, now = windows("input-bound")
    found = judge.bottleneck(perfs, now, 0)
    assert found["kind"] == "input-bound" and found["node"] is None and "every node's ranks wait for their data" in found["text"], found
    # The field report's trap: every rank reading one dataset file from shared storage throttled to 1 MiB/s a node.
    perfs, now = windows("field-report")
    found = judge.bottleneck(perfs, now, 0)
    assert found["kind"] == "input-bound" and found["node"] is None and "every node's ranks wait for their data" in found["text"], found
    assert "; stage the data on each node's local disk" in found["text"], found["text"]
    perfs, now = windows("checkpoint-bound")
    found = judge.bottleneck(perfs, now, 0)
    assert found["kind"] == "checkpoint-bound" and found["node"] is None, found
    assert "every node's ranks save or load checkpoints" in found["text"], found
    perfs, now = windows("slow-link")
    found = judge.bottleneck(perfs, now, 0)
    assert found["kind"] == "communication-bound" and "node2's ranks' sends queue up" in found["text"], found
    assert found["queued"]["node2"] > max(kb for n, kb in found["queued"].items() if n != "node2"), found
    # Held against the converge's CPU rung on these nodes (about 0.1 GB/s busbw): the job's few MB/s are far below it.
    held = jobs._held_to_ladder(found, json.loads((FIXTURES / "slow-link" / "verify.json").read_text()), {})
    assert "; against the ladder (CPU all-reduce over MPI, all nodes: " in held["text"], held["text"]
    assert "the network is slower now than when it was verified" in held["text"], held["text"]
    perfs, now = windows("straggler")
    found = judge.bottleneck(perfs, now, 0)
    assert found["kind"] == "straggler" and found["node"] == "node3" and found["text"].startswith("straggler: node3's ranks are busy"), found


def test_a_straggler_named_stays_named_until_windows_judged_without_it_span_two_windows(cluster):
    """The supervisor's view (what status says) on the recorded windows written into a job's folder in turn: the
    straggler's names node3; a window that cannot be judged (node3's stack looks too few) keeps it named, as the live
    job's status once flickered back to plain "running" (CI at 9c63fde); the scaling run's last, three nodes judged
    with nothing holding them back (their looks read as compute), keeps it named while such windows span less than
    SLOW_CLEARED_AFTER (CI at 410a08f: one loaded window cleared it) and clears it then; steps that stop coming clear it
    at once."""
    first = cluster("true", nodes=3)[0]
    watcher = supervisor.Supervisor(records.Job(first.conf))

    def look(case: str, edit=None, later: float = 0.0) -> dict | None:
        perfs, now = windows(case)
        for node, window in perfs.items():
            window.update(run_id=first.conf["run_id"], attempt=0, at=window["at"] + later)
            if edit:
                edit(node, window)
            Path(watcher.job.node_path("perf", node)).write_text(json.dumps(window))
        watcher.slow(now + later)
        return watcher.watch.slow

    assert look("straggler")["node"] == "node3"

    def starved(node, window):
        # node3's sampler starved with its ranks (a fifth of a core): one stack look in its window, too few to judge by.
        if node == "node3":
            for rank in window["ranks"].values():
                rank["places"] = {next(iter(rank["places"])): 1}
    assert look("straggler", starved)["node"] == "node3" and not watcher.watch.judged

    def computing(node, window):
        # The scaling run's windows with every look read as compute (as recorded, its ranks sleep between steps).
        for rank in window["ranks"].values():
            rank["places"] = {"compute": sum(rank["places"].values())}
    assert look("scale", computing)["node"] == "node3" and watcher.watch.judged
    assert look("scale", computing, later=supervisor.SLOW_CLEARED_AFTER - 1)["node"] == "node3"
    assert look("scale", computing, later=supervisor.SLOW_CLEARED_AFTER) is None and watcher.watch.judged
    # Named again, the windows without it count anew.
    assert look("straggler")["node"] == "node3" and watcher.watch.slow_unseen_since is None
    watcher.slow(None)
    assert watcher.watch.slow is None
    assert [e["event"] for e in json.loads(Path(watcher.job.path(records.JOB_RECORD)).read_text())["events"]] == ["slow", "slow"]
    # A restart (a scaling run's next size) starts unnamed: attempt 0's straggler is not attempt 1's, whose windows are
    # not there yet (CI at ecd271e: the second size of a scaling run was measured with the first size's class).
    assert look("straggler")["attempt"] == 0
    watcher.watch.attempt = 1
    assert look("straggler") is None and not watcher.watch.judged


def test_a_staged_job_whose_ranks_wait_on_each_other_is_not_said_to_wait_on_a_slower_network():
    """The field report's job with its data staged (field-report-staged): 20x the steps (2.0 -> 40.6 a second), its
    ranks (a tiny model on three 2-core containers) then wait in the all-reduce most of the time, sending 0.3 MB/s with
    nothing queued. Held to the ladder, that is not "the network is slower now than when it was verified" (what status
    said before): the ranks wait on each other."""
    perfs, now = windows("field-report-staged")
    found = judge.bottleneck(perfs, now, 0)
    assert found["kind"] == "communication-bound" and found["node"] is None, found
    assert max(found["queued"].values()) < 256, found["queued"]
    held = jobs._held_to_ladder(found, json.loads((FIXTURES / "field-report-staged" / "verify.json").read_text()), {})
    assert ": nothing waits to be sent on any node (at most " in held["text"] and "slower now" not in held["text"], held["text"]
