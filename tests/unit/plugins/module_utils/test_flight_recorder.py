# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""NCCL's flight recorder: a real dump recorded on the H200 test machine (tests/fixtures/stall/h200) summarised, a dump
that would run code refused, a rank's watchdog asked for a dump through its pipe, and the collectives' times read from
the dumps of a timed job recorded on the GPU machine (tests/fixtures/gpu/perf)."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from ansible_collections.trainops.cluster.plugins.module_utils import _flight_recorder as flight

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "stall"


def test_a_real_dump_is_summarised_and_a_dump_with_code_is_refused(tmp_path):
    dump = FIXTURES / "h200" / "gpu1-rank0.flight-recorder"
    found = flight.read_dump(str(dump), now=1796307840.0)
    assert found["entries"] == 961 and found["pending"] == 2 and found["nccl"] == "2.28.9"
    assert {k: found["collective"][k] for k in ("op", "seq", "state", "group")} == {
        "op": "all_reduce", "seq": 960, "state": "scheduled", "group": "default_pg"}
    evil = tmp_path / "gpu1-rank0"
    evil.write_bytes(b"cos\nsystem\n(S'touch %s'\ntR." % str(tmp_path / "owned").encode())
    with pytest.raises(Exception, match="only plain data is read"):
        flight.read_dump(str(evil), now=0)
    assert not (tmp_path / "owned").exists()


def test_the_flight_recorder_is_asked_through_the_ranks_pipe(tmp_path):
    """A rank's watchdog, played by a thread: it reads its pipe (torch opens it read-only, non-blocking) and writes
    the recorded dump when asked. A stopped rank is not asked; a rank with no pipe is named."""
    env = {"TORCH_NCCL_DEBUG_INFO_PIPE_FILE": "%s/p-rank" % tmp_path, "TORCH_FR_DUMP_TEMP_FILE": "%s/d-rank" % tmp_path}
    pipe, dump = flight.flight_paths(os.getpid(), env, 0, proc="/proc")
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
    asked = {0: (dump, flight.mtime(dump), flight.ask_dump(pipe)),
             1: (str(tmp_path / "d-rank1"), None, "not asked: the rank is stopped"),
             2: (str(tmp_path / "d-rank2"), None, flight.ask_dump(str(tmp_path / "p-rank2.pipe")))}
    found = flight.flight_recorder(asked, wait=5)
    thread.join()
    os.close(reader)
    assert found[0]["fresh"] and found[0]["collective"]["seq"] == 960 and found[0]["file"] == "%s/d-rank0" % tmp_path
    assert found[1] == {"error": "not asked: the rank is stopped"}
    assert found[2] == {"error": "not asked: no such file or directory"}


PERF = Path(__file__).resolve().parents[3] / "fixtures" / "gpu" / "perf"


def test_each_collectives_time_and_busbw_are_read_from_a_timed_dump():
    """Recorded on the GPU machine (tests/device/bin/device-collective-timing): two DDP ranks over NCCL's sockets on one
    H100 with TORCH_NCCL_ENABLE_TIMING=1; each step all-reduces the 4096x4096 weight's gradients (64 MiB)."""
    dump = flight.load_dump(str(PERF / "h100x1-ddp-timed-rank1.flight-recorder"))
    found = flight.collective_times(dump)
    assert found["last"] == 382 and found["calls"] == 383 and found["ms"] == 15227.9
    top = found["sizes"][0]
    assert {k: top[k] for k in ("op", "bytes", "calls", "ms", "group")} == {
        "op": "all_reduce", "bytes": 16781312 * 4, "calls": 378, "ms": 39.933, "group": 2}
    # nccl-tests' busbw of the median call: 64 MiB / 39.9 ms x 2 (n - 1) / n.
    assert top["busbw_gbps"] == round(67125248 / 0.039933 / 1e9, 4)
    assert [s["op"] for s in found["sizes"]] == ["all_reduce", "all_gather", "broadcast"]
    # Only what completed after the last record read: a dump read again adds nothing.
    assert flight.collective_times(dump, after=found["last"]) == {"last": 382, "calls": 0, "ms": 0, "sizes": [], "lost": 0, "span_s": None}
    assert flight.collective_times(dump, after=300)["calls"] == 82 and found["lost"] == 0 and 15.2 < found["span_s"] < 20
    # Calls the ring buffer dropped since the last dump read are counted, and the time the rest span is given.
    wrapped = dict(dump, entries=[e for e in dump["entries"] if e["record_id"] >= 100])
    later = flight.collective_times(wrapped, after=50)
    assert later["lost"] == 49 and later["calls"] == 283 and 11 < later["span_s"] < found["span_s"], later


def test_the_jobs_busbw_is_within_ten_percent_of_the_ladders_on_the_same_hosts_and_size():
    """The issue's measure, on the recordings: the ladder's all-reduce rung (trainops_allreduce.py) on the same two
    "hosts" and size, the same day (h100x1-ladder-allreduce-two-hosts.txt), against what the job's NCCL reached."""
    ladder = [json.loads(line.split(" ", 1)[1]) for line in (PERF / "h100x1-ladder-allreduce-two-hosts.txt").read_text().splitlines()]
    rung = next(run for run in ladder if run["bytes"] == 67108864)
    job = flight.collective_times(flight.load_dump(str(PERF / "h100x1-ddp-timed-rank0.flight-recorder")))["sizes"][0]
    assert 0.9 <= job["busbw_gbps"] / rung["busbw_gbps"] <= 1.0, (job, rung)


def test_a_dump_without_timings_or_of_an_unknown_group_gives_no_busbw():
    # The H200 stall's dump: recorded without TORCH_NCCL_ENABLE_TIMING, no entry has a duration.
    untimed = flight.load_dump(str(FIXTURES / "h200" / "gpu1-rank0.flight-recorder"))
    assert flight.collective_times(untimed) == {"last": -1, "calls": 0, "ms": 0, "sizes": [], "lost": 0, "span_s": None}
    entry = {"record_id": 0, "state": "completed", "duration_ms": 2.0, "profiling_name": "nccl:all_reduce",
             "process_group": ("7", "tp"), "input_sizes": [[1024]], "input_dtypes": ["BFloat16"],
             "output_sizes": [[1024]], "output_dtypes": ["BFloat16"]}
    found = flight.collective_times({"entries": [entry], "pg_config": {}})
    assert found["sizes"] == [{"op": "all_reduce", "bytes": 2048, "calls": 1, "ms": 2.0, "total_ms": 2.0, "busbw_gbps": None, "group": None}]
    eight = flight.collective_times({"entries": [entry], "pg_config": {"7": {"ranks": "[0, 1, 2, 3, 4, 5, 6, 7]"}}})
    assert eight["sizes"][0]["busbw_gbps"] == round(2048 / 0.002 / 1e9 * 2 * 7 / 8, 4)
