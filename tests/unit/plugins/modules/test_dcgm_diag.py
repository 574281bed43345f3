# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""dcgm_diag against a fake dcgmi on PATH that prints a recorded output (tests/fixtures/dcgm) with an exit status:
the argv it runs, a failed test kept with dcgmi's non-zero exit, no hostengine said as an error, no dcgmi and check
mode running nothing."""

import os
from pathlib import Path

import pytest

from ansible_collections.trainops.cluster.plugins.modules import dcgm_diag
import helpers.modules

DCGM = Path(__file__).resolve().parents[3] / "fixtures" / "dcgm"


@pytest.fixture(name="fake")
def fake_fixture(tmp_path, monkeypatch):
    """Make a fake dcgmi: prints $FAKE_OUT, exits $FAKE_RC, logs its arguments."""
    def make(output, rc=0, stderr=""):
        (tmp_path / "out").write_text(output)
        (tmp_path / "err").write_text(stderr)
        helpers.modules.script(tmp_path / "bin" / "dcgmi", 'echo "$@" >> %s/calls\ncat %s/out\ncat %s/err >&2\nexit %d' % (
            tmp_path, tmp_path, tmp_path, rc))
        monkeypatch.setenv("PATH", "%s:%s" % (tmp_path / "bin", os.environ["PATH"]))
        return tmp_path
    return make


def run(capsys, check_mode=False, **args):
    return helpers.modules.run_module(dcgm_diag, capsys, _ansible_check_mode=check_mode, **args)


def test_runs_the_level_asked_and_returns_the_tests(fake, capsys):
    where = fake((DCGM / "r3-dcgm3-pass.json").read_text())
    result = run(capsys, level=3, timeout=60)
    assert (where / "calls").read_text() == "diag -r 3 -j\n"
    assert result["cmd"][1:] == ["diag", "-r", "3", "-j"] and result["cmd"][0].endswith("/bin/dcgmi")
    assert (result["found"], result["ran"], result["rc"], result["timed_out"], result["error"]) == (True, True, 0, False, None)
    assert result["changed"] is False and len(result["tests"]) == 16


def test_a_failed_test_keeps_the_parse_with_dcgmis_non_zero_exit(fake, capsys):
    fake((DCGM / "r2-dcgm4-fail.txt").read_text(), rc=226, stderr="a line\nthe last line\n")
    result = run(capsys, level=2)
    assert result["rc"] == 226 and result["error"] is None and result["version"] == "4.2.3"
    assert [t["name"] for t in result["tests"] if t["status"] == "fail"] == ["software", "memory"]
    assert result["stderr"] == "a line\nthe last line"


def test_no_hostengine_is_an_error_said_out_loud(fake, capsys):
    fake("Error: Unable to establish a connection to the specified host: localhost\n", rc=255)
    result = run(capsys)
    assert result["error"] == "no DCGM diagnostic in dcgmi's output: Error: Unable to establish a connection to the specified host: localhost"
    assert "tests" not in result and result["rc"] == 255 and result["level"] == 1


def test_check_mode_and_a_node_without_dcgmi_run_nothing(fake, capsys, monkeypatch, tmp_path):
    where = fake((DCGM / "r2-dcgm3-pass.json").read_text())
    assert run(capsys, check_mode=True, level=2) == {"changed": False, "found": True, "ran": False, "level": 2}
    assert not (where / "calls").exists()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(os, "defpath", "")
    result = run(capsys)
    assert (result["found"], result["ran"]) == (False, False) and "rc" not in result


def test_a_dcgmi_past_its_timeout_is_stopped_and_said(tmp_path, monkeypatch, capsys):
    helpers.modules.script(tmp_path / "bin" / "dcgmi", "echo 'Successfully ran diagnostic for group.'\nexec sleep 30")
    monkeypatch.setenv("PATH", "%s:%s" % (tmp_path / "bin", os.environ["PATH"]))
    result = run(capsys, level=4, timeout=1)
    assert result["timed_out"] is True and result["error"] == "dcgmi diag -r 4 did not finish in 1 s (timeout)"
    assert "tests" not in result
