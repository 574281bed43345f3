# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The node program's runner with fake commands and real processes, no containers: a job's end recorded, fail fast, a
stop that lets the command end, a restart asked by the supervisor, a sweep, and the node's report."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from conftest import wait_for
from trainops_job import records

# A trainer that saves on SIGTERM: it takes a second to write its file, then exits 0.
SAVES_ON_SIGTERM = """python3 -c '
import os, signal, sys, time
def save(*a):
    time.sleep(1)
    open(os.environ["TRAINOPS_CHECKPOINT_DIR"] + "/saved-on-sigterm", "w").write("ok")
    print("saved", flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, save)
for step in range(1, 100000):
    print("step %d loss 0.5" % step, flush=True)
    time.sleep(0.2)
'"""


def test_a_command_that_ends_is_recorded_with_its_log_and_progress(cluster):
    [node] = cluster("echo starting; for i in 1 2 3; do echo \"step $i loss 0.$i\"; done; exit 3")
    assert node.run("start").returncode == 0
    record = wait_for(node.exit_record, 20, "the exit record")
    assert record["rc"] == 3 and record["stopped_by"] is None and record["run_id"] == node.conf["run_id"]
    report = node.report()
    assert report["state"] == "failed: exited 3" and report["failed"] and not report["running"]
    assert report["log"][:2] == ["starting", "step 1 loss 0.1"]
    assert [p[1:] for p in report["progress"]["points"]] == [[1, 0.1], [2, 0.2], [3, 0.3]]
    assert report["job"]["run_id"] == node.conf["run_id"] and report["job"]["events"] == []
    assert {"job.json", "node1.log", "node1.exit", "node1.progress.json"} <= set(report["records"])


def test_a_peer_that_failed_on_its_own_ends_the_others_parts(cluster):
    first, second = cluster("if [ $TRAINOPS_NODE = node2 ]; then sleep 1; exit 7; fi; exec sleep 60", nodes=2)
    for node in (first, second):
        assert node.run("start").returncode == 0
    start = time.monotonic()
    record = wait_for(first.exit_record, 30, "node1's exit record")
    assert record["stopped_by"] == "node2" and first.report()["state"] == "stopped: node2 failed"
    assert second.exit_record()["rc"] == 7 and second.report()["failed"]
    print("node1 stopped %.1f s after the start" % (time.monotonic() - start))


def test_a_stop_lets_the_command_end_and_save(cluster):
    [node] = cluster(SAVES_ON_SIGTERM)
    assert node.run("start").returncode == 0
    wait_for(lambda: (node.report()["progress"] or {}).get("step", 0) >= 3, 20, "three steps")
    assert node.report()["state"] == "running"
    assert node.run("stopping").returncode == 0
    stopped = node.run("stop")
    assert json.loads(stopped.stdout) == {"ended": [], "left": [], "stopped": True, "running": False, "unstaged": False}, stopped.stderr
    assert (Path(node.conf["checkpoint_dir"]) / "saved-on-sigterm").read_text() == "ok"
    record = node.exit_record()
    assert record["rc"] == 0 and record["stopped_by"] == records.USER_STOP
    assert node.report()["state"] == "stopped" and node.report()["log"][-1] == "saved"


def test_the_supervisors_restart_starts_the_command_again_and_its_stop_ends_it(cluster):
    [node] = cluster('echo "attempt $TRAINOPS_ATTEMPT"; exec sleep 60')
    assert node.run("start").returncode == 0
    wait_for(lambda: "attempt 0" in node.report()["log"], 10, "the first attempt")
    control = Path(node.conf["job_dir"]) / records.CONTROL_REQUEST
    control.write_text(json.dumps({"run_id": node.conf["run_id"], "action": "restart", "id": 1, "nodes": ["node1"],
                                   "why": "a stall at step 3 (train_on_stall: restart)"}))
    wait_for(lambda: "attempt 1" in node.report()["log"], 15, "the restart")
    assert "trainops-job: restart 1 on node1 (a stall at step 3 (train_on_stall: restart))" in node.report()["log"]
    control.write_text(json.dumps({"run_id": node.conf["run_id"], "action": "stop", "id": 2}))
    record = wait_for(node.exit_record, 15, "the stop")
    assert record["stopped_by"] == records.STALL_STOP and node.report()["state"] == "stopped: stalled"


def test_a_sweep_ends_what_is_left_of_the_job(cluster):
    [node] = cluster("sleep 60 & sleep 60")
    assert node.run("start").returncode == 0
    wait_for(lambda: node.report()["running"], 10, "the runner")
    time.sleep(0.5)
    swept = json.loads(node.run("sweep").stdout)
    assert len(swept["ended"]) >= 2 and swept["left"] == []
    wait_for(node.exit_record, 10, "the exit record")


def test_a_node_without_the_job_reports_it_not_started(cluster):
    [node] = cluster("true")
    node.conf_dir.joinpath("j1.json").unlink()
    report = node.report()
    assert report["state"] == records.NOT_STARTED and report["run_id"] is None


def test_a_bad_job_name_is_refused(cluster):
    [node] = cluster("true")
    node.conf["job"] = "../etc"
    run = node.run("report")
    assert run.returncode == 2 and "bad job name ../etc" in run.stderr


def events(node):
    return json.loads((Path(node.conf["job_dir"]) / records.JOB_RECORD).read_text())["events"]


def test_a_failure_restarts_the_command_when_failures_restart(cluster):
    """train_on_failure: restart. The first attempt fails; the supervisor restarts it; the second ends well."""
    [node] = cluster('echo "attempt $TRAINOPS_ATTEMPT"; [ "$TRAINOPS_ATTEMPT" != 0 ] || exit 3', on_failure="restart")
    assert node.run("start").returncode == 0
    record = wait_for(lambda: (node.exit_record() or {}).get("final") and node.exit_record(), 40, "the final record")
    assert record["rc"] == 0 and record["attempt"] == 1 and node.report()["state"] == "exited 0"
    assert [e["event"] for e in events(node)] == ["failure", "restart"]
    restart = events(node)[1]
    assert restart["nodes"] == ["node1"] and restart["world"] == 1 and restart["why"] == "node1 failed first (train_on_failure: restart)"
    assert "trainops-job: restart 1 on node1 (node1 failed first (train_on_failure: restart))" in node.report()["log"]


def test_a_command_that_always_fails_is_stopped_as_a_crash_loop(cluster):
    [node] = cluster("echo step 1 loss 0.5; exit 3", on_failure="restart", max_auto_restarts=5, restarts_without_progress=2)
    assert node.run("start").returncode == 0
    record = wait_for(lambda: (node.exit_record() or {}).get("final") and node.exit_record(), 60, "the final record")
    assert record["rc"] == 3 and node.report()["state"] == "failed: exited 3" and node.report()["failed"]
    kinds = [e["event"] for e in events(node)]
    assert kinds == ["failure", "restart", "failure", "restart", "failure", "crash loop", "stop"], kinds
    assert events(node)[-1]["why"] == "crash loop: 2 restarts, no checkpoint at all"


def test_restarts_end_at_the_limit(cluster):
    [node] = cluster("exit 3", on_failure="restart", max_auto_restarts=1)
    assert node.run("start").returncode == 0
    wait_for(lambda: (node.exit_record() or {}).get("final"), 40, "the final record")
    assert [e["event"] for e in events(node)] == ["failure", "restart", "failure", "restart limit", "stop"]


def test_a_restart_on_fewer_nodes_rewrites_their_ranks_and_the_master(cluster):
    addresses = {"node1": "10.0.0.1", "node2": "10.0.0.2", "node3": "10.0.0.3"}
    [node] = cluster("torchrun train.py", nodes=3, addresses=addresses, master_addr="10.0.0.1")[1:2]
    from trainops_job import runner
    job = records.Job(node.conf)
    assert runner.command(job, job.nodes) == "torchrun train.py"
    # node1, the master, left out: node2 is rank 0 of two, and the master.
    assert runner.command(job, ["node2", "node3"]) == (
        "NNODES=2 NODE_RANK=0 MASTER_ADDR=10.0.0.2 WORLD_SIZE=$((2 * ${NPROC_PER_NODE:-1})); "
        "export NNODES NODE_RANK MASTER_ADDR WORLD_SIZE; torchrun train.py")
    # node3 left out: the master stays on node1.
    assert runner.command(job, ["node1", "node2"]).startswith("NNODES=2 NODE_RANK=1 MASTER_ADDR=10.0.0.1 ")
    out = subprocess.run(["sh", "-c", runner.command(job, ["node2", "node3"]).replace("torchrun train.py", 'echo "$WORLD_SIZE"')],
                         env={"NPROC_PER_NODE": "8", "PATH": os.environ["PATH"]}, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "16"


def test_a_restart_resumes_a_trainer_from_its_newest_complete_checkpoint(cluster, tmp_path):
    out = tmp_path / "out"
    for step, files in ((10, ["model.safetensors", "optimizer.pt", "trainer_state.json"]), (20, ["model.safetensors"])):
        (out / ("checkpoint-%d" % step)).mkdir(parents=True)
        for name in files:
            (out / ("checkpoint-%d" % step) / name).write_text("x")
    [node] = cluster("llamafactory-cli train lf.yaml", resume={"dir": str(out), "world": 1, "argument": True})
    from trainops_job import runner
    job = records.Job(node.conf)
    assert runner.command(job, job.nodes) == "llamafactory-cli train lf.yaml resume_from_checkpoint=%s/checkpoint-10" % out


def test_gpu_memory_is_free_once_no_gpu_lists_a_process_of_the_run(tmp_path, monkeypatch):
    """Before a restart: a fake nvidia-smi lists the compute processes' pids (from a file): a process of the run
    (TRAINOPS_RUN_ID) or a pid that has ended holds memory; another program's process does not."""
    from trainops_job import runner
    listed = tmp_path / "pids"
    (tmp_path / "nvidia-smi").write_text("#!/bin/sh\ncat %s\n" % listed)
    (tmp_path / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", "%s:%s" % (tmp_path, os.environ["PATH"]))
    rank = subprocess.Popen(["sleep", "60"], env=dict(os.environ, TRAINOPS_RUN_ID="run-gpu"))
    try:
        listed.write_text("%d\n%d\n" % (os.getpid(), rank.pid))
        assert not runner.gpu_free("run-gpu", seconds=0.2, sleep=lambda s: None)
        assert runner.gpu_free("run-other", seconds=0.2, sleep=lambda s: None)
    finally:
        rank.kill()
        rank.wait()
    # Ended, but still listed (its memory not freed yet): held; then gone from the list.
    assert not runner.gpu_free("run-other", seconds=0.2, sleep=lambda s: None)
    listed.write_text("%d\n" % os.getpid())
    assert runner.gpu_free("run-gpu", seconds=0.2, sleep=lambda s: None)


def test_a_sampler_that_fails_stops_sampling_not_the_job(cluster):
    """Watching how the job runs never ends it: the sampler's error ends the sampling of that attempt, said in the log."""
    from trainops_job import runner

    class Broken:
        def sample(self):
            raise ValueError("a /proc row it could not read")

    [node] = cluster("exec sleep 60")
    part = runner.Runner(records.Job(node.conf))
    part.sampler = Broken()
    part._sample(0)  # pylint: disable=protected-access
    assert part.sampler is None
    assert node.file("log").read_text().splitlines()[-1] == (
        "trainops-job: perf sampling stopped on node1: ValueError: a /proc row it could not read")


def test_what_the_ranks_nccl_said_reaches_the_progress_record(cluster):
    """The ranks' NCCL_DEBUG=INFO lines (the H200 machine's log made a 2-node run: tests/fixtures/nccl_tests), summed up
    by tee into the progress record that the node's report carries; with them the node's active RDMA ports (none here)."""
    log = Path(__file__).resolve().parents[2] / "fixtures" / "nccl_tests" / "socket_with_ib_debug.txt"
    [node] = cluster("sed -n 's/^\\[1,[01]\\]<stdout>://p' %s; echo \"NCCL_DEBUG=$NCCL_DEBUG\"; echo 'step 1 loss 0.5'; exec sleep 30" % log,
                     nccl_debug="INFO")
    assert node.run("start").returncode == 0
    nccl = wait_for(lambda: (node.report()["progress"] or {}).get("nccl"), 20, "NCCL's summary")
    assert nccl["networks"] == ["Socket"] and nccl["ib_no_device"] is True and "NET/Socket" in nccl["transports"], nccl
    report = node.report()
    assert report["progress"]["step"] == 1 and report["rdma_ports"] == [] and "NCCL_DEBUG=INFO" in report["log"]


def test_the_report_lists_the_nodes_active_rdma_ports(tmp_path):
    from trainops_job import perf
    for device, state in (("mlx5_0", "4: ACTIVE"), ("mlx5_1", "1: DOWN")):
        port = tmp_path / "class" / "infiniband" / device / "ports" / "1"
        port.mkdir(parents=True)
        for name, text in (("state", state), ("phys_state", "5: LinkUp"), ("rate", "400 Gb/sec (4X NDR)"), ("link_layer", "InfiniBand")):
            (port / name).write_text(text + "\n")
    assert perf.rdma_ports(str(tmp_path)) == [{"device": "mlx5_0", "port": 1, "link_layer": "InfiniBand", "rate_gbps": 400.0}]
    assert perf.rdma_ports(str(tmp_path / "none")) == []


# torchrun's agent as a node's peer went away (torch 1.13 on the train cluster): its rank fails, the agent logs it, then
# lingers at its exit barrier (300 s) while no part of the node ends.
LINGERING = ('echo "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 0 (pid: 4242) of binary: '
             '/usr/bin/python3"; exec sleep 300')


def test_a_launcher_that_lingers_after_its_rank_failed_ends_the_part_failed_at_once(cluster):
    [node] = cluster(LINGERING, fail_grace=2)
    start = time.monotonic()
    assert node.run("start").returncode == 0
    record = wait_for(node.exit_record, 150, "the part's exit record")
    # Failed with the rank's status once the grace a launcher has to end on its own is over, not after its 300 s: the
    # bound is half of them (a bound of 15 s failed on the suite's loaded machine at 8936e68: 17 s).
    assert record["rc"] == 1 and record["stopped_by"] is None and time.monotonic() - start < 150, record
    assert node.report()["state"] == "failed: exited 1"
    assert "its launcher did not end within 2 s (train_fail_grace): the part ends, failed" in node.file("log").read_text()


def test_a_launcher_that_restarts_its_ranks_itself_is_left_to_it(cluster):
    """train_max_restarts: torchrun restarts its ranks after the failure it logged; its part runs on."""
    [own] = cluster(LINGERING, fail_grace=1, max_restarts=2)
    assert own.run("start").returncode == 0
    time.sleep(5)
    assert own.exit_record() is None and own.report()["state"] == "running"
    assert own.run("stopping").returncode == 0 and own.run("stop").returncode == 0


def test_a_running_part_beats_while_it_runs(cluster):
    [node] = cluster("exec sleep 60")
    assert node.run("start").returncode == 0
    first = wait_for(lambda: json.loads(node.file("alive").read_text()) if node.file("alive").exists() else None, 10, "a heartbeat")
    assert (first["node"], first["attempt"], first["run_id"]) == ("node1", 0, node.conf["run_id"])
    later = wait_for(lambda: json.loads(node.file("alive").read_text())["beat"] > first["beat"] or None, 12, "the next beat")
    assert later
    assert node.run("stopping").returncode == 0 and node.run("stop").returncode == 0


def test_a_restart_on_fewer_nodes_keeps_the_global_batch_by_the_accumulation(cluster):
    """train_keep_global_batch: 3 nodes at accumulation 4, restarted on 2 of them: 6 (4 x 3 / 2), in the command's
    environment and, for a command that takes LLaMA-Factory's key=value arguments, as its gradient_accumulation_steps."""
    # The command's words after it are its arguments (LLaMA-Factory's key=value): printed.
    command = 'f() { echo "attempt $TRAINOPS_ATTEMPT accumulation $TRAINOPS_GRAD_ACCUM on $NNODES nodes:$*"; exec sleep 60; }; f'
    node = cluster(command, nodes=3, batch={"keep": True, "accumulation": 4, "overrides": True})[0]
    assert node.run("start").returncode == 0
    wait_for(lambda: any(line.startswith("attempt 0 accumulation 4") for line in node.report()["log"]), 10, "the first attempt")
    control = Path(node.conf["job_dir"]) / records.CONTROL_REQUEST
    control.write_text(json.dumps({"run_id": node.conf["run_id"], "action": "restart", "id": 1, "nodes": ["node1", "node2"],
                                   "why": "node3 lost"}))
    wait_for(lambda: any(line.startswith("attempt 1") for line in node.report()["log"]), 15, "the restart")
    assert "attempt 1 accumulation 6 on 2 nodes:gradient_accumulation_steps=6" in node.report()["log"]
    assert node.run("stopping").returncode == 0 and node.run("stop").returncode == 0


def test_the_accumulation_of_an_attempt():
    from trainops_job import batch
    kept = {"keep": True, "accumulation": 4}
    assert batch.accumulation(kept, 3, 3) == (4, 0.0) and batch.accumulation(kept, 3, 2) == (6, 0.0)
    # 8 x 3 / 2 = 12 exactly; 8 x 4 / 3 = 10.67: 11, the global batch 3 % larger (11 x 3 against 8 x 4).
    assert batch.accumulation({"keep": True, "accumulation": 8}, 4, 3) == (11, 0.031)
    assert batch.accumulation({"keep": True, "accumulation": 1}, 3, 2) == (2, 0.333)
    assert batch.accumulation({"keep": False, "accumulation": 4}, 3, 2) == (4, 0.0) and batch.accumulation({}, 3, 1) == (1, 0.0)


def test_the_first_nodes_report_tells_the_saves_and_the_free_space(cluster):
    [node] = cluster("true")
    folder = Path(node.conf["checkpoint_dir"])
    folder.mkdir(parents=True, exist_ok=True)
    for step in (5, 10):
        (folder / ("step-%06d.pt" % step)).write_bytes(b"x" * 64)
    found = node.report()["checkpoints"]
    assert found["dir"] == str(folder) and [(s["name"], s["step"], s["bytes"]) for s in found["saves"]] == [
        ("step-000005.pt", 5, 64), ("step-000010.pt", 10, 64)]
    assert found["free"] > 0


def test_a_job_in_the_image_gets_its_stage_folder_read_only_at_its_own_path(cluster, tmp_path):
    """trainops-run mounts shared storage alone: the stage's folder on the node's disk goes into the attempt's container
    at the path TRAINOPS_STAGE_DIR names (read-only: the copies checked against the manifest), before train_run_opts."""
    stage = {"paths": ["/mnt/shared/data"], "dir": str(tmp_path / "stage"), "keep": False, "offline": False, "overrides": {}}
    [node] = cluster("python3 train.py", in_image=True, stage=stage, run_opts=["--volume", "/opt/code:/opt/code:ro"])
    from trainops_job import runner
    job = records.Job(node.conf)
    options = runner.engine_options(job, 2, job.nodes)
    assert options[:2] == ["--name", "%s-node1-2" % job.run_id]
    assert options[-4:] == ["--volume", "%s:%s:ro" % (stage["dir"], stage["dir"]), "--volume", "/opt/code:/opt/code:ro"]
    assert ["--env", "TRAINOPS_STAGE_DIR"] == options[options.index("TRAINOPS_STAGE_DIR") - 1:options.index("TRAINOPS_STAGE_DIR") + 1]
    # Without a stage: no folder to mount, and the first attempt's container has the run's name.
    [plain] = cluster("python3 train.py", in_image=True)
    options = runner.engine_options(records.Job(plain.conf), 0, [plain.name])
    assert "--volume" not in options and options[1] == "%s-node1" % plain.conf["run_id"] and "TRAINOPS_STAGE_DIR" not in options


def test_a_detached_start_waits_for_a_slow_runner_and_fails_at_once_for_one_that_ended(cluster, monkeypatch):
    """lifecycle.start (no systemd): a runner that writes its pid after 6 s (a loaded node's import: 5 s failed a start
    in the suite) has started; one that ends without writing it fails the start at once, not at the bound; one that
    wrote its pid and ended with its command has started."""
    from trainops_job import lifecycle, runner
    [node] = cluster("true")
    monkeypatch.setattr(records, "RUN_DIR", str(node.run_dir))
    job = records.Job(node.conf)
    pid_file = job.run_path("pid")
    for script, expected, within in (
            ("sleep 6; echo $$ > %s; exec bash -c 'sleep 30; true' trainops run %s" % (pid_file, job.name), 0, 20),
            ("exit 1", 1, 3),
            ("echo $$ > %s" % pid_file, 0, 3)):
        Path(pid_file).unlink(missing_ok=True)
        monkeypatch.setattr(runner, "program", lambda *words, script=script: ["bash", "-c", script])
        began = time.monotonic()
        assert (lifecycle.start(job), time.monotonic() - began < within) == (expected, True), script
        subprocess.run(["pkill", "-f", "sleep 30; true"], check=False)
