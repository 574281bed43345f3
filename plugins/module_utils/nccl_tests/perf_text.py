# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Parse the text output of nccl-tests ``all_reduce_perf`` into a rung result.

The format followed is that of nccl-tests 2.19.6 (src/util.cu, src/common.cu), with the failure texts of NCCL 2.28
(NCCL WARN) and Open MPI 4.1 (help texts) that come mixed in. Every parser of a rung (this one, perf_json and
cpu_allreduce) returns the same shape, made by _new_result() here, so rung_verdict.judge_rung() works for GPUs and
for the CPU rung alike:
{source, version, nccl_library, nccl_headers, collective, params, ranks, rows, wrong_total, avg_busbw, out_of_bounds, json_output,
notes, errors, failed_processes, complete}.

Node side: shipped to the nodes inside the module that imports it (allreduce_run).
"""

from __future__ import annotations

import math
import posixpath
import re
from typing import Any

from ansible_collections.trainops.cluster.plugins.module_utils.comm import nccl_version_from_code
from ansible_collections.trainops.cluster.plugins.module_utils.nccl_tests.mpi_output import _lines

_VERSION_RE = re.compile(r'^#\s*nccl-tests version (\S+)(?:\s+nccl-headers=(\d+))?(?:\s+nccl-library=(\d+))?')
_START_RE = re.compile(r'^#\s*Collective test starting:\s*(\S+)')
_PARAMS_RE = re.compile(
    r'^#\s*nThread (\d+) nGpus (\d+) minBytes (\d+) maxBytes (\d+) step: (\d+)\((\w+)\) warmup iters: (\d+) '
    r'iters: (\d+) agg iters: (\d+) validation: (\d+)(?: graph: (\d+))?(?: unalign: (\d+))?')
_RANK_RE = re.compile(r'^#\s*Rank\s+(\d+)\s+Group\s+(\d+)\s+Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)\s+\[([^\]]*)\]\s*(.*?)\s*$')
_ROW_RE = re.compile(r'^\s*(\d+)\s+(\d+)\s+(\w+)\s+(\w+)\s+(-?\d+)\s+(.*)$')
_ROW_TIMESTAMP_RE = re.compile(r'\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\s*$')
_OOB_RE = re.compile(r'^#\s*Out of bounds values\s*:\s*(\d+)')
_AVG_RE = re.compile(r'^#\s*Avg bus bandwidth\s*:\s*(\S+)')
_JSON_OUTPUT_RE = re.compile(r'^#\s*Writing JSON output to (.+?)\s*$')
_NOTE_RE = re.compile(r'Reducing maxBytes|skipping json output|not supported before NCCL|Ignoring$|Disabling\.$')

# Lines that mean a rank, NCCL or mpirun failed (nccl-tests CHECK macros, NCCL WARN, Open MPI help texts).
_ERROR_RE = re.compile(
    r'Test (?:NCCL|CUDA) failure|Cuda failure|NCCL failure|Test failure|Test timeout|NCCL WARN'
    r'|terminated normally, but|noticed that (?:process rank|the job aborted)|exited with non-zero status'
    r'|MPI_ABORT was invoked|\*\*\* Process received signal \*\*\*|^\[[^\]]+\] Signal: |Invalid number of GPUs'
    r'|^# error: |has lost communication with|was unable to reliably start|not enough slots available'
    r'|^srun: error: |^srun: Job step aborted|^srun: Required node not available')
# srun's own word on a task that failed: "srun: error: node2: task 1: Exited with exit code 3", "...: tasks 0-1: Killed".
_SRUN_TASK_RE = re.compile(r'^srun: error: (\S+): tasks? ([\d,-]+): (?:Exited with exit code (\d+)|(.+))$')
_SRUN_SIGNALS = {'Killed': 9, 'Terminated': 15, 'Segmentation fault': 11, 'Aborted': 6, 'Bus error': 7}
_NOTICED_RE = re.compile(r'noticed that process rank (\d+) with PID (\d+) on node (\S+) exited on signal (\d+)(?: \(([^)]*)\))?')
_PROCESS_NAME_RE = re.compile(r'^\s*Process name:\s*\[\[\d+,\d+\],(\d+)\]')
_EXIT_CODE_RE = re.compile(r'^\s*Exit code:\s*(-?\d+)')
_RECEIVED_SIGNAL_RE = re.compile(r'^\[([^:\]\s]+):(\d+)\] \*\*\* Process received signal \*\*\*')
_SIGNAL_RE = re.compile(r'^\[([^:\]\s]+):(\d+)\] Signal: (.*?) \((\d+)\)')


def _new_result(source: str) -> dict[str, Any]:
    return {
        'source': source,
        'version': None,
        'nccl_library': None,
        'nccl_headers': None,
        'collective': None,
        'params': {},
        'ranks': [],
        'rows': [],
        'wrong_total': None,
        'avg_busbw': None,
        'out_of_bounds': None,
        'json_output': None,
        'notes': [],
        'errors': [],
        'failed_processes': [],
        'complete': False,
    }


def _collective(program: str | None) -> str | None:
    """'/opt/nccl-tests/build/all_reduce_perf_mpi' -> 'all_reduce'."""
    name = posixpath.basename(program or '')
    match = re.match(r'(\w+?)_perf', name)
    return match.group(1) if match else (name or None)


def _task_ranks(spec: str) -> list[int]:
    """srun's task list "0-1,4" -> [0, 1, 4]."""
    ranks: list[int] = []
    for part in spec.split(','):
        first, _sep, last = part.partition('-')
        ranks.extend(range(int(first), int(last or first) + 1))
    return ranks


def _scan_failures(lines: list[str], result: dict[str, Any]) -> None:
    """Fill result['errors'] with failure lines and result['failed_processes'] with what mpirun or srun says of them."""
    failed = result['failed_processes']
    awaiting_exit_code: dict[str, Any] | None = None
    for line in lines:
        stripped = line.strip()
        if _ERROR_RE.search(stripped):
            result['errors'].append(stripped)
        noticed = _NOTICED_RE.search(stripped)
        received = _RECEIVED_SIGNAL_RE.match(stripped)
        signal = _SIGNAL_RE.match(stripped)
        process_name = _PROCESS_NAME_RE.match(line)
        exit_code = _EXIT_CODE_RE.match(line)
        srun_task = _SRUN_TASK_RE.match(stripped)
        if srun_task:
            died = srun_task.group(4)
            for rank in _task_ranks(srun_task.group(2)):
                failed.append({'rank': rank, 'host': srun_task.group(1), 'pid': None,
                               'signal': _SRUN_SIGNALS.get(died) if died else None, 'signal_name': died,
                               'exit_code': int(srun_task.group(3)) if srun_task.group(3) else None})
        elif noticed:
            failed.append({'rank': int(noticed.group(1)), 'host': noticed.group(3), 'pid': int(noticed.group(2)),
                           'signal': int(noticed.group(4)), 'signal_name': noticed.group(5), 'exit_code': None})
        elif received:
            failed.append({'rank': None, 'host': received.group(1), 'pid': int(received.group(2)),
                           'signal': None, 'signal_name': None, 'exit_code': None})
        elif signal:
            for entry in failed:
                if entry['host'] == signal.group(1) and entry['pid'] == int(signal.group(2)):
                    entry.update(signal=int(signal.group(4)), signal_name=signal.group(3))
        elif process_name:
            awaiting_exit_code = {'rank': int(process_name.group(1)), 'host': None, 'pid': None,
                                  'signal': None, 'signal_name': None, 'exit_code': None}
            failed.append(awaiting_exit_code)
        elif exit_code and awaiting_exit_code is not None:
            awaiting_exit_code['exit_code'] = int(exit_code.group(1))
            awaiting_exit_code = None


def _number(token: str) -> float | None:
    """nccl-tests number ('12479.3', '1.2e+03') -> float; 'nan' -> None. Raises ValueError on anything else."""
    value = float(token)
    return None if math.isnan(value) else value


def _wrong(token: str | None) -> int | None:
    """#wrong column ('%6g' of a count, or N/A when run with -c 0) -> int or None."""
    if token is None or token == 'N/A':
        return None
    value = _number(token)
    return None if value is None else int(value)


def _measurement(tokens: list[str]) -> dict[str, Any]:
    side: dict[str, Any] = {'time_us': _number(tokens[0]), 'algbw': _number(tokens[1]), 'busbw': _number(tokens[2]), 'wrong': _wrong(tokens[3])}
    if len(tokens) == 8:
        side['per_iter'] = {'min_us': _number(tokens[4]), 'max_us': _number(tokens[5]), 'p99_us': _number(tokens[6]),
                            'cv_pct': _number(tokens[7])}
    return side


def _parse_row(line: str, per_iter: bool) -> dict[str, Any] | None:
    """One result line -> row dict, or None when the line is not a (whole) result line.

    A run killed between the out-of-place and the in-place half leaves a row with in_place None.
    """
    match = _ROW_RE.match(line)
    if not match:
        return None
    body = _ROW_TIMESTAMP_RE.sub('', match.group(6)).split()
    width = 8 if per_iter else 4
    if len(body) not in (width, 2 * width):
        return None
    try:
        sides = [_measurement(body[start:start + width]) for start in range(0, len(body), width)]
    except ValueError:
        return None
    return {
        'size': int(match.group(1)),
        'count': int(match.group(2)),
        'type': match.group(3),
        'redop': match.group(4),
        'root': int(match.group(5)),
        'out_of_place': sides[0],
        'in_place': sides[1] if len(sides) == 2 else None,
    }


def _finish_rows(result: dict[str, Any]) -> None:
    values = [side['wrong'] for row in result['rows'] for side in (row['out_of_place'], row['in_place'])
              if side is not None and side['wrong'] is not None]
    result['wrong_total'] = sum(values) if values else None


def parse_perf_output(text: str | None) -> dict[str, Any]:
    """nccl-tests text output (plain, from `mpirun --tag-output` or `srun --label`, NCCL INFO lines mixed in) -> rung result.

    version: nccl-tests version ("2.19.6"); nccl_library: NCCL version it ran with ("2.28.9"); collective:
    "all_reduce"; params: {nthreads, ngpus, min_bytes, max_bytes, step, step_type ("factor"/"bytes"), warmup_iters,
    iters, agg_iters, validation, graph, unalign, per_iter_timing}; ranks: [{rank, group, pid, host, device, busid,
    name}] from the "# Using devices" block (host is nccl-tests' hostname, cut at the first dot); rows: [{size,
    count, type, redop, root, out_of_place, in_place}] where each side is {time_us, algbw, busbw, wrong} (GB/s as
    printed, wrong None when run with -c 0) plus per_iter {min_us, max_us, p99_us, cv_pct} under -I 1; wrong_total:
    sum of #wrong, None when nothing was checked; avg_busbw and out_of_bounds from the footer; json_output: the
    file named by "# Writing JSON output to"; notes: non-fatal remarks (maxBytes reduced, option ignored); errors:
    failure lines (NCCL/CUDA failure, NCCL WARN, timeouts, mpirun abort texts, signals); failed_processes: [{rank,
    host, pid, signal, signal_name, exit_code}] as mpirun reports them (rank is the MPI rank); complete: the footer
    was printed, so the run got to its end.
    """
    result = _new_result('nccl_tests_text')
    lines = _lines(text)
    params = result['params']
    for line in lines:
        stripped = line.strip()
        if stripped.startswith('#'):
            _parse_comment(stripped, result)
            continue
        row = _parse_row(stripped, params.get('per_iter_timing', False))
        if row is not None:
            result['rows'].append(row)
        elif _NOTE_RE.search(stripped):
            result['notes'].append(stripped)
    _finish_rows(result)
    _scan_failures(lines, result)
    return result


def _parse_comment(line: str, result: dict[str, Any]) -> None:
    params = result['params']
    version = _VERSION_RE.match(line)
    start = _START_RE.match(line)
    header = _PARAMS_RE.match(line)
    rank = _RANK_RE.match(line)
    oob = _OOB_RE.match(line)
    avg = _AVG_RE.match(line)
    json_output = _JSON_OUTPUT_RE.match(line)
    if version:
        result['version'] = version.group(1)
        result['nccl_headers'] = nccl_version_from_code(version.group(2)) if version.group(2) else None
        result['nccl_library'] = nccl_version_from_code(version.group(3)) if version.group(3) else None
    elif start:
        result['collective'] = _collective(start.group(1))
    elif header:
        values = header.groups()
        params.update(nthreads=int(values[0]), ngpus=int(values[1]), min_bytes=int(values[2]), max_bytes=int(values[3]),
                      step=int(values[4]), step_type=values[5], warmup_iters=int(values[6]), iters=int(values[7]),
                      agg_iters=int(values[8]), validation=int(values[9]),
                      graph=int(values[10]) if values[10] is not None else None,
                      unalign=int(values[11]) if values[11] is not None else None)
        params.setdefault('per_iter_timing', False)
    elif line.startswith('# Per-Iteration Report'):
        params['per_iter_timing'] = True
    elif rank:
        result['ranks'].append({'rank': int(rank.group(1)), 'group': int(rank.group(2)), 'pid': int(rank.group(3)),
                                'host': rank.group(4), 'device': int(rank.group(5)), 'busid': rank.group(6),
                                'name': rank.group(7) or None})
    elif oob:
        result['out_of_bounds'] = int(oob.group(1))
    elif avg:
        try:
            result['avg_busbw'] = _number(avg.group(1))
        except ValueError:
            result['avg_busbw'] = None
        result['complete'] = True
    elif json_output:
        result['json_output'] = json_output.group(1)
    elif _NOTE_RE.search(line):
        result['notes'].append(line)
