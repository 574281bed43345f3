# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""nft_table end to end against fake nft, systemctl and systemd-run scripts that keep the live table in a file."""

from __future__ import annotations

import os

import pytest

from ansible_collections.trainops.cluster.plugins.modules import nft_table
import helpers.modules
from helpers.modules import script

OLD = "table inet trainops {\n\tchain input {\n\t\ttcp dport 22 accept\n\t}\n}\n"
NEW = "table inet trainops {\n\tchain input {\n\t\ttcp dport 2222 accept\n\t}\n}\n"

# `nft -s list table inet trainops` prints the live file; `nft -f F` makes F live; `nft -c -f F` refuses a file
# holding "syntax error", as nft would.
FAKE_NFT = """echo "nft $*" >> "$FAKE/calls"
case "$1" in
  -s) [ -f "$FAKE/live" ] || { echo 'Error: No such file or directory' >&2; exit 1; }; cat "$FAKE/live" ;;
  -c) ! grep -q 'syntax error' "$3" || { echo "$3:1:1-6: Error: syntax error" >&2; exit 1; } ;;
  -f) cp "$2" "$FAKE/live" ;;
esac
"""


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """A node whose live table is OLD, with a rollback that systemd-run records instead of arming."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script(bindir / "nft", FAKE_NFT)
    script(bindir / "systemctl", 'echo "systemctl $*" >> "$FAKE/calls"')
    script(bindir / "systemd-run", 'echo "systemd-run $*" >> "$FAKE/calls"\nexit "${FAKE_RUN_RC:-0}"')
    monkeypatch.setenv("PATH", "%s:%s" % (bindir, os.environ.get("PATH", "/usr/bin:/bin")))
    monkeypatch.setenv("FAKE", str(tmp_path))
    (tmp_path / "live").write_text(OLD)
    (tmp_path / "firewall.nft").write_text(NEW)
    return tmp_path


def run(fake, capsys, **args):
    args = dict(dict(src=str(fake / "firewall.nft"), name="trainops", state_dir=str(fake / "state")), **args)
    return helpers.modules.run_module(nft_table, capsys, **args)


def take_calls(fake, program):
    """The calls of program since the last look (the record is emptied)."""
    path = fake / "calls"
    lines = path.read_text().splitlines() if path.exists() else []
    path.unlink(missing_ok=True)
    return [line for line in lines if line.startswith(program + " ")]


def test_load_arms_a_rollback_to_the_previous_table_that_fires_on_time(fake, capsys):
    result = run(fake, capsys, rollback_seconds=15)
    assert result["changed"] is True and result["drift"] is False
    assert result["rollback_unit"] == "trainops-nft-rollback-trainops"
    assert (fake / "live").read_text() == NEW
    rollback = fake / "state" / "nft-inet-trainops.rollback"
    assert rollback.read_text() == "table inet trainops\ndelete table inet trainops\n" + OLD
    armed = take_calls(fake, "systemd-run")
    assert len(armed) == 1
    # A timer's default accuracy (1 min) would let the rollback fire up to a minute after the caller stopped waiting.
    assert " --on-active=15s --timer-property=AccuracySec=1s " in armed[0]
    assert armed[0].endswith("nft -f %s" % rollback)


def test_an_unchanged_source_and_table_change_nothing(fake, capsys):
    run(fake, capsys, rollback_seconds=15)
    take_calls(fake, "nft")
    result = run(fake, capsys, rollback_seconds=15)
    assert (result["changed"], result["drift"], result["rollback_unit"]) == (False, False, None)
    assert take_calls(fake, "nft") == ["nft -s list table inet trainops"]


def test_a_hand_edited_live_table_is_drift_and_reloaded(fake, capsys):
    run(fake, capsys)
    (fake / "live").write_text(OLD)
    result = run(fake, capsys)
    assert (result["changed"], result["drift"], result["rollback_unit"]) == (True, True, None)
    assert (fake / "live").read_text() == NEW
    assert take_calls(fake, "systemd-run") == []


def test_check_mode_shows_the_change_and_loads_nothing(fake, capsys):
    result = run(fake, capsys, rollback_seconds=15, _ansible_check_mode=True, _ansible_diff=True)
    assert result["changed"] is True
    assert result["diff"] == {"before": OLD, "after": NEW, "before_header": "live table",
                              "after_header": str(fake / "firewall.nft")}
    assert (fake / "live").read_text() == OLD
    assert take_calls(fake, "systemd-run") == [] and not (fake / "state").exists()


def test_a_file_that_does_not_load_changes_nothing(fake, capsys):
    (fake / "firewall.nft").write_text("syntax error\n")
    result = run(fake, capsys, rollback_seconds=15)
    assert result["failed"] is True
    assert result["msg"] == "{0} does not load: {0}:1:1-6: Error: syntax error".format(fake / "firewall.nft")
    assert (fake / "live").read_text() == OLD
    assert take_calls(fake, "systemd-run") == []


def test_no_load_without_the_rollback_that_was_asked_for(fake, capsys, monkeypatch):
    monkeypatch.setenv("FAKE_RUN_RC", "1")
    result = run(fake, capsys, rollback_seconds=15)
    assert result["failed"] is True
    assert result["msg"].startswith("cannot arm the rollback, so the rules were not loaded")
    assert (fake / "live").read_text() == OLD
