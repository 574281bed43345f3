# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""roles/train/files/trainops-watch: progress read from real output, the stall judge, and the verdict on diagnoses
recorded from a 3-node CPU job whose rank 1 (node2) was stopped with SIGSTOP (tests/fixtures/stall), and from a
4-node NCCL job on the H200 test machine with its flight recorders (tests/fixtures/stall/h200)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers.sockets import filtered, free_ports

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "roles" / "train" / "files" / "trainops-watch"
FIXTURES = ROOT / "tests" / "fixtures" / "stall"
NODES = ["node1", "node2", "node3"]

_loader = importlib.machinery.SourceFileLoader("trainops_watch", str(SCRIPT))
_spec = importlib.util.spec_from_loader("trainops_watch", _loader)
watch = importlib.util.module_from_spec(_spec)
# No __pycache__ next to the program: the role copies files/ to the nodes.
_dont_write_bytecode, sys.dont_write_bytecode = sys.dont_write_bytecode, True
try:
    _loader.exec_module(watch)
finally:
    sys.dont_write_bytecode = _dont_write_bytecode


def recorded():
    return {node: json.loads((FIXTURES / ("%s.diagnosis.json" % node)).read_text()) for node in NODES}


@pytest.mark.parametrize("line, expected", [
    ('[default0]:TRAINOPS {"event": "step", "loss": 0.125, "step": 51}', (51, 0.125)),
    ('[default0]:TRAINOPS {"event": "checkpoint", "step": 50, "path": "x"}', (None, None)),
    (" 42%|████▏     | 42/100 [00:10<00:14,  4.1it/s]", (42, None)),
    ("{'loss': 1.2345, 'grad_norm': 3.0, 'learning_rate': 1e-05, 'epoch': 0.5}", (None, 1.2345)),
    ("global_step=7 loss=0.3", (7, 0.3)),
    ("Step 12 of the warm-up", (12, None)),
    ("nothing here", (None, None)),
])
def test_steps_and_losses_as_programs_print_them(line, expected):
    assert watch.read_progress(line) == expected


def test_a_repainted_progress_bar_is_no_new_step_and_the_trainers_loss_joins_its_step():
    clock = iter([10.0, 11.0, 12.0]).__next__
    progress = watch.Progress("node1", "run-1", clock=clock)
    assert progress.feed(" 1/10 [00:01<00:09]") and not progress.feed(" 1/10 [00:02<00:09]")
    assert progress.feed(" 2/10 [00:03<00:08]")
    assert not progress.feed("{'loss': 0.5, 'epoch': 0.2}")
    assert progress.record["points"] == [[10.0, 1, None], [11.0, 2, 0.5]]
    assert progress.record["step"] == 2 and progress.record["step_at"] == 11.0 and progress.record["loss"] == 0.5


def test_a_long_history_is_thinned_not_cut():
    times = iter(range(100000)).__next__
    progress = watch.Progress("node1", "run-1", clock=times)
    for step in range(1, 3001):
        progress.feed("step %d" % step)
    points = progress.record["points"]
    assert len(points) <= watch.POINTS_KEPT and points[0][1] == 1 and points[-1][1] == 3000


def test_tee_copies_everything_and_writes_progress(tmp_path):
    conf = {"NODE": "node1", "RUN_ID": "run-1", "JOB_DIR": str(tmp_path)}
    read, write = os.pipe()
    os.write(write, b"starting\nstep 1\r step 2\nTRAINOPS {\"event\": \"step\", \"loss\": 0.5, \"step\": 3}\n")
    os.close(write)
    assert watch.tee(conf, source=read) == 0
    assert (tmp_path / "node1.log").read_bytes().startswith(b"starting\nstep 1\r step 2\n")
    progress = json.loads((tmp_path / "node1.progress.json").read_text())
    assert progress["step"] == 3 and [p[1] for p in progress["points"]] == [1, 2, 3] and progress["loss"] == 0.5


def test_the_stall_time_is_derived_from_the_steps_with_a_floor():
    steps = [{"points": [[float(t), t // 2 + 1, None] for t in range(0, 40, 2)]}]  # a step every 2 s
    assert watch.stall_seconds({"STALL_FLOOR": "5", "STALL_FACTOR": "10"}, steps) == 20.0
    assert watch.stall_seconds({"STALL_FLOOR": "120", "STALL_FACTOR": "10"}, steps) == 120.0
    assert watch.stall_seconds({"STALL_SECONDS": "15", "STALL_FLOOR": "120"}, steps) == 15.0


def test_a_stall_is_judged_only_after_a_step_and_anew_after_a_restart():
    progress = [{"step": 45, "step_at": 100.0}, {"step": None, "step_at": None}]
    assert watch.stalled(progress, 15, 110.0) is None
    assert watch.stalled(progress, 15, 116.0) == (45, 16.0)
    assert watch.stalled([{"step": None, "step_at": None}], 15, 1000.0) is None
    # After a restart at 120 the old step does not count: the restarted job has its own start.
    assert watch.stalled(progress, 15, 200.0, restarted_at=120.0) is None
    assert watch.stalled([{"step": 46, "step_at": 130.0}], 15, 150.0, restarted_at=120.0) == (46, 20.0)


def test_the_recorded_stall_names_the_stopped_rank_and_where_the_others_wait():
    found = watch.verdict(53, recorded(), NODES)
    assert found["text"] == "stalled at step 53: rank 1 (node2) is stopped; ranks 0, 2 wait in backward (DDP's gradient all-reduce)"
    assert found["culprits"] == [{"rank": 1, "node": "node2", "why": "is stopped"}] and found["silent"] == []


def test_a_node_that_does_not_answer_is_named():
    answers = dict(recorded(), node3=None)
    found = watch.verdict(53, answers, NODES)
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
    assert "rank 1 (node2) is elsewhere: in main (train_ddp.py:159)" in watch.verdict(53, answers, NODES)["text"]
    answers["node2"]["processes"] = [p for p in answers["node2"]["processes"] if p.get("rank") != 1]
    assert "rank 1 has no process on any node" in watch.verdict(53, answers, NODES)["text"]


def test_where_names_a_collective_and_falls_back_to_the_innermost_frame():
    def stack(*frames):
        return [{"thread_name": "MainThread", "frames": [{"name": n, "filename": f, "line": 1} for n, f in frames]}]
    assert watch.where(stack(("wait", "/x/threading.py"), ("all_reduce", "/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py"),
                             ("main", "train.py"))) == "all_reduce"
    assert watch.where(stack(("main", "train.py"))) == "main (train.py:1)"
    assert watch.where(None) is None


def test_a_stall_with_restart_is_recorded_and_asked_of_every_node(tmp_path):
    conf = {"NODES": "node1 node2 node3", "RUN_ID": "run-1", "JOB_DIR": str(tmp_path)}
    (tmp_path / "job.json").write_text(json.dumps({"name": "ddp1", "run_id": "run-1"}))
    for node, answer in recorded().items():
        (tmp_path / ("%s.diagnosis.json" % node)).write_text(json.dumps(dict(answer, run_id="run-1", stall=1)))
    state = {"run_id": "run-1", "restarts": 0, "stalls": 0}
    watch.act(conf, state, (53, 16.0), 15.0, "restart", 1, clock=lambda: 1000.0)
    events = json.loads((tmp_path / "job.json").read_text())["events"]
    assert [e["event"] for e in events] == ["stall", "diagnosis", "restart"]
    assert json.loads((tmp_path / "stall.json").read_text()) == {"run_id": "run-1", "stall": 1, "step": 53}
    assert json.loads((tmp_path / "control.json").read_text()) == {"run_id": "run-1", "action": "restart", "id": 1}
    # The limit reached: the next stall stops the job instead.
    for node in NODES:
        path = tmp_path / ("%s.diagnosis.json" % node)
        path.write_text(json.dumps(dict(json.loads(path.read_text()), stall=2)))
    watch.act(conf, state, (60, 16.0), 15.0, "restart", 1, clock=lambda: 1100.0)
    events = json.loads((tmp_path / "job.json").read_text())["events"]
    assert [e["event"] for e in events][3:] == ["stall", "diagnosis", "restart limit", "stop"]
    assert json.loads((tmp_path / "control.json").read_text())["action"] == "stop"


def test_the_command_line_refuses_a_bad_job_name():
    run = subprocess.run([sys.executable, str(SCRIPT), "tee", "../etc"], capture_output=True, text=True, check=False)
    assert run.returncode == 2 and "bad job name ../etc" in run.stderr


def test_a_node_its_peers_cannot_reach_is_named_cut_off():
    answers = recorded()
    for proc in answers["node2"]["processes"]:
        proc["state"] = "S (sleeping)"  # every rank waits: only the network tells the nodes apart
    answers["node1"]["unreached"] = {"node3": "timed out"}
    answers["node2"]["unreached"] = {"node3": "timed out"}
    answers["node3"]["unreached"] = {"node1": "timed out", "node2": "timed out"}
    found = watch.verdict(53, answers, NODES)
    assert found["culprits"][0] == {"rank": None, "node": "node3",
                                    "why": "is cut off from the training network (node1, node2 cannot reach it: timed out)"}
    assert found["text"].startswith("stalled at step 53: node3 is cut off from the training network")


def test_reach_tells_an_answer_from_silence():
    # A closed port refuses (an answer: the peer is there); a full accept queue drops SYNs like a cut link.
    port = free_ports(1)[0]
    with filtered("127.0.0.4", port):
        found = watch.reach({"here": "127.0.0.3", "cut": "127.0.0.4"}, port=port, timeout=0.5)
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
    lines = {p["rank"]: watch.where(p["stack"]) for d in answers.values() for p in d["processes"] if "rank" in p}
    assert lines[0] == "main (train_ddp.py:156)" and lines[2] == lines[3] == "batch (train_ddp.py:75)"
    found = watch.verdict(477, answers, GPU_NODES)
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
    found = watch.verdict(477, answers, GPU_NODES)
    assert found["culprits"] == [{"rank": 1, "node": "gpu2", "why": "is elsewhere: in batch (train_ddp.py:75); its newest NCCL "
                                  "collective is all_reduce #959 (completed), the others wait in #960"}]
    assert found["text"].endswith("ranks 0, 2-3 wait in NCCL all_reduce #960 (enqueued 17 s ago, not completed)")


def test_a_real_dump_is_summarised_and_a_dump_with_code_is_refused(tmp_path):
    dump = FIXTURES / "h200" / "gpu1-rank0.flight-recorder"
    found = watch.read_dump(str(dump), now=1796307840.0)
    assert found["entries"] == 961 and found["pending"] == 2 and found["nccl"] == "2.28.9"
    assert {k: found["collective"][k] for k in ("op", "seq", "state", "group")} == {
        "op": "all_reduce", "seq": 960, "state": "scheduled", "group": "default_pg"}
    evil = tmp_path / "gpu1-rank0"
    evil.write_bytes(b"cos\nsystem\n(S'touch %s'\ntR." % str(tmp_path / "owned").encode())
    with pytest.raises(Exception, match="only plain data is read"):
        watch.read_dump(str(evil), now=0)
    assert not (tmp_path / "owned").exists()


def test_the_flight_recorder_is_asked_through_the_ranks_pipe(tmp_path):
    """A rank's watchdog, played by a thread: it reads its pipe (torch opens it read-only, non-blocking) and writes
    the recorded dump when asked. A stopped rank is not asked; a rank with no pipe is named."""
    env = {"TORCH_NCCL_DEBUG_INFO_PIPE_FILE": "%s/p-rank" % tmp_path, "TORCH_FR_DUMP_TEMP_FILE": "%s/d-rank" % tmp_path}
    pipe, dump = watch.flight_paths(os.getpid(), env, 0, proc="/proc")
    assert pipe == "/proc/%d/root%s/p-rank0.pipe" % (os.getpid(), tmp_path) and dump.endswith("/d-rank0")
    os.mkfifo("%s/p-rank0.pipe" % tmp_path)
    reader = os.open("%s/p-rank0.pipe" % tmp_path, os.O_RDONLY | os.O_NONBLOCK)

    def watchdog():
        for dummy in range(100):
            try:
                if os.read(reader, 16):
                    (tmp_path / "d-rank0").write_bytes((FIXTURES / "h200" / "gpu1-rank0.flight-recorder").read_bytes())
                    return
            except BlockingIOError:
                pass
            time.sleep(0.05)

    thread = threading.Thread(target=watchdog)
    thread.start()
    asked = {0: (dump, watch._mtime(dump), watch.ask_dump(pipe)),
             1: (str(tmp_path / "d-rank1"), None, "not asked: the rank is stopped"),
             2: (str(tmp_path / "d-rank2"), None, watch.ask_dump(str(tmp_path / "p-rank2.pipe")))}
    found = watch.flight_recorder(asked, wait=5)
    thread.join()
    os.close(reader)
    assert found[0]["fresh"] and found[0]["collective"]["seq"] == 960 and found[0]["file"] == "%s/d-rank0" % tmp_path
    assert found[1] == {"error": "not asked: the rank is stopped"}
    assert found[2] == {"error": "not asked: no such file or directory"}
