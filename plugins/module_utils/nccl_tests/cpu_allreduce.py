# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Parse the line protocol of the CPU rung program (roles/verify/files/cpu_allreduce.py) into a rung result.

The result has the shape of perf_text.parse_perf_output(), so the CPU rung is judged like a GPU rung.

Node side: shipped to the nodes inside the module that imports it (allreduce_run).
"""

from __future__ import annotations

import json
from typing import Any

from ansible_collections.trainops.cluster.plugins.module_utils.nccl_tests.mpi_output import _lines
from ansible_collections.trainops.cluster.plugins.module_utils.nccl_tests.perf_json import int_or_none
from ansible_collections.trainops.cluster.plugins.module_utils.nccl_tests.perf_text import _finish_rows, _new_result, _scan_failures


_CPU_REQUIRED = ('rank', 'size', 'host', 'bytes', 'seconds', 'wrong')


def parse_cpu_allreduce(text: str | None) -> dict[str, Any]:
    """Output of the CPU rung program -> rung result, the same shape as parse_perf_output().

    Protocol: the program runs under `mpirun --tag-output` (tags optional) and writes JSON objects, one per line,
    on stdout; every other line is ignored except the failure texts parse_perf_output() reports too.

    * result line, one per rank and per message size:
      {"rank": 0, "size": 3, "host": "node1", "bytes": 67108864, "seconds": 0.0123, "wrong": 0}
      rank and size are the MPI_COMM_WORLD rank and size; host is gethostname(); bytes is the buffer each rank
      reduces; seconds is the mean time of one MPI_Allreduce after warm-up; wrong counts the elements that differ
      from the expected result, checked by the rank itself. Optional: "pid", "count" (elements), "dtype" (default
      "float"), "op" (default "sum"), "in_place" (bool, default false: separate send and receive buffers),
      "busbw_gbps" (the program's own figure; ignored, the row is recomputed so every rank is judged alike).
    * error line, when a rank cannot go on: {"rank": 1, "size": 3, "host": "node2", "error": "text"}.

    Each message size gives one row: time_us is the slowest rank's time, algbw = bytes / time (GB/s, 1e9 bytes),
    busbw = algbw * 2 * (size - 1) / size (the ring all-reduce factor nccl-tests uses), wrong is the sum over ranks.
    complete is True when every rank 0..size-1 reported every size. params: {nranks, min_bytes, max_bytes,
    validation: 1}; avg_busbw is the mean busbw over the rows; out_of_bounds counts measurements with wrong > 0.
    """
    result = _new_result('cpu_allreduce')
    result['collective'] = 'all_reduce'
    lines = _lines(text)
    world_sizes: set[int] = set()
    ranks: dict[int, dict[str, Any]] = {}
    measured: dict[tuple[int, str, str, bool], dict[int, dict[str, Any]]] = {}
    for line in lines:
        stripped = line.strip()
        if not stripped.startswith('{'):
            continue
        try:
            record = json.loads(stripped)
        except ValueError:
            result['errors'].append('unreadable result line: %s' % stripped[:200])
            continue
        if not isinstance(record, dict) or 'rank' not in record:
            continue
        _cpu_record(record, result, world_sizes, ranks, measured)
    if len(world_sizes) > 1:
        result['errors'].append('ranks disagree on the world size: %s' % ', '.join(str(size) for size in sorted(world_sizes)))
    nranks = max(world_sizes) if world_sizes else None
    result['ranks'] = [ranks[rank] for rank in sorted(ranks)]
    complete = bool(measured) and nranks is not None
    busbws: list[float] = []
    for key in sorted(measured):
        by_rank = measured[key]
        # (complete is False where nranks is None)
        complete = complete and sorted(by_rank) == list(range(nranks or 0))
        row = _cpu_row(key, by_rank, nranks)
        busbws.extend(side['busbw'] for side in (row['out_of_place'], row['in_place']) if side and side['busbw'] is not None)
        _merge_row(result['rows'], row)
    result['complete'] = complete and sorted(ranks) == list(range(nranks or 0))
    _finish_rows(result)
    sides = [side for row in result['rows'] for side in (row['out_of_place'], row['in_place']) if side]
    result['out_of_bounds'] = len([side for side in sides if side['wrong']])
    result['avg_busbw'] = round(sum(busbws) / len(busbws), 3) if busbws else None
    sizes = [row['size'] for row in result['rows']]
    result['params'] = {'nranks': nranks, 'min_bytes': min(sizes) if sizes else None, 'max_bytes': max(sizes) if sizes else None,
                        'validation': 1}
    _scan_failures(lines, result)
    return result


def _cpu_record(record: dict[str, Any], result: dict[str, Any], world_sizes: set[int], ranks: dict[int, dict[str, Any]],
                measured: dict[tuple[int, str, str, bool], dict[int, dict[str, Any]]]) -> None:
    try:
        rank = int(record['rank'])
        if record.get('size') is not None:
            world_sizes.add(int(record['size']))
    except (TypeError, ValueError):
        result['errors'].append('result line with a bad rank or size: %s' % json.dumps(record)[:200])
        return
    ranks.setdefault(rank, {'rank': rank, 'group': 0, 'pid': record.get('pid'), 'host': record.get('host'),
                            'device': None, 'busid': None, 'name': None})
    if record.get('error'):
        result['errors'].append('rank %d (%s): %s' % (rank, record.get('host'), record['error']))
        return
    missing = [key for key in _CPU_REQUIRED if record.get(key) is None]
    if missing:
        result['errors'].append('rank %d: result line lacks %s' % (rank, ', '.join(missing)))
        return
    try:
        key = (int(record['bytes']), str(record.get('dtype') or 'float'), str(record.get('op') or 'sum'), bool(record.get('in_place')))
        measured.setdefault(key, {})[rank] = {'seconds': float(record['seconds']), 'wrong': int(record['wrong']),
                                              'count': record.get('count')}
    except (TypeError, ValueError):
        result['errors'].append('rank %d: result line with a non-numeric field: %s' % (rank, json.dumps(record)[:200]))


def _cpu_row(key: tuple[int, str, str, bool], by_rank: dict[int, dict[str, Any]], nranks: int | None) -> dict[str, Any]:
    size, dtype, op, in_place = key
    seconds = max(entry['seconds'] for entry in by_rank.values())
    algbw = size / 1e9 / seconds if seconds > 0 else None
    busbw = algbw * 2.0 * (nranks - 1) / nranks if algbw is not None and nranks else None
    side = {'time_us': round(seconds * 1e6, 3), 'algbw': None if algbw is None else round(algbw, 3),
            'busbw': None if busbw is None else round(busbw, 3), 'wrong': sum(entry['wrong'] for entry in by_rank.values())}
    counts = [entry['count'] for entry in by_rank.values() if entry['count'] is not None]
    return {'size': size, 'count': int_or_none(counts[0]) if counts else None, 'type': dtype, 'redop': op, 'root': -1,
            'out_of_place': None if in_place else side, 'in_place': side if in_place else None}


def _merge_row(rows: list[dict[str, Any]], row: dict[str, Any]) -> None:
    """An in-place and an out-of-place line of one size make one row, as in nccl-tests."""
    for existing in rows:
        if (existing['size'], existing['type'], existing['redop']) == (row['size'], row['type'], row['redop']):
            for half in ('out_of_place', 'in_place'):
                existing[half] = existing[half] or row[half]
            return
    rows.append(row)
