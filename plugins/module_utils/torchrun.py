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
outside those prefixes (pdsh's "node2: ", Ray's and vLLM's "(RayWorkerWrapper pid=1234, ip=10.0.0.2) "), and a logger
that relays a traceback its record's fields on each of its lines (_labels.LOGGING_RE: vLLM's "ERROR 06-16 02:08:15
[multiproc_worker_utils.py:238] "): parse_output takes both off before it reads the line.

Node side: shipped to the nodes inside the module that imports it (torchrun_run) and linked into the node program
(trainops_job: its supervisor names the node that failed first before a restart); the controller reads launch.env and
job logs with it too (filters jobs and launch, plugin_utils/jobs.py). plugin_utils/torchrun_verdict.py judges a launch
across all nodes.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any

from ._labels import LOGGING_RE, PDSH_RE, POD_RE, PROCESS_RE, RANK_RE

_RECORD_MARK = "TRAINOPS {"
_DECODER = json.JSONDecoder()
# Every line may carry labels (_labels.py: torchrun's, torch's, srun's, mpirun's, launchers' and loggers' own). Others
# leave torchrun's lines as they are: accelerate launch runs torch.distributed.run in the same process
# (accelerate/commands/launch.py multi_gpu_launcher: distrib_run.run(args)); llamafactory-cli starts torchrun with
# subprocess.run and its own stdout and stderr (llamafactory/cli.py); sglang labels log records ("[... TP0] "), not
# each line of a traceback. accelerate's own test runner labels each line with its stream ("stderr: "): no node.
_STREAMS = ("stdout", "stderr")
# The master's store gave up on the agents that never came: torch 1.13 (RuntimeError) and 2.x (DistStoreError).
_CLIENTS_RE = re.compile(r'Timed out after (\d+) seconds waiting for clients\. (\d+)/(\d+) clients joined')
# An exception's own line: its name, alone or before a colon (not a log line that begins with the word).
_ERROR_RE = re.compile(r'^(?:[\w.]+\.)?(?:\w*Error|\w*Exception|SystemExit)(?::.*)?$')
# torchrun's agent waits at an exit barrier only once its workers succeeded (torch/distributed/elastic/agent/server/
# api.py, _invoke_run); where the master's store is already gone it logs this with the traceback of the store's
# error ("DistNetworkError: Connection reset by peer"): a note after a run that went well, not a failure.
_EXIT_BARRIER = "Error waiting on exit barrier"
_FAILURE_START_RE = re.compile(r'^\[(\d+)\]:\s*$')
_FAILURE_FIELD_RE = re.compile(r'^\s*(time|host|rank|exitcode|traceback)\s*:\s*(.*?)\s*$')
_SIGNAL_RE = re.compile(r'Signal (\d+) \((SIG\w+)\)')
# A launcher's own line for a worker that ended, where no summary follows (or it was cut off): torchrun's elastic agent
# ("failed (exitcode: -7) local_rank: 0 (pid: 1316) of binary: ..."), DeepSpeed's launcher ("... exits with return code = 1").
_AGENT_FAILED_RE = re.compile(r'failed \(exitcode: (-?\d+)\) local_rank: (\d+)')
_LAUNCHER_EXIT_RE = re.compile(r'exits with return code = (-?\d+)')
_MAX_ERRORS = 5
# Gloo's word for a peer that went away: names the peer's address ("Connection closed by peer [10.0.0.2]:19158",
# "Read error [10.0.0.3]:13030: Connection reset by peer").
_PEER_GONE_RE = re.compile(r'(?:closed by peer|Connection reset by peer) \[([0-9a-fA-F.:]+)\]|(?:Read|Write) error \[([0-9a-fA-F.:]+)\]:\d+: '
                           r'Connection reset by peer')


def _records(line: str) -> list[dict[str, Any]]:
    """The JSON records in one output line, however torchrun's tail glued copies together."""
    found: list[dict[str, Any]] = []
    start = line.find(_RECORD_MARK)
    while start >= 0:
        try:
            record, end = _DECODER.raw_decode(line, start + len(_RECORD_MARK) - 1)
        except ValueError:
            record, end = None, start + len(_RECORD_MARK)
        if isinstance(record, dict):
            found.append(record)
        start = line.find(_RECORD_MARK, end)
    return found


def _unlog(line: str) -> str:
    """The line without the logging labels in front of it (a logger that relays torchrun's output)."""
    found = LOGGING_RE.match(line)
    while found and found.end():
        line = line[found.end():]
        found = LOGGING_RE.match(line)
    return line


def _strip(line: str) -> str:
    return _unlog(RANK_RE.sub("", line, count=1))


def _labels(lines: list[str]) -> tuple[re.Pattern[str], ...]:
    """The launcher labels these lines may carry: pdsh's "host: " only where most lines carry one, as pdsh's output
    does, since an ordinary "Warning: ..." or "loss: 0.3" reads the same."""
    filled = [line for line in lines if line.strip()]
    if 2 * sum(1 for line in filled if PDSH_RE.match(line)) > len(filled):
        return (PROCESS_RE, POD_RE, PDSH_RE)
    return (PROCESS_RE, POD_RE)


def _unlabel(line: str, labels: tuple[re.Pattern[str], ...]) -> tuple[str | None, str]:
    """(the node the launcher's label names, or None; the line without the label)."""
    # "RuntimeError: ..." reads like pdsh's "host: ", but is a line of the node's own, not labelled by pdsh.
    if _ERROR_RE.match(line):
        return None, line
    for label in labels:
        match = label.match(line)
        if match:
            host = match.group("host")
            return (None if host in _STREAMS else host), line[match.end():]
    return None, line


def strip_prefixes(text: str | None) -> str:
    """The output without the per-line prefixes of torchrun --tee, srun --label and mpirun --tag-output."""
    return "\n".join(_strip(line) for line in (text or "").splitlines())


def parse_output(text: str | None) -> dict[str, Any]:
    """One node's torchrun output: {records, failures, errors, clients}.

    records: the programs' JSON records in order (a "node" key is added by the caller, not here).
    failures: torchrun's "Root Cause" and "Failures" entries, [{rank, local_rank, host, exitcode, signal, time}]: host
    is the summary's, else (torch before 1.10 named none) the node that the launcher's label names, if any.
    errors: the first distinct exception lines. clients: (joined, expected) when the master timed out waiting.
    """
    parsed: dict[str, Any] = {"records": [], "failures": [], "errors": [], "clients": None}
    failure: dict[str, Any] | None = None
    ended: list[dict[str, Any]] = []
    barrier = False
    lines = (text or "").splitlines()
    labels = _labels(lines)
    for labelled in lines:
        host, raw = _unlabel(labelled, labels)
        raw = _unlog(raw)
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
        agent = _AGENT_FAILED_RE.search(line)
        exited = agent or _LAUNCHER_EXIT_RE.search(line)
        if exited:
            ended.append({"rank": None, "local_rank": int(agent.group(2)) if agent else None, "host": host,
                          "exitcode": int(exited.group(1)), "signal": None, "time": None})
        clients = _CLIENTS_RE.search(line)
        if clients:
            parsed["clients"] = (int(clients.group(2)), int(clients.group(3)))
        barrier = barrier or _EXIT_BARRIER in line
        if not _ERROR_RE.match(line):
            continue
        if barrier:
            # The barrier's traceback ends at its exception line.
            barrier = False
        elif line not in parsed["errors"] and len(parsed["errors"]) < _MAX_ERRORS:
            parsed["errors"].append(line)
    # A summary cut off after its heading names nobody; without a summary, the launcher's own lines name who ended.
    parsed["failures"] = [f for f in parsed["failures"] if f["rank"] is not None or f["exitcode"] is not None] or ended
    return parsed


def first_failed(failed: list[str], logs: dict[str, list[str]], addresses: dict[str, str], ended: dict[str, str | None]) -> str | None:
    """Of the nodes whose part failed on its own, the one that failed first.

    A node whose log says a rank died of a signal comes first; then a node that the others' logs name as the peer
    that went away; then the one that ended first. Exit times alone mislead: the rank whose node lost a rank fails at
    once, while torchrun's agent on the node of the dead rank notices it up to 5 s later.
    """
    if not failed:
        return None
    by_address = {address: node for node, address in addresses.items()}
    killed = [n for n in failed if any(f["signal"] or (f["exitcode"] or 0) < 0 for f in parse_output("\n".join(logs.get(n) or []))["failures"])]
    blamed = [by_address[a] for n in addresses for line in (logs.get(n) or []) for m in _PEER_GONE_RE.findall(line) for a in m if a in by_address]
    # Equal end times (or none recorded) fall back to rank order, so the same logs always name the same node.
    order = {node: index for index, node in enumerate(addresses)}
    for candidates in (killed, [n for n in blamed if n in failed], blamed, failed):
        if candidates:
            return sorted(set(candidates), key=lambda n: (ended.get(n) or "", order.get(n, len(order))))[0]
    return None


def _failure_field(failure: dict[str, Any], key: str, value: str) -> None:
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


def launcher_failed(line: str) -> int | None:
    """The exit status of a worker whose launcher says it failed ("failed (exitcode: 1) local_rank: 0 (pid: 1316) of
    binary: ...", DeepSpeed's "... exits with return code = 1"), else None (0: a worker that ended well)."""
    found = _AGENT_FAILED_RE.search(line) or _LAUNCHER_EXIT_RE.search(line)
    status = int(found.group(1)) if found else None
    return status if status else None


def read_env_b64(content: str) -> dict[str, str]:
    """read_env_file of a launch.env as M(ansible.builtin.slurp) returns it (base64)."""
    return read_env_file(base64.b64decode(content).decode("utf-8", "replace"))


def read_env_file(text: str | None) -> dict[str, str]:
    """KEY=VALUE lines of a launch.env (comments and blank lines skipped, no shell expansion)."""
    env: dict[str, str] = {}
    for line in (text or "").splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, dummy, value = line.partition("=")
            env[key.strip()] = value.strip().strip('"\'')
    return env
