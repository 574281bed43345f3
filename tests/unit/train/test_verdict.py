# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The node program's stall judge and the verdict across nodes, on diagnoses recorded from a 3-node CPU job whose rank 1
(node2) was stopped with SIGSTOP (tests/fixtures/stall), and from a 4-node NCCL job on the H200 test machine with its
flight recorders (tests/fixtures/stall/h200); and how a node tells a peer's silence from its answer."""

from __future__ import annotations

import getpass
import json
from pathlib import Path

from helpers.sockets import filtered, free_ports
from trainops_job import diagnosis, records, supervisor, verdict
from trainops_job.settings import Settings

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures" / "stall"
NODES = ["node1", "node2", "node3"]


def job_settings(**values) -> Settings:
    """A job's settings with the role's defaults but these."""
    return Settings.read(dict({"job": "j1", "node": "node1", "nodes": ["node1"], "run_id": "r1", "job_dir": "/nonexistent", "user": "train"},
                              **values))


def recorded():
    return {node: json.loads((FIXTURES / ("%s.diagnosis.json" % node)).read_text()) for node in NODES}


def test_the_stall_time_is_derived_from_the_steps_with_a_floor():
    steps = [{"points": [[float(t), t // 2 + 1, None] for t in range(0, 40, 2)]}]  # a step every 2 s
    assert supervisor.stall_seconds(job_settings(stall_floor=5, stall_factor=10), steps) == 20.0
    assert supervisor.stall_seconds(job_settings(stall_floor=120, stall_factor=10), steps) == 120.0
    assert supervisor.stall_seconds(job_settings(stall_seconds=15, stall_floor=120), steps) == 15.0


def test_a_stall_is_judged_only_after_a_step_and_anew_after_a_restart():
    progress = [{"step": 45, "step_at": 100.0}, {"step": None, "step_at": None}]
    assert supervisor.stalled(progress, 15, 110.0) is None
    assert supervisor.stalled(progress, 15, 116.0) == (45, 16.0)
    assert supervisor.stalled([{"step": None, "step_at": None}], 15, 1000.0) is None
    # After a restart at 120 the old step does not count: the restarted job has its own start.
    assert supervisor.stalled(progress, 15, 200.0, restarted_at=120.0) is None
    assert supervisor.stalled([{"step": 46, "step_at": 130.0}], 15, 150.0, restarted_at=120.0) == (46, 20.0)


def test_the_recorded_stall_names_the_stopped_rank_and_where_the_others_wait():
    found = verdict.verdict(53, recorded(), NODES)
    assert found["text"] == "stalled at step 53: rank 1 (node2) is stopped; ranks 0, 2 wait in backward (DDP's gradient all-reduce)"
    assert found["culprits"] == [{"rank": 1, "node": "node2", "why": "is stopped"}] and found["silent"] == []


def test_a_node_that_does_not_answer_is_named():
    answers = dict(recorded(), node3=None)
    found = verdict.verdict(53, answers, NODES)
    assert "node3 stopped answering (no diagnosis within 30 s)" in found["text"]
    assert "rank 1 (node2) is stopped" in found["text"] and found["silent"] == ["node3"]


def test_a_rank_elsewhere_and_a_rank_with_no_process_are_named():
    answers = recorded()
    # node2's rank runs again, but in time.sleep of its own loop: the others still wait in backward.
    for proc in answers["node2"]["processes"]:
        if proc.get("rank") == 1:
            proc["state"] = "S (sleeping)"
            proc["stack"] = [{"thread_name": "MainThread", "frames": [
                {"name": "main", "filename": "/opt/trainops/bin/train_ddp.py", "short_filename": "train_ddp.py", "line": 159}]}]
    assert "rank 1 (node2) is elsewhere: in main (train_ddp.py:159)" in verdict.verdict(53, answers, NODES)["text"]
    answers["node2"]["processes"] = [p for p in answers["node2"]["processes"] if p.get("rank") != 1]
    assert "rank 1 has no process on any node" in verdict.verdict(53, answers, NODES)["text"]


def test_where_names_a_collective_and_falls_back_to_the_innermost_frame():
    def stack(*frames):
        return [{"thread_name": "MainThread", "frames": [{"name": n, "filename": f, "line": 1} for n, f in frames]}]
    assert verdict.where(stack(("wait", "/x/threading.py"), ("all_reduce", "/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py"),
                               ("main", "train.py"))) == "all_reduce"
    assert verdict.where(stack(("main", "train.py"))) == "main (train.py:1)"
    assert verdict.where(None) is None


class Probed(supervisor.Supervisor):
    """The supervisor with its probe's answers given: {node: None (takes part) or why not}."""

    answers = {}

    def probe(self, nodes):
        return {node: self.answers.get(node) for node in nodes}


def stalled_job(tmp_path, **settings):
    conf = dict({"job": "ddp1", "node": "node1", "nodes": NODES, "run_id": "run-1", "job_dir": str(tmp_path), "user": getpass.getuser(),
                 "on_stall": "restart", "max_auto_restarts": 1, "restarts_without_progress": 3, "min_nodes": 3}, **settings)
    (tmp_path / "job.json").write_text(json.dumps({"name": "ddp1", "run_id": "run-1"}))
    for node, answer in recorded().items():
        (tmp_path / ("%s.diagnosis.json" % node)).write_text(json.dumps(dict(answer, run_id="run-1", stall=1)))
    return records.Job(conf)


def test_a_stall_with_restart_is_recorded_and_asked_of_every_node(tmp_path):
    job = stalled_job(tmp_path)
    watching = Probed(job, clock=lambda: 1000.0)
    watching.act((53, 16.0), 15.0)
    events = json.loads((tmp_path / "job.json").read_text())["events"]
    assert [e["event"] for e in events] == ["stall", "diagnosis", "restart"]
    assert events[2]["nodes"] == NODES and events[2]["world"] == 3
    assert json.loads((tmp_path / "stall.json").read_text()) == {"run_id": "run-1", "stall": 1, "step": 53}
    assert json.loads((tmp_path / "control.json").read_text()) == {
        "run_id": "run-1", "action": "restart", "id": 1, "nodes": NODES, "why": "a stall at step 53 (train_on_stall: restart)", "epoch": 1}
    # The limit reached: the next stall stops the job instead.
    for node in NODES:
        path = tmp_path / ("%s.diagnosis.json" % node)
        path.write_text(json.dumps(dict(json.loads(path.read_text()), stall=2)))
    watching.act((60, 16.0), 15.0)
    events = json.loads((tmp_path / "job.json").read_text())["events"]
    assert [e["event"] for e in events][3:] == ["stall", "diagnosis", "restart limit", "stop"]
    assert json.loads((tmp_path / "control.json").read_text())["action"] == "stop"


def test_a_restart_leaves_out_a_node_that_does_not_answer_down_to_the_fewest_allowed(tmp_path):
    job = stalled_job(tmp_path, min_nodes=2, max_auto_restarts=3)
    Probed.answers = {"node3": "unreachable on the training network (timed out)"}
    try:
        watching = Probed(job, clock=lambda: 1000.0)
        watching.restart("node3 failed first (train_on_failure: restart)")
        events = json.loads((tmp_path / "job.json").read_text())["events"]
        assert [(e["event"], e.get("node"), e.get("nodes")) for e in events] == [
            ("left out", "node3", None), ("restart", None, ["node1", "node2"])]
        assert json.loads((tmp_path / "control.json").read_text())["nodes"] == ["node1", "node2"]
        # With node2 gone too, two nodes are too few.
        Probed.answers = {"node2": "its runner does not answer (ssh: connect to host node2 port 22: No route to host)"}
        watching.restart("node2 failed first (train_on_failure: restart)")
        events = json.loads((tmp_path / "job.json").read_text())["events"]
        assert [e["event"] for e in events][2:] == ["left out", "too few nodes", "stop"]
        assert events[-1]["why"] == "1 of 2 nodes can take part, train_min_nodes is 2"
    finally:
        Probed.answers = {}


def deepspeed_checkpoint(root, step, ranks):
    """A LLaMA-Factory checkpoint under DeepSpeed ZeRO-2 written by `ranks` data-parallel ranks, as files."""
    folder = root / ("checkpoint-%d" % step)
    (folder / ("global_step%d" % step)).mkdir(parents=True)
    names = ["trainer_state.json", "adapter_model.safetensors", "global_step%d/mp_rank_00_model_states.pt" % step]
    names += ["rng_state_%d.pth" % r for r in range(ranks)]
    names += ["global_step%d/bf16_zero_pp_rank_%d_mp_rank_00_optim_states.pt" % (step, r) for r in range(ranks)]
    for name in names:
        (folder / name).write_bytes(b"x")


class Waited(Probed):
    """The probe's answers in turn, one set a probe (the last one kept), on a clock that the waits move on."""

    turns = []

    def __init__(self, job):
        self.now = 1000.0
        super().__init__(job, clock=lambda: self.now, sleep=self.wait)

    def wait(self, seconds):
        self.now += seconds

    def probe(self, nodes):
        answers = self.turns.pop(0) if len(self.turns) > 1 else self.turns[0]
        return {node: answers.get(node) for node in nodes}


# The conversion off (train_checkpoint_convert empty): tests/unit/train/test_convert.py has the job that converts.
NO_CONVERSION = {"command": ""}


def test_a_restart_on_fewer_nodes_than_its_deepspeed_checkpoint_needs_is_refused_saying_why(tmp_path):
    deepspeed_checkpoint(tmp_path / "out", 200, 3)
    job = stalled_job(tmp_path, min_nodes=2, max_auto_restarts=3, resume={"dir": str(tmp_path / "out"), "world": 3}, convert=NO_CONVERSION)
    Waited.turns = [{"node3": "unreachable on the training network (timed out)"}]
    watching = Waited(job)
    watching.restart("node3 failed first (train_on_failure: restart)")
    events = json.loads((tmp_path / "job.json").read_text())["events"]
    assert [e["event"] for e in events] == ["left out", "checkpoint unfit", "stop"]
    assert events[-1]["why"].startswith("checkpoint-200 holds DeepSpeed ZeRO-1/2 shards of 3 data-parallel ranks; 2 ranks "
                                        "(2 data-parallel) cannot load them: convert it with DeepSpeed's ds_to_universal")
    assert events[-1]["why"].endswith("; not converted: train_checkpoint_convert is empty")
    assert json.loads((tmp_path / "control.json").read_text())["action"] == "stop" and watching.now == 1000.0


def test_a_restart_waits_train_spare_wait_for_the_node_its_checkpoint_needs(tmp_path):
    deepspeed_checkpoint(tmp_path / "out", 200, 3)
    job = stalled_job(tmp_path, min_nodes=2, max_auto_restarts=3, spare_wait=60, resume={"dir": str(tmp_path / "out"), "world": 3},
                      convert=NO_CONVERSION)
    # node3 back at the third probe (its node rebooted): the restart goes on with all three, 10 s later.
    Waited.turns = [{"node3": "unreachable on the training network (timed out)"}] * 2 + [{}]
    watching = Waited(job)
    watching.restart("node3 failed first (train_on_failure: restart)")
    events = json.loads((tmp_path / "job.json").read_text())["events"]
    assert [(e["event"], e.get("nodes")) for e in events] == [("restart", NODES)] and watching.now == 1000.0 + 2 * supervisor.SPARE_POLL
    # Never back: refused once the wait is over, saying it waited.
    (tmp_path / "again").mkdir()
    job = stalled_job(tmp_path / "again", min_nodes=2, max_auto_restarts=3, spare_wait=12, resume={"dir": str(tmp_path / "out"), "world": 3},
                      convert=NO_CONVERSION)
    Waited.turns = [{"node3": "unreachable on the training network (timed out)"}]
    watching = Waited(job)
    watching.restart("node3 failed first (train_on_failure: restart)")
    events = json.loads((tmp_path / "again" / "job.json").read_text())["events"]
    assert [e["event"] for e in events] == ["left out", "checkpoint unfit", "stop"] and watching.now == 1015.0
    assert events[-1]["why"].endswith("or restart on as many nodes as wrote it (no node came within train_spare_wait, 12 s); "
                                      "not converted: train_checkpoint_convert is empty")


def test_a_job_whose_steps_are_not_recognised_is_said_to_be_so():
    assert supervisor.unknown(1000.0, 1100.0, 120) is None
    assert supervisor.unknown(1000.0, 1245.0, 120).startswith("progress unknown: no step recognised in 4 min; set "
                                                              "train_progress_pattern")


def test_a_node_its_peers_cannot_reach_is_named_cut_off():
    answers = recorded()
    for proc in answers["node2"]["processes"]:
        proc["state"] = "S (sleeping)"  # every rank waits: only the network tells the nodes apart
    answers["node1"]["unreached"] = {"node3": "timed out"}
    answers["node2"]["unreached"] = {"node3": "timed out"}
    answers["node3"]["unreached"] = {"node1": "timed out", "node2": "timed out"}
    found = verdict.verdict(53, answers, NODES)
    assert found["culprits"][0] == {"rank": None, "node": "node3",
                                    "why": "is cut off from the training network (node1, node2 cannot reach it: timed out)"}
    assert found["text"].startswith("stalled at step 53: node3 is cut off from the training network")


def test_reach_tells_an_answer_from_silence():
    # A closed port refuses (an answer: the peer is there); a full accept queue drops SYNs like a cut link.
    port = free_ports(1)[0]
    with filtered("127.0.0.4", port):
        found = diagnosis.reach({"here": "127.0.0.3", "cut": "127.0.0.4"}, port=port, timeout=0.5)
    assert found == {"here": None, "cut": "timed out"}


GPU_NODES = ["gpu1", "gpu2", "gpu3", "gpu4"]


def on_gpus():
    """Recorded on the H200 test machine (tests/device/bin/device-stall): train.yml's job on four namespace nodes
    sharing its GPU, a rank each, NCCL between them; gpu2's rank stopped with SIGSTOP. Every node's diagnosis read its
    rank's state, py-spy stack, the GPU, and the flight recorder that the diagnosis asked for through the rank's pipe."""
    return {node: json.loads((FIXTURES / "h200" / ("%s.diagnosis.json" % node)).read_text()) for node in GPU_NODES}


def test_nccl_ranks_are_placed_by_their_flight_recorder_not_their_python_line():
    answers = on_gpus()
    # py-spy alone would split them: NCCL's all_reduce is asynchronous, and each rank waits at its next GPU use.
    lines = {p["rank"]: verdict.where(p["stack"]) for d in answers.values() for p in d["processes"] if "rank" in p}
    assert lines[0] == "main (train_ddp.py:156)" and lines[2] == lines[3] == "batch (train_ddp.py:75)"
    found = verdict.verdict(477, answers, GPU_NODES)
    assert found["text"] == ("stalled at step 477: rank 1 (gpu2) is stopped; "
                             "ranks 0, 2-3 wait in NCCL all_reduce #960 (enqueued 17 s ago, not completed)")
    assert found["culprits"] == [{"rank": 1, "node": "gpu2", "why": "is stopped"}]
    [gpu] = answers["gpu1"]["gpus"]
    assert gpu["utilization_percent"] == 100 and 0 < gpu["memory_used_mib"] < gpu["memory_total_mib"]
    [stopped] = [p for p in answers["gpu2"]["processes"] if "rank" in p]
    assert stopped["flight_recorder"] == {"error": "not asked: the rank is stopped"}


def test_a_rank_short_of_the_collective_the_others_wait_in_is_named_with_its_own():
    answers = on_gpus()
    for proc in answers["gpu2"]["processes"]:
        if "rank" in proc:  # running again, but its newest collective is the one before
            proc["state"] = "S (sleeping)"
            proc["flight_recorder"] = {"collective": {"op": "all_reduce", "seq": 959, "state": "completed", "group": "default_pg"}}
            proc["stack"] = answers["gpu3"]["processes"][-1]["stack"]
    found = verdict.verdict(477, answers, GPU_NODES)
    assert found["culprits"] == [{"rank": 1, "node": "gpu2", "why": "is elsewhere: in batch (train_ddp.py:75); its newest NCCL "
                                  "collective is all_reduce #959 (completed), the others wait in #960"}]
    assert found["text"].endswith("ranks 0, 2-3 wait in NCCL all_reduce #960 (enqueued 17 s ago, not completed)")


def test_a_rank_inside_a_collective_that_a_stopped_rank_holds_open_waits_and_is_not_blamed():
    """gpu2's rank stopped; gpu4's rank (3) is still inside the all_reduce before the one the others wait in (its data
    from the stopped rank never came): it waits too, where it is, and is not named a second culprit."""
    answers = on_gpus()
    for proc in answers["gpu4"]["processes"]:
        if "rank" in proc:
            proc["flight_recorder"] = {"collective": {"op": "all_reduce", "seq": 959, "state": "started", "group": "default_pg",
                                                      "age_seconds": 18.0}}
    found = verdict.verdict(477, answers, GPU_NODES)
    assert found["culprits"] == [{"rank": 1, "node": "gpu2", "why": "is stopped"}]
    assert found["text"] == ("stalled at step 477: rank 1 (gpu2) is stopped; ranks 0, 2 wait in NCCL all_reduce #960 (enqueued 17 s "
                             "ago, not completed); rank 3 waits in NCCL all_reduce #959 (enqueued 18 s ago, not completed)")


def test_without_stacks_the_kernels_view_and_what_to_grant_are_said():
    answers = recorded()
    grant = "root here lacks CAP_SYS_PTRACE (a container started without it): start the node's container with --cap-add SYS_PTRACE"
    for node, answer in answers.items():
        answer["access"] = {"ptrace_scope": 1, "cap_sys_ptrace": False, "grant": grant}
        for proc in answer["processes"]:
            if "rank" in proc:
                proc.update(stack=None, stack_error="Error: Permission denied (os error 13)",
                            kernel={"wchan": "futex_wait_queue", "syscall": "futex", "threads": {"S": 12}})
    found = verdict.verdict(53, answers, NODES)
    assert found["culprits"] == [{"rank": 1, "node": "node2", "why": "is stopped"}]
    assert found["text"] == (
        "stalled at step 53: rank 1 (node2) is stopped; ranks 0, 2 wait in an unknown place (no stack: Error: Permission denied "
        "(os error 13); the kernel shows it in futex (futex_wait_queue)) (stacks unreadable on node1, node2, node3: %s)" % grant)


def test_a_rank_whose_stack_could_not_be_read_is_not_blamed_for_being_elsewhere():
    answers = recorded()
    for proc in answers["node3"]["processes"]:
        if "rank" in proc:
            proc.update(stack=None, stack_error="Error: Permission denied (os error 13)", kernel={"wchan": None, "syscall": None, "threads": {}})
    found = verdict.verdict(53, answers, NODES)
    assert found["culprits"] == [{"rank": 1, "node": "node2", "why": "is stopped"}]
    assert "rank 2 waits in an unknown place (no stack: Error: Permission denied (os error 13))" in found["text"]


def test_watch_ends_when_the_nodes_of_the_last_start_have_ended(tmp_path):
    job = stalled_job(tmp_path)
    for node in ("node1", "node2"):
        (tmp_path / ("%s.exit" % node)).write_text(json.dumps({"node": node, "run_id": "run-1", "rc": 143, "final": True}))
    # node3 was powered off: it never records its end.
    assert supervisor.wait(job, 0, sleep=lambda s: None) == "watching"
    (tmp_path / records.SUPERVISOR_VIEW).write_text(json.dumps({"run_id": "run-1", "nodes": ["node1", "node2"]}))
    assert supervisor.wait(job, 0, sleep=lambda s: None) == "ended"


def test_a_failure_restart_names_the_node_whose_rank_was_killed(tmp_path):
    """Logs of a 3-node CPU job (molecule train) whose rank 1 on node2 was killed with SIGKILL: every node's torchrun
    failed (ranks 0 and 2 lost their peer, "Connection closed by peer [10.98.0.12]"), node2's last."""
    job = stalled_job(tmp_path, on_failure="restart", fail_grace=6, stop_grace=10, max_auto_restarts=3,
                      addresses={n: "10.98.0.1%d" % (i + 1) for i, n in enumerate(NODES)})
    for node, ended in zip(NODES, ("2026-12-04T23:49:00", "2026-12-04T23:49:05", "2026-12-04T23:49:00")):
        (tmp_path / ("%s.log" % node)).write_text((ROOT / "tests/fixtures/torchrun/killed-rank-3-nodes" / ("%s.log" % node)).read_text())
        (tmp_path / ("%s.exit" % node)).write_text(json.dumps({"node": node, "run_id": "run-1", "rc": 1, "attempt": 0, "final": False,
                                                               "stopped_by": None, "ended": ended}))
    Probed.answers = {}
    Probed(job, clock=lambda: 1000.0).failure(1000.0)
    failure, restart = json.loads((tmp_path / "job.json").read_text())["events"]
    assert (failure["event"], failure["first"], failure["nodes"]) == ("failure", "node2", NODES)
    assert (restart["event"], restart["why"], restart["nodes"]) == ("restart", "node2 failed first (train_on_failure: restart)", NODES)


def test_a_node_powered_off_is_not_waited_for_and_is_named_first(tmp_path, monkeypatch):
    """Logs of the 3-node CPU job (molecule train) whose node3 was powered off (its container killed): the ranks of node1
    and node2 failed at once ("Read error [10.98.0.13]:13030: Connection reset by peer"); node3's part never ends. Once
    fail fast had its time, node3 is found unreachable, named first and left out of the restart."""
    job = stalled_job(tmp_path, on_failure="restart", fail_grace=6, stop_grace=10, max_auto_restarts=3, min_nodes=2,
                      addresses={n: "10.98.0.1%d" % (i + 1) for i, n in enumerate(NODES)})
    for node in ("node1", "node2"):
        (tmp_path / ("%s.log" % node)).write_text((ROOT / "tests/fixtures/torchrun/node-powered-off" / ("%s.log" % node)).read_text())
        (tmp_path / ("%s.exit" % node)).write_text(json.dumps({"node": node, "run_id": "run-1", "rc": 1, "attempt": 0, "final": False,
                                                               "stopped_by": None, "ended": "2026-12-04T23:55:22"}))
    asked = []
    monkeypatch.setattr(diagnosis, "reach", lambda peers: asked.append(sorted(peers)) or {n: "timed out" for n in peers})
    Probed.answers = {"node3": "unreachable on the training network (timed out)"}
    watching = Probed(job, clock=lambda: 1000.0)
    watching.failure(1000.0)
    watching.failure(1003.0)
    assert asked == [] and not json.loads((tmp_path / "job.json").read_text()).get("events")  # within fail fast's time
    watching.failure(1006.0)  # fail fast's time passed: node3 is asked for, and does not answer
    assert asked == [["node3"]]
    failure, left, restart = json.loads((tmp_path / "job.json").read_text())["events"]
    assert (failure["first"], failure["nodes"], failure["lost"]) == ("node3", ["node1", "node2"], ["node3"])
    assert (left["event"], left["node"]) == ("left out", "node3")
    assert (restart["nodes"], restart["why"]) == (["node1", "node2"], "node3 lost: unreachable on the training network (train_on_failure: restart)")
