# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""NCCL's flight recorder: a real dump recorded on the H200 test machine (tests/fixtures/stall/h200) summarised, a dump
that would run code refused, and a rank's watchdog asked for a dump through its pipe."""

from __future__ import annotations

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
