# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The job's files, the states of a node's part and the reasons it was stopped are defined once, in the node program's
records.py: no other code of the collection (Python's strings, Jinja's expressions in tasks and templates) spells one
out. The controller learns them from each node's report; a new file or stop reason touches one place."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from trainops_job import records

ROOT = Path(__file__).resolve().parents[3]
HOME = ROOT / "roles" / "train" / "files" / "trainops_job" / "records.py"
JINJA = re.compile(r"{{(.*?)}}|{%(.*?)%}", re.S)
CONDITIONS = re.compile(r"^\s*-?\s*(?:when|that|failed_when|changed_when|until):\s*(.+)$", re.M)
QUOTED = re.compile(r"'([^']*)'|\"([^\"]*)\"")


def defined():
    """What records.py defines: the folder's file names, the node files' suffixes, the stop reasons and the states."""
    names = [records.JOB_RECORD, records.SUPERVISOR_VIEW, records.STALL_REQUEST, records.CONTROL_REQUEST, records.SUPERVISOR_LOG,
             records.FLIGHT_RECORDER]
    suffixes = [pattern.replace("%s", "") for pattern in records.NODE_FILES.values()]
    states = [records.NOT_STARTED, records.LOST, records.state({"rc": 0}, False), records.state({"rc": 1, "stopped_by": records.STALL_STOP}, False)]
    reasons = [records.USER_STOP, records.STALL_STOP, records.LEFT_OUT, records.NOT_NEEDED, records.SCALED]
    return names + reasons + states + [records.STANDBY, records.SCALE_STANDBY], suffixes


def literals():
    """(file, string) of every string literal of the collection's code, records.py apart: Python's (documentation
    apart), and those in the Jinja expressions of roles, templates and playbooks."""
    for path in sorted(list((ROOT / "plugins").rglob("*.py")) + list((ROOT / "roles").rglob("*.py"))):
        if path.resolve() == HOME.resolve() or path.is_symlink():
            continue
        tree = ast.parse(path.read_text())
        docstrings = {id(node.body[0].value) for node in ast.walk(tree) if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef))
                      and node.body and isinstance(node.body[0], ast.Expr)}
        # A module's documentation: its examples write files of their own.
        docstrings |= {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Assign)
                       and any(getattr(t, "id", "") in ("DOCUMENTATION", "EXAMPLES", "RETURN") for t in node.targets)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                yield path, node.value
    for path in sorted(list((ROOT / "roles").rglob("*.yml")) + list((ROOT / "roles").rglob("*.j2")) + list((ROOT / "playbooks").rglob("*.yml"))):
        text = path.read_text()
        for found in [m.group(1) or m.group(2) for m in JINJA.finditer(text)] + [m.group(1) for m in CONDITIONS.finditer(text)]:
            for quoted in QUOTED.finditer(found):
                yield path, quoted.group(1) if quoted.group(1) is not None else quoted.group(2)


def spelled(words, suffixes, found):
    """Whether a literal spells one out: a name, reason or state as the literal itself, a suffix behind a node's name."""
    return found in words or any(re.search(r"(?:^|%s|[}>])" + re.escape(suffix) + r"(?![\w-])", found) for suffix in suffixes)


def test_each_file_state_and_stop_reason_is_defined_in_records_alone():
    words, suffixes = defined()
    assert len(words) + len(suffixes) == 23 and all(words + suffixes)
    assert [(str(path.relative_to(ROOT)), text) for path, text in literals() if spelled(words, suffixes, text)] == []


def test_a_second_definition_is_found():
    words, suffixes = defined()
    assert spelled(words, suffixes, "train_action=stop") and spelled(words, suffixes, "%s.exit")
    assert spelled(words, suffixes, "job.json") and spelled(words, suffixes, ".progress.json")
    assert not spelled(words, suffixes, "sys.exit") and not spelled(words, suffixes, "stop it (-e train_action=stop)")
