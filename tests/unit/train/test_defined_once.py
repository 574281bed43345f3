# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The job's files, the states of a node's part and the reasons it was stopped are defined once, in the node program's
records.py (the stop reasons the controller reads too, in the linked _job_events.py): no other code of the collection
(Python's strings, Jinja's expressions in tasks and templates) spells one out. The controller learns them from each
node's report; a new file or stop reason touches one place. The supervisor's events and the states of its view are
written and read through _job_events' names, and the controller's verdicts through jobs.Verdict."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from ansible_collections.trainops.cluster.plugins.plugin_utils.jobs import Verdict
from trainops_job import records
from trainops_job._job_events import Event, Watch

ROOT = Path(__file__).resolve().parents[3]
HOMES = {ROOT / "roles" / "train" / "files" / "trainops_job" / "records.py", ROOT / "plugins" / "module_utils" / "_job_events.py"}
JINJA = re.compile(r"{{(.*?)}}|{%(.*?)%}", re.S)
CONDITIONS = re.compile(r"^\s*-?\s*(?:when|that|failed_when|changed_when|until):\s*(.+)$", re.M)
QUOTED = re.compile(r"'([^']*)'|\"([^\"]*)\"")


def defined():
    """What records.py defines: the folder's file names, the node files' suffixes, the stop reasons and the states."""
    names = [records.JOB_RECORD, records.SUPERVISOR_VIEW, records.STALL_REQUEST, records.CONTROL_REQUEST, records.SUPERVISOR_LOG,
             records.FLIGHT_RECORDER, records.LEASE, records.CLAIM_PREFIX, records.STAGE_MANIFEST, records.UNIVERSAL_CONFIG]
    suffixes = [pattern.replace("%s", "") for pattern in records.NODE_FILES.values()]
    states = [records.NOT_STARTED, records.LOST, records.state({"rc": 0}, False), records.state({"rc": 1, "stopped_by": records.STALL_STOP}, False)]
    reasons = [records.USER_STOP, records.STALL_STOP, records.LEFT_OUT, records.NOT_NEEDED, records.SCALED]
    return names + reasons + states + [records.STANDBY, records.SCALE_STANDBY], suffixes


def literals():
    """(file, string) of every string literal of the collection's code, records.py apart: Python's (documentation
    apart), and those in the Jinja expressions of roles, templates and playbooks."""
    for path in sorted(list((ROOT / "plugins").rglob("*.py")) + list((ROOT / "roles").rglob("*.py"))):
        if path.resolve() in HOMES or path.is_symlink():
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
    assert len(words) + len(suffixes) == 29 and all(words + suffixes)
    assert [(str(path.relative_to(ROOT)), text) for path, text in literals() if spelled(words, suffixes, text)] == []


def test_a_second_definition_is_found():
    words, suffixes = defined()
    assert spelled(words, suffixes, "train_action=stop") and spelled(words, suffixes, "%s.exit")
    assert spelled(words, suffixes, "job.json") and spelled(words, suffixes, ".progress.json")
    assert not spelled(words, suffixes, "sys.exit") and not spelled(words, suffixes, "stop it (-e train_action=stop)")


def python_trees():
    """(path, its syntax tree) of every Python file of the collection, links apart (their targets are listed)."""
    for path in sorted(list((ROOT / "plugins").rglob("*.py")) + list((ROOT / "roles").rglob("*.py"))):
        if not path.is_symlink():
            yield path, ast.parse(path.read_text())


def _key_of(node):
    """"event" for X.get("event") and X["event"], else None."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and node.args:
        node = node.args[0]
    elif isinstance(node, ast.Subscript):
        node = node.slice
    else:
        return None
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def spelled_by_key(tree, words):
    """Where a word of a record's key is written or read as a literal: X.get(key) == "word", X[key] in ("word", ...),
    f(key="word"), {key: "word"}: [(key, word)]."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left] + list(node.comparators)
            keys = [_key_of(side) for side in sides]
            for side in sides:
                values = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
                found += [(key, v.value) for key in keys if key in words for v in values
                          if isinstance(v, ast.Constant) and v.value in words[key]]
        elif isinstance(node, ast.keyword) and node.arg in words and isinstance(node.value, ast.Constant):
            found += [(node.arg, node.value.value)] if node.value.value in words[node.arg] else []
        elif isinstance(node, ast.Dict):
            found += [(k.value, v.value) for k, v in zip(node.keys, node.values) if isinstance(k, ast.Constant) and k.value in words
                      and isinstance(v, ast.Constant) and v.value in words[k.value]]
    return found


RECORD_WORDS = {"event": {e.value for e in Event}, "state": {w.value for w in Watch}}


def test_the_supervisors_events_and_states_are_written_and_read_through_their_names():
    assert [(str(path.relative_to(ROOT)), found) for path, tree in python_trees() for found in spelled_by_key(tree, RECORD_WORDS)] == []
    # The other records' events (the training script's, the torchrun rung's) are their own words.
    assert not RECORD_WORDS["event"] & {"step", "start", "resumed", "saved"}


def test_a_literal_event_or_state_is_found():
    tree = ast.parse('x = e.get("event") == "stall"\ny = w["state"] in ("stalled", "other")\nf(event="spare joined")\n'
                     'd = {"event": "crash loop", "step": 3}\nok = r.get("event") == "step" or f(event=Event.STALL)')
    assert sorted(spelled_by_key(tree, RECORD_WORDS)) == [("event", "crash loop"), ("event", "spare joined"), ("event", "stall"),
                                                          ("state", "stalled")]


def said(tree):
    """The string literals a module says (its text), not those it looks up: documentation, dict keys, subscripts and
    .get()'s first argument apart."""
    skip = {id(node.body[0].value) for node in ast.walk(tree) if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef))
            and node.body and isinstance(node.body[0], ast.Expr)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            skip |= {id(key) for key in node.keys if key is not None}
        elif isinstance(node, ast.Subscript):
            skip.add(id(node.slice))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and node.args:
            skip.add(id(node.args[0]))
    return [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip]


def starts_a_verdict(text):
    """Whether a literal is a verdict's first words, alone or before what follows them (": ", " (")."""
    return any(re.match(re.escape(word.value) + r"(?:$|:|\s\(|\s%)", text) for word in Verdict)


def test_the_verdicts_are_written_and_read_through_their_names():
    # jobs.py words the verdicts (the page reads them through jobs.verdict_scale); Verdict's definition is the one place.
    home = ROOT / "plugins" / "plugin_utils" / "jobs.py"
    assert [text for text in said(ast.parse(home.read_text())) if starts_a_verdict(text) and text not in {v.value for v in Verdict}] == []
    jinja = [(str(path.relative_to(ROOT)), text) for path, text in literals() if path.suffix in (".yml", ".j2") and starts_a_verdict(text)]
    assert jinja == []


def test_a_literal_verdict_is_found():
    assert starts_a_verdict("stalled") and starts_a_verdict("running on %d nodes")
    assert starts_a_verdict("failed: %s failed first") and starts_a_verdict("stopped after a stall (train_on_stall)")
    assert starts_a_verdict("queued in Slurm (%s)") and not starts_a_verdict("runningx") and not starts_a_verdict("a running job")
    tree = ast.parse('v = "partly running: %s" % n\nw = seen["running"]\nx = r.get("stopped")')
    assert [text for text in said(tree) if starts_a_verdict(text)] == ["partly running: %s"]
