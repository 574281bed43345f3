# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The torchrun rungs: read a node's torchrun output, and its launch.env.

The rung's programs (roles/torchrun/files) print JSON lines prefixed "TRAINOPS "; torchrun, Python and the
launcher add their own lines. Every line may carry a prefix (torchrun --tee's "[default0]:", torch's own "[rank3]:",
srun --label's " 0: ", mpirun --tag-output's "[1,0]<stdout>:"), so records are found anywhere in a line. torchrun --tee
copies a rank's log file line by line as it grows: a line read before its newline was written is copied without one,
and the next copy (the newline, or another rank's line) is glued behind it; each record is therefore decoded on its
own and what follows it in the line is not part of it. A launcher that relays the node's output may label every line
outside those prefixes (pdsh's "node2: ", Ray's and vLLM's "(RayWorkerWrapper pid=1234, ip=10.0.0.2) "):
parse_output takes the label off before it reads the line.

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
# "[rank3]:" is torch's own (2.2 on): its excepthook labels each line of a rank's traceback (pytorch PR #118190,
# distributed_c10d.py _distributed_excepthook), and TORCH_LOGS lines carry it too (torch/_logging/_internal.py).
_PREFIX_RE = re.compile(r'^(?:\[[^\]]*\]:|\[[^\]]*\]<\w+>:|\s*\d+: )')
# Launchers that relay a node's output label each line outside the prefixes above; "host" is the node, where named.
# - Ray's driver prints its workers' lines behind "(RayTrainWorker pid=8, ip=10.96.0.12) ", "ip=" only for another
#   node, in colour ("\x1b[36m(...)\x1b[0m "): ray python/ray/_private/worker.py print_worker_logs. vLLM's worker
#   processes label their own output "(VllmWorker rank=1 pid=12231) ", "(VllmWorkerProcess pid=9) ",
#   "(EngineCore_0 pid=5) ", in colour unless NO_COLOR: vllm/utils decorate_logs and _add_prefix (v0:
#   vllm/executor/multiproc_worker_utils.py).
_PROCESS_LABEL_RE = re.compile(r'^(?:\x1b\[[\d;]*m)*\([^()]*\bpid=\d+(?:, ip=(?P<host>[^)\s]+))?\)(?:\x1b\[[\d;]*m)* ')
# - pdsh, DeepSpeed's multi-node launcher (deepspeed --hostfile: deepspeed/launcher/multinode_runner.py PDSHRunner),
#   writes every line of a node's output as "node2: " + line (pdsh src/pdsh/dsh.c: out("%S: %s", host, buf)). srun
#   --label's "0: " is no host: _PREFIX_RE takes it.
# Others leave torchrun's lines as they are: accelerate launch runs torch.distributed.run in the same process
# (accelerate/commands/launch.py multi_gpu_launcher: distrib_run.run(args)); llamafactory-cli starts torchrun with
# subprocess.run and its own stdout and stderr (llamafactory/cli.py); sglang labels log records ("[... TP0] "), not
# each line of a traceback.
_PDSH_LABEL_RE = re.compile(r'^(?!\d+: )(?P<host>[\w.-]+): ')
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


def _labels(lines):
    """The launcher labels these lines may carry: pdsh's "host: " only where most lines carry one, as pdsh's output
    does, since an ordinary "Warning: ..." or "loss: 0.3" reads the same."""
    filled = [line for line in lines if line.strip()]
    if 2 * sum(1 for line in filled if _PDSH_LABEL_RE.match(line)) > len(filled):
        return (_PROCESS_LABEL_RE, _PDSH_LABEL_RE)
    return (_PROCESS_LABEL_RE,)


def _unlabel(line, labels):
    """(the node the launcher's label names, or None; the line without the label)."""
    # "RuntimeError: ..." reads like pdsh's "host: ", but is a line of the node's own, not labelled by pdsh.
    if _ERROR_RE.match(line):
        return None, line
    for label in labels:
        match = label.match(line)
        if match:
            return match.group("host"), line[match.end():]
    return None, line


def strip_prefixes(text):
    """The output without the per-line prefixes of torchrun --tee, srun --label and mpirun --tag-output."""
    return "\n".join(_strip(line) for line in (text or "").splitlines())


def parse_output(text):
    """One node's torchrun output: {records, failures, errors, clients}.

    records: the programs' JSON records in order (a "node" key is added by the caller, not here).
    failures: torchrun's "Root Cause" and "Failures" entries, [{rank, local_rank, host, exitcode, signal, time}]: host
    is the summary's, else (torch before 1.10 named none) the node that the launcher's label names, if any.
    errors: the first distinct exception lines. clients: (joined, expected) when the master timed out waiting.
    """
    parsed = {"records": [], "failures": [], "errors": [], "clients": None}
    failure = None
    lines = (text or "").splitlines()
    labels = _labels(lines)
    for labelled in lines:
        host, raw = _unlabel(labelled, labels)
        if _RECORD_MARK in raw:
            parsed["records"] += _records(raw)
            continue
        line = _strip(raw).strip()
        # "[1]:" heads a failure entry, and looks like torchrun's own "[default1]:" prefix.
        if _FAILURE_START_RE.match(raw.strip()) or _FAILURE_START_RE.match(line):
            failure = {"rank": None, "local_rank": None, "host": host, "exitcode": None, "signal": None, "time": None}
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
