# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""This node's answer to a stall, from the node program's command line, on a running job of fake ranks: every process
of the job, each rank's stack, and where py-spy is denied (a node without CAP_SYS_PTRACE), the kernel's view of the
rank and what to grant."""

from __future__ import annotations

import json
import os
from pathlib import Path

from conftest import wait_for

# Two ranks as torchrun starts them (RANK, LOCAL_RANK, WORLD_SIZE in their environment), waiting.
RANKS = ("for r in 0 1; do RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 python3 -c 'import time; print(\"step 1\", flush=True); "
         "time.sleep(60)' & done; wait")


def test_where_py_spy_is_denied_the_answer_has_the_kernels_view_and_the_reason(cluster, tmp_path):
    [node] = cluster(RANKS)
    denied = tmp_path / "bin" / "py-spy"
    denied.parent.mkdir()
    denied.write_text("#!/bin/sh\necho 'Error: Permission denied (os error 13)' >&2\nexit 1\n")
    denied.chmod(0o755)
    node.env["PATH"] = "%s:%s" % (denied.parent, os.environ["PATH"])
    assert node.run("start").returncode == 0
    wait_for(lambda: node.report()["progress"], 20, "the ranks' first step")
    run = node.run("diagnose", "1")
    assert run.returncode == 0, run.stderr
    answer = json.loads(node.file("diagnosis").read_text())
    assert answer["stall"] == 1 and answer["run_id"] == node.conf["run_id"] and answer["unreached"] == {}
    ranks = sorted((p for p in answer["processes"] if "rank" in p), key=lambda p: p["rank"])
    assert [(p["rank"], p["local_rank"], p["world_size"]) for p in ranks] == [(0, 0, 2), (1, 1, 2)]
    for rank in ranks:
        assert rank["stack"] is None and rank["stack_error"] == "Error: Permission denied (os error 13)"
        assert rank["state"].startswith("S") and set(rank["kernel"]["threads"]) == {"S"}
    # The wrapper shell and the job's own shell are listed too, without a rank.
    assert any(p["command"].startswith("sh -c") for p in answer["processes"] if "rank" not in p)
    assert set(answer["access"]) == {"ptrace_scope", "cap_sys_ptrace", "grant"}
    assert Path(node.conf["job_dir"], "flight-recorder").is_dir()
