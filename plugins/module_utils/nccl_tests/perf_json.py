# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Parse the JSON file nccl-tests ``all_reduce_perf`` writes with ``-J`` into a rung result.

The format followed is "version": 3 of nccl-tests 2.19.6 (src/util.cu); the result has the shape of
perf_text.parse_perf_output(), a file cut short by a killed run included.

Node side: shipped to the nodes inside the module that imports it (allreduce_run).
"""

from __future__ import annotations

import json
import math
from typing import Any

from ansible_collections.trainops.cluster.plugins.module_utils.comm import nccl_version_from_code
from ansible_collections.trainops.cluster.plugins.module_utils.nccl_tests.perf_text import _collective, _finish_rows, _new_result


def _json_close_truncated(text: str) -> Any:
    """Parse JSON cut short: nccl-tests writes its file as the run goes, so a killed run leaves it unclosed.

    Cuts back to the last point where a value ended (after a comma's predecessor, an opening or a closing bracket)
    and closes what is open there. Returns None when even that does not parse.
    """
    closers: list[str] = []
    in_string = escaped = False
    cut: tuple[int, str] | None = None
    for index, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == '\\':
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in '{[':
            closers.append('}' if char == '{' else ']')
            cut = (index + 1, ''.join(reversed(closers)))
        elif char in '}]':
            if closers:
                closers.pop()
            cut = (index + 1, ''.join(reversed(closers)))
        elif char == ',':
            cut = (index, ''.join(reversed(closers)))
    if cut is None:
        return None
    try:
        return json.loads(text[:cut[0]] + cut[1])
    except ValueError:
        return None


def _json_number(value: object) -> float | None:
    """JSON number, or nccl-tests' "nan" string -> float or None."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return None if math.isnan(value) else float(value)
    return None


def _json_side(side: object) -> dict[str, Any] | None:
    # A side cut off by a truncated file has no bandwidth yet: treat it as not measured.
    if not isinstance(side, dict) or 'bus_bw' not in side:
        return None
    wrong = _json_number(side.get('nwrong'))
    return {
        'time_us': _json_number(side.get('time', side.get('cpu_time'))),
        'algbw': _json_number(side.get('alg_bw')),
        'busbw': _json_number(side.get('bus_bw')),
        'wrong': None if wrong is None else int(wrong),
    }


def _json_per_iter(side: dict[str, Any] | None, stats: object) -> None:
    if side is not None and isinstance(stats, dict):
        side['per_iter'] = {key: _json_number(stats.get(key)) for key in ('min_us', 'max_us', 'p99_us', 'cv_pct')}


def int_or_none(value: Any) -> int | None:
    """An integer from JSON or facts (a number or its text), None for anything else; the CPU rung and the bandwidth
    model read their numbers with it too."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def parse_perf_json(text: str | None) -> dict[str, Any]:
    """JSON file of nccl-tests >= 2.19 (`-J FILE.json` / `--output_file FILE.json`, format "version": 3) -> rung result.

    Same shape as parse_perf_output(). What the file does not hold stays None: version (only the NCCL version code
    is written, as nccl_library) and params.unalign. The file lists one device per MPI process (the first rank of
    that process); when a process drives several GPUs (-t/-g) its other ranks are filled in from nccl-tests' own
    numbering (rank and device + i, same pid and host) with busid and name None. NCCL WARN lines and mpirun
    messages never reach the file: parse the text output for those. A file cut short by a killed run is closed at
    its last whole value, complete is False and an error says so. The file also holds rank 0's whole environment
    ("env"), which is not copied into the result.
    """
    result = _new_result('nccl_tests_json')
    try:
        doc = json.loads(text or '')
        truncated = False
    except ValueError:
        doc = _json_close_truncated(text or '')
        truncated = True
    if not isinstance(doc, dict):
        result['errors'].append('nccl-tests JSON output could not be read (empty or not JSON)')
        return result
    if truncated:
        result['errors'].append('nccl-tests JSON output is truncated: the run was aborted, killed or timed out before it closed the file')
    if doc.get('version') != 3:
        result['notes'].append('JSON format version %r; this parser follows version 3 (nccl-tests 2.19)' % (doc.get('version'),))
    if doc.get('nccl_version'):
        result['nccl_library'] = nccl_version_from_code(doc['nccl_version'])
    args = doc.get('args') or []
    result['collective'] = _collective(args[0]) if args else None
    config: dict[str, Any] = doc['config'] if isinstance(doc.get('config'), dict) else {}
    step_factor = config.get('step_factor')
    result['params'] = {
        'nthreads': int_or_none(config.get('nthreads')),
        'ngpus': int_or_none(config.get('ngpus')),
        'min_bytes': int_or_none(config.get('minimum_bytes')),
        'max_bytes': int_or_none(config.get('maximum_bytes')),
        'step': int_or_none(step_factor if step_factor is not None else config.get('step_bytes')),
        'step_type': 'factor' if step_factor is not None else 'bytes',
        'warmup_iters': int_or_none(config.get('warmup_iters')),
        'iters': int_or_none(config.get('iterations')),
        'agg_iters': int_or_none(config.get('aggregated_iterations')),
        'validation': int_or_none(config.get('validation')),
        'graph': int_or_none(config.get('graph')),
        'unalign': None,
        # nccl-tests writes its booleans as the strings "true"/"false".
        'per_iter_timing': str(config.get('per_iter_timing')).lower() == 'true',
    }
    per_process = (result['params']['nthreads'] or 1) * (result['params']['ngpus'] or 1)
    for device in config.get('devices') or []:
        first = {'rank': int_or_none(device.get('rank')), 'group': int_or_none(device.get('group')),
                 'pid': int_or_none(device.get('pid')), 'host': device.get('hostname'),
                 'device': int_or_none(device.get('device')), 'busid': device.get('device_hex'),
                 'name': device.get('device_info')}
        result['ranks'].append(first)
        if first['rank'] is None or first['device'] is None:
            continue
        for offset in range(1, per_process):
            result['ranks'].append(dict(first, rank=first['rank'] + offset, device=first['device'] + offset, busid=None, name=None))
    for entry in doc.get('results') or []:
        row = _json_row(entry)
        if row is not None:
            result['rows'].append(row)
    _finish_rows(result)
    oob = doc.get('out_of_bounds')
    if isinstance(oob, dict):
        result['out_of_bounds'] = int_or_none(oob.get('count'))
    avg = doc.get('average_bus_bandwidth')
    if isinstance(avg, dict):
        result['avg_busbw'] = _json_number(avg.get('bandwidth'))
    # nccl-tests always writes ncclGetLastError() into "errors", an empty string when there was none.
    result['errors'].extend(str(error) for error in doc.get('errors') or [] if error)
    result['complete'] = not truncated and isinstance(avg, dict)
    return result


def _json_row(entry: object) -> dict[str, Any] | None:
    if not isinstance(entry, dict) or int_or_none(entry.get('size')) is None:
        return None
    out_of_place = _json_side(entry.get('out_of_place'))
    in_place = _json_side(entry.get('in_place'))
    if out_of_place is None and in_place is None:
        return None
    _json_per_iter(out_of_place, entry.get('out_of_place_per_iter'))
    _json_per_iter(in_place, entry.get('in_place_per_iter'))
    return {
        'size': int_or_none(entry.get('size')),
        'count': int_or_none(entry.get('count')),
        'type': entry.get('type'),
        'redop': entry.get('redop'),
        # root is written as the padded text of the column ("    -1").
        'root': int_or_none(str(entry.get('root')).strip()),
        'out_of_place': out_of_place,
        'in_place': in_place,
    }
