# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The report action plugin: its file logic on tmp_path, and run() as a task would call it."""

from __future__ import annotations

import os
import stat
from types import SimpleNamespace

import pytest

from ansible.errors import AnsibleActionFail
from ansible_collections.trainops.cluster.plugins.action import report


def mode_of(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_writes_new_file_and_parents(tmp_path):
    dest = tmp_path / "reports" / "verify" / "a.log"
    old_umask = os.umask(0o077)
    try:
        result = report.ensure(str(dest), "héllo\n", 0o644)
    finally:
        os.umask(old_umask)
    assert result == {"changed": True, "dest": str(dest), "size": len("héllo\n".encode())}
    assert dest.read_text(encoding="utf-8") == "héllo\n"
    assert mode_of(dest) == 0o644
    # The umask does not narrow the directories either.
    assert mode_of(dest.parent) == mode_of(dest.parent.parent) == 0o755
    assert [p.name for p in dest.parent.iterdir()] == ["a.log"]


def test_second_call_changes_nothing(tmp_path):
    dest = tmp_path / "r.json"
    report.ensure(str(dest), "{}\n", 0o644)
    before = os.stat(dest)
    assert report.ensure(str(dest), "{}\n", 0o644)["changed"] is False
    assert os.stat(dest).st_ino == before.st_ino and os.stat(dest).st_mtime_ns == before.st_mtime_ns


def test_new_content_replaces_the_file(tmp_path):
    dest = tmp_path / "r.json"
    report.ensure(str(dest), "{}\n", 0o644)
    assert report.ensure(str(dest), '{"ok": true}\n', 0o644)["changed"] is True
    assert dest.read_text() == '{"ok": true}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


def test_mode_change_alone_is_a_change(tmp_path):
    dest = tmp_path / "r.json"
    report.ensure(str(dest), "{}\n", 0o644)
    inode = os.stat(dest).st_ino
    assert report.pending(str(dest), b"{}\n", 0o600) == {"write": False, "chmod": True}
    assert report.ensure(str(dest), "{}\n", 0o600)["changed"] is True
    assert mode_of(dest) == 0o600 and os.stat(dest).st_ino == inode
    assert report.ensure(str(dest), "{}\n", 0o600)["changed"] is False


def test_check_mode_writes_nothing(tmp_path):
    dest = tmp_path / "new" / "r.json"
    assert report.ensure(str(dest), "{}\n", 0o644, check_mode=True)["changed"] is True
    assert not dest.parent.exists()
    dest.parent.mkdir()
    dest.write_text("old\n")
    dest.chmod(0o600)
    assert report.ensure(str(dest), "{}\n", 0o644, check_mode=True)["changed"] is True
    assert dest.read_text() == "old\n" and mode_of(dest) == 0o600
    assert report.ensure(str(dest), "old\n", 0o600, check_mode=True)["changed"] is False


def test_parse_mode():
    assert report.parse_mode("0644") == report.parse_mode("644") == report.parse_mode(0o644) == 0o644
    for bad in ("u=rw", "0999", "17777"):
        with pytest.raises(ValueError):
            report.parse_mode(bad)


def run_action(tmp_path, args, check_mode=False):
    """ActionModule.run() with the few task and connection attributes ActionBase reads."""
    task = SimpleNamespace(args=args, check_mode=check_mode, async_val=0, action="trainops.cluster.report")
    connection = SimpleNamespace(_shell=SimpleNamespace(tmpdir=None))
    action = report.ActionModule(task, connection, play_context=None, loader=None, templar=None)
    return action.run(task_vars={})


def test_run(tmp_path):
    dest = tmp_path / "reports" / "doctor.json"
    result = run_action(tmp_path, {"dest": str(dest), "content": "{}\n"}, check_mode=True)
    assert result["changed"] is True and not dest.exists()
    result = run_action(tmp_path, {"dest": str(dest), "content": "{}\n"})
    assert result == {"changed": True, "dest": str(dest), "size": 3} and mode_of(dest) == 0o644
    assert run_action(tmp_path, {"dest": str(dest), "content": "{}\n", "mode": "0644"})["changed"] is False


def test_run_rejects_bad_arguments(tmp_path):
    with pytest.raises(AnsibleActionFail, match="missing required arguments: content"):
        run_action(tmp_path, {"dest": str(tmp_path / "r")})
    with pytest.raises(AnsibleActionFail, match="octal"):
        run_action(tmp_path, {"dest": str(tmp_path / "r"), "content": "", "mode": "u=rw"})
    with pytest.raises(AnsibleActionFail, match="directory"):
        run_action(tmp_path, {"dest": str(tmp_path), "content": ""})
