# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""storage_throughput end to end: one process writes the test file, three read it at one start time, one removes it."""

from __future__ import annotations

import json
import os
import time

from ansible_collections.trainops.cluster.plugins.modules import storage_throughput
import helpers.modules


def run_module(capsys, **args):
    return helpers.modules.run_module(storage_throughput, capsys, **args)


def test_every_node_reads_at_the_common_start_and_the_file_is_removed(tmp_path, capsys):
    path = str(tmp_path / ".trainops-read-test")
    written = run_module(capsys, path=path, step="write", size_mib=8)
    assert written["changed"] is False and written["bytes"] == 8 * 2 ** 20 and not written["timed_out"]

    start_at = time.time() + 1.5
    procs = {name: helpers.modules.start_module(storage_throughput, tmp_path / name, path=path, start_at=start_at, node=name, min_mbps=1)
             for name in ("node1", "node2", "node3")}
    out = {}
    for name, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=30)
        assert proc.returncode == 0, stderr
        out[name] = json.loads(stdout)
    for name, result in out.items():
        assert result["changed"] is False and result["bytes"] == 8 * 2 ** 20 and result["cache_dropped"]
        assert result["warning"] is None and result["late"] < 1
        assert result["summary"].startswith("%s: %s MB/s reading 8 MiB of %s in " % (name, result["mbps"], path))
        assert round(start_at, 3) - 0.001 <= result["started"] < start_at + 1  # nobody began before the common start (ms)
    # The reads overlap: each began before the last one ended.
    assert max(r["started"] for r in out.values()) <= max(r["ended"] for r in out.values())

    assert run_module(capsys, path=path, step="remove")["removed"] is True
    assert not os.path.exists(path)
    assert run_module(capsys, path=path, step="remove")["removed"] is False


def test_an_unreachable_threshold_warns_naming_the_node(tmp_path, capsys):
    path = str(tmp_path / "probe")
    run_module(capsys, path=path, step="write", size_mib=1)
    result = run_module(capsys, path=path, node="node2", min_mbps=1e9)
    assert "failed" not in result
    assert result["warning"].startswith("node2: shared storage %s read at %s MB/s with every node reading at once, below 1000000000 MB/s."
                                        % (tmp_path, result["mbps"]))


def test_a_missing_file_fails_naming_the_path(tmp_path, capsys):
    result = run_module(capsys, path=str(tmp_path / "absent"), node="node3")
    assert result["failed"] and result["msg"] == "cannot read the test file %s: No such file or directory" % (tmp_path / "absent")


def test_check_mode_measures_too(tmp_path, capsys):
    """A measurement is no change: check mode runs it the same."""
    path = str(tmp_path / "probe")
    assert run_module(capsys, path=path, step="write", size_mib=1, _ansible_check_mode=True)["bytes"] == 2 ** 20
    assert run_module(capsys, path=path, _ansible_check_mode=True)["bytes"] == 2 ** 20
