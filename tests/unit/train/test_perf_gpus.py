# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A GPU job's windows (trainops_job.perf with _gpu_load): the GPU straggler named from the clocks of the job's busy
GPUs, each GPU's utilization beside the class, and the runner's sampler reading nvidia-smi at each look. The busy GPU
is the one recorded on the GPU test machine (tests/fixtures/gpu/perf/perf-window-gpus.json: an H100 at 99 %, 1361 MHz
at its power cap); a throttled one is that record with its clock lowered and a hardware reason set."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from trainops_job import gpu_reader, judge, perf

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "gpu", "perf", "perf-window-gpus.json")
RECORDED = json.load(open(FIXTURE))
LOAD = os.path.join(os.path.dirname(FIXTURE), "query-load.csv")


def node(gpus: int = 2, at: float = 100.0, places: dict | None = None, **changed) -> dict:
    """A node's window of the attempt: its GPUs as recorded (GPU 1 changed as asked), one rank a GPU."""
    busy = dict(RECORDED["gpus"][0])
    ranks = {str(i): dict(RECORDED["ranks"]["0"], places=places or {"compute": 10}) for i in range(gpus)}
    return {"at": at, "seconds": 10.0, "attempt": 0, "first": False, "ranks": ranks,
            "gpus": [dict(busy, index=i, **(changed if i == 1 else {})) for i in range(gpus)]}


def test_a_gpu_slower_than_its_peers_is_named_with_its_node_and_reasons():
    perfs = {"node1": node(), "node2": node(sm_mhz=1005.0, reasons={"hw_thermal_slowdown": 1.0, "sw_power_cap": 1.0}),
             "node3": node()}
    found = judge.bottleneck(perfs, 105.0, 0)
    assert found["kind"] == "straggler" and found["node"] == "node2" and found["gpus"] == [["node2", 1, 1005.0]], found
    assert found["text"] == (
        "straggler: node2's GPU 1 at 1005 MHz of 1980 (51 %; HW Thermal Slowdown, SW Power Cap); the job's other busy GPUs "
        "at 69 % of their maximum clock (median of 5); every data-parallel step waits for the slowest GPU: check its cooling and power "
        "(nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER); a GPU that stays slow: ask the provider to replace it")
    # 15 % below the others' median, with no reason given: still the one every step waits for.
    assert judge.gpu_straggler(dict(perfs, node2=node(sm_mhz=1150.0)), 105.0, 0)["gpus"] == [["node2", 1, 1150.0]]


def test_every_gpu_at_its_power_cap_is_no_straggler():
    # The recorded H100 under load: 1361 of 1980 MHz, SW power cap all the time: every busy GPU alike.
    perfs = {"node1": node(), "node2": node(sm_mhz=1290.0), "node3": node()}
    assert judge.gpu_straggler(perfs, 105.0, 0) is None
    # An idle GPU (the node's spare GPU, or a window of its data loading) is not compared.
    assert judge.gpu_straggler(dict(perfs, node2=node(util=3.0, sm_mhz=345.0)), 105.0, 0) is None
    # Stale windows are not judged.
    assert judge.gpu_straggler(dict(perfs, node2=node(sm_mhz=900.0)), 140.0, 0) is None


def test_one_gpu_held_back_by_the_hardware_is_named_without_peers():
    alone = {"node1": node(gpus=1, at=100.0)}
    alone["node1"]["gpus"][0]["reasons"] = {"hw_power_brake_slowdown": 0.8}
    found = judge.gpu_straggler(alone, 105.0, 0)
    assert found["node"] == "node1" and found["others"] is None and found["text"].startswith(
        "straggler: node1's GPU 0 at 1361 MHz of 1980 (69 %; HW Power Brake Slowdown); its clocks held back; every "
        "data-parallel step")
    alone["node1"]["gpus"][0]["reasons"] = {"hw_power_brake_slowdown": 0.3}  # a moment's brake, not the window's
    assert judge.gpu_straggler(alone, 105.0, 0) is None


def test_the_gpus_utilization_goes_with_the_class():
    waiting = {n: node(places={"input": 6, "compute": 4}) for n in ("node1", "node2")}
    for name, util in (("node1", 23.0), ("node2", 31.0)):
        for gpu in waiting[name]["gpus"]:
            gpu["util"] = util
    found = judge.bottleneck(waiting, 105.0, 0)
    assert found["kind"] == "input-bound" and found["text"].endswith("; GPUs busy 23-31 %"), found
    comm = {n: node(places={"collective": 9, "compute": 1}) for n in ("node1", "node2")}
    assert judge.bottleneck(comm, 105.0, 0)["text"].endswith("; GPUs busy 99 %")


def test_the_sampler_reads_the_gpus_at_each_look_while_ranks_run():
    env = dict(os.environ, TRAINOPS_RUN_ID="g1", TRAINOPS_NODE="node1", RANK="0", LOCAL_RANK="0")
    process = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(0.05)"], env=env)
    reads = []
    try:
        time.sleep(0.3)
        clock = [1000.0]
        sampler = perf.Sampler("g1", "node1", clock=lambda: clock[0], gpus=lambda: reads.append(1) or [dict(RECORDED["gpus"][0], index=0, util=90, reasons=[])])
        for dummy in range(3):
            sampler.sample()
            clock[0] += 1.0
        window = sampler.window()
        idle = perf.Sampler("nobody", "node1", gpus=lambda: reads.append(2) or [])
        idle.sample()
    finally:
        process.kill()
        process.wait()
    # A look a second, and none on a node where no rank of the run runs (nothing of the job's to read).
    assert reads == [1, 1, 1] and window["gpus"][0]["looks"] == 3 and window["gpus"][0]["util"] == 90.0, window
    assert "gpus" not in idle.window()


def fake_smi(tmp_path, knows: str) -> str:
    """An nvidia-smi that prints the recorded load line for a query naming `knows`, else its own error for the field."""
    tool = tmp_path / "nvidia-smi"
    tool.write_text('#!/bin/sh\ncase "$1" in *%s*) cat %s;; *) echo \'Field "x" is not a valid field to query.\'; exit 2;; esac\n' % (
        knows, LOAD))
    tool.chmod(0o755)
    return str(tool)


def test_the_reader_falls_back_to_the_older_field_name(tmp_path):
    reader = gpu_reader.Reader(fake_smi(tmp_path, "clocks_throttle_reasons"))
    assert reader()[0]["reasons"] == ["sw_power_cap"] and reader.reasons == "clocks_throttle_reasons.active"
    assert gpu_reader.Reader(fake_smi(tmp_path, "clocks_event_reasons"))()[0]["sm_mhz"] == 1335
    assert gpu_reader.Reader(fake_smi(tmp_path, "neither"))() is None
    assert gpu_reader.Reader(str(tmp_path / "absent"))() is None


def test_an_nvidia_smi_that_does_not_answer_is_left_behind(tmp_path):
    tool = tmp_path / "nvidia-smi"
    tool.write_text("#!/bin/sh\nexec sleep 30\n")
    tool.chmod(0o755)
    reader = gpu_reader.Reader(str(tool), timeout=0.3)
    start = time.monotonic()
    assert reader() is None and reader() is None
    # Killed at the first timeout and not asked again: the runner's loop goes on.
    assert time.monotonic() - start < 5 and reader.off == "nvidia-smi did not answer within 0.3 s"


def test_the_runners_own_record_on_the_gpu_machine():
    """The runner's perf record of two DDP ranks over NCCL on the H100 (tests/fixtures/gpu/perf/SOURCES.md): its GPU
    read at each look, its history kept; one healthy GPU names no straggler."""
    record = json.load(open(os.path.join(os.path.dirname(FIXTURE), "h100x1-job-perf.json")))
    assert record["gpus"][0]["looks"] == 10 and record["gpus"][0]["util"] == 100.0 and len(record["history"]) == 3
    assert record["history"][-1]["gpu"] == 100.0 and perf.history_point(record)["gpu"] == 100.0
    assert judge.gpu_straggler({"node1": record}, record["at"] + 1, record["attempt"]) is None
