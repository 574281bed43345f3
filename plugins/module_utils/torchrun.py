# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The torchrun rungs: read a node's torchrun output, and its launch.env.

The rung's programs (roles/torchrun/files) print JSON lines prefixed "TRAINOPS "; torchrun, Python and the
launcher add their own lines. Every line may carry a prefix (torchrun --tee's "[default0]:", srun --label's
" 0: ", mpirun --tag-output's "[1,0]<stdout>:"), so records are found anywhere in a line. torchrun --tee copies a
rank's log file line by line as it grows: a line read before its newline was written is copied without one, and the
next copy (the newline, or another rank's line) is glued behind it; each record is therefore decoded on its own and
what follows it in the line is not part of it.

Node side: shipped to the nodes inside the module that imports it (torchrun_run); the controller reads launch.env and
job logs with it too (filters jobs and launch, plugin_utils/jobs.py). plugin_utils/torchrun_verdict.py judges a launch
across all nodes.
"""

from __future__ import annotations

import base64

import json
import re

_RECORD_MARK = "TRAINOPS {"
_DECODER = json.JSONDecoder()
_PREFIX_RE = re.compile(r'^(?:\[[^\]]*\]:|\[[^\]]*\]<\w+>:|\s*\d+: )')
# The master's store gave up on the agents that never came: torch 1.13 (RuntimeError) and 2.x (DistStoreError).
_CLIENTS_RE = re.compile(r'Timed out after (\d+) seconds waiting for clients\. (\d+)/(\d+) clients joined')
_ERROR_RE = re.compile(r'^(?:[\w.]+\.)?(?:\w*Error|\w*Exception|SystemExit)\b:? ?.*$')
_FAILURE_START_RE = re.compile(r'^\[(\d+)\]:\s*$')
_FAILURE_FIELD_RE = re.compile(r'^\s*(time|host|rank|exitcode|traceback)\s*:\s*(.*?)\s*$')
_SIGNAL_RE = re.compile(r'Signal (\d+) \((SIG\w+)\)')
_MAX_ERRORS = 5


def _records(line):
    """The JSON records in one output line, however torchrun's tail glued copies together."""
    found, start = [], line.find(_RECORD_MARK)
    while start >= 0:
        try:
            record, end = _DECODER.raw_decode(line, start + len(_RECORD_MARK) - 1)
        except ValueError:
            record, end = None, start + len(_RECORD_MARK)
        if isinstance(record, dict):
            found.append(record)
        start = line.find(_RECORD_MARK, end)
    return found


def _strip(line):
    return _PREFIX_RE.sub("", line, count=1)


def strip_prefixes(text):
    """The output without the per-line prefixes of torchrun --tee, srun --label and mpirun --tag-output."""
    return "\n".join(_strip(line) for line in (text or "").splitlines())


def parse_output(text):
    """One node's torchrun output: {records, failures, errors, clients}.

    records: the programs' JSON records in order (a "node" key is added by the caller, not here).
    failures: torchrun's "Root Cause" and "Failures" entries, [{rank, local_rank, host, exitcode, signal, time}].
    errors: the first distinct exception lines. clients: (joined, expected) when the master timed out waiting.
    """
    parsed = {"records": [], "failures": [], "errors": [], "clients": None}
    failure = None
    for raw in (text or "").splitlines():
        if _RECORD_MARK in raw:
            parsed["records"] += _records(raw)
            continue
        line = _strip(raw).strip()
        # "[1]:" heads a failure entry, and looks like torchrun's own "[default1]:" prefix.
        if _FAILURE_START_RE.match(raw.strip()) or _FAILURE_START_RE.match(line):
            failure = {"rank": None, "local_rank": None, "host": None, "exitcode": None, "signal": None, "time": None}
            parsed["failures"].append(failure)
            continue
        field = _FAILURE_FIELD_RE.match(line)
        if failure is not None and field:
            _failure_field(failure, field.group(1), field.group(2))
            continue
        if line.startswith("=" * 20):
            failure = None
        clients = _CLIENTS_RE.search(line)
        if clients:
            parsed["clients"] = (int(clients.group(2)), int(clients.group(3)))
        if _ERROR_RE.match(line) and line not in parsed["errors"] and len(parsed["errors"]) < _MAX_ERRORS:
            parsed["errors"].append(line)
    return parsed


def _failure_field(failure, key, value):
    if key == "rank":
        match = re.match(r'(\d+)(?: \(local_rank: (\d+)\))?', value)
        if match:
            failure["rank"] = int(match.group(1))
            failure["local_rank"] = int(match.group(2)) if match.group(2) else None
    elif key == "exitcode":
        match = re.match(r'(-?\d+)', value)
        failure["exitcode"] = int(match.group(1)) if match else None
    elif key == "traceback":
        match = _SIGNAL_RE.search(value)
        if match:
            failure["signal"] = "%s (%s)" % (match.group(1), match.group(2))
    else:
        failure[key] = value


def read_env_b64(content):
    """read_env_file of a launch.env as M(ansible.builtin.slurp) returns it (base64)."""
    return read_env_file(base64.b64decode(content).decode("utf-8", "replace"))


def read_env_file(text):
    """KEY=VALUE lines of a launch.env (comments and blank lines skipped, no shell expansion)."""
    env = {}
    for line in (text or "").splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, dummy, value = line.partition("=")
            env[key.strip()] = value.strip().strip('"\'')
    return env
