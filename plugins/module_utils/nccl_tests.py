# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parsers and verdicts for the all-reduce ladder of the verify playbook.

Text in, plain data out: the output of nccl-tests ``all_reduce_perf`` (its text, or the JSON file it writes with
``-J``, and its ``-h`` usage text), the ``NCCL_DEBUG=INFO`` log, and the line protocol of the CPU rung program; then
the link limit a rung is measured against and a verdict per rung. The formats followed are those of nccl-tests 2.19.6 (src/util.cu,
src/common.cu), NCCL 2.28 (src/debug.cc and the transports) and Open MPI 4.1 (``--tag-output``, help texts).

Every parser of a rung returns the same shape, so judge_rung() works for GPUs and for the CPU rung alike:
{source, version, nccl_library, nccl_headers, collective, params, ranks, rows, wrong_total, avg_busbw, out_of_bounds, json_output,
notes, errors, failed_processes, complete}.
"""

from __future__ import annotations

import json
import math
import posixpath
import re

from ansible_collections.trainops.cluster.plugins.module_utils.comm import nccl_version_from_code

# Open MPI prefixes each line with "[jobid,rank]<stream>:" under --tag-output, with ctime() in front under
# --timestamp-output, and "<stream>:" alone with --timestamp-output but no tags. The job id is a number in 4.x;
# it is matched loosely so that a named job (PRRTE) passes too.
_CTIME = r'[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}'
_MPI_TAG_RE = re.compile(r'(?:%s)?\[[^\[\],\s]+,(\d+)\]<(stdout|stderr|stddiag)>:' % _CTIME)
_MPI_TIMESTAMP_ONLY_RE = re.compile(r'^%s<(stdout|stderr|stddiag)>:' % _CTIME)
# Slurm's `srun --label` puts the task number in front of every line a task writes, right-aligned to the width of
# the highest one (" 0: ", "12: "); srun's own messages ("srun: error: ...") have none.
_SRUN_LABEL_RE = re.compile(r'^ *(\d+): ')

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
# The usage line of -J; a "--output_file" alone is not enough, as builds exist whose -F,--output_file writes CSV.
_JSON_OPTION_RE = re.compile(r'-J,\s*--output_file\b')
_NOTE_RE = re.compile(r'Reducing maxBytes|skipping json output|not supported before NCCL|Ignoring$|Disabling\.$')

# Lines that mean a rank, NCCL or mpirun failed (nccl-tests CHECK macros, NCCL WARN, Open MPI help texts).
_ERROR_RE = re.compile(
    r'Test (?:NCCL|CUDA) failure|Cuda failure|NCCL failure|Test failure|Test timeout|NCCL WARN'
    r'|terminated normally, but|noticed that (?:process rank|the job aborted)|exited with non-zero status'
    r'|MPI_ABORT was invoked|\*\*\* Process received signal \*\*\*|^\[[^\]]+\] Signal: |Invalid number of GPUs'
    r'|^# error: |has lost communication with|was unable to reliably start|not enough slots available')
_NOTICED_RE = re.compile(r'noticed that process rank (\d+) with PID (\d+) on node (\S+) exited on signal (\d+)(?: \(([^)]*)\))?')
_PROCESS_NAME_RE = re.compile(r'^\s*Process name:\s*\[\[\d+,\d+\],(\d+)\]')
_EXIT_CODE_RE = re.compile(r'^\s*Exit code:\s*(-?\d+)')
_RECEIVED_SIGNAL_RE = re.compile(r'^\[([^:\]\s]+):(\d+)\] \*\*\* Process received signal \*\*\*')
_SIGNAL_RE = re.compile(r'^\[([^:\]\s]+):(\d+)\] Signal: (.*?) \((\d+)\)')

# "host:pid:tid [cudaDev] NCCL INFO msg" and "host:pid:tid [cudaDev] file.cc:123 NCCL WARN msg"; NCCL puts a
# "[date time] " stamp in front of WARN lines by default.
_NCCL_LINE_RE = re.compile(
    r'(?:^|\s)(?P<host>[^\s:\[\]]+):(?P<pid>\d+):\d+ \[\d+\] (?:\S+:\d+ (?:\([^)]*\) )?)?NCCL (?P<level>INFO|WARN) (?P<msg>.*)$')
_NCCL_VERSION_RE = re.compile(r'NCCL version (\d+\.\d+\.\d+)(?:\+cuda(\S+))?')
_VIA_RE = re.compile(r'^(?:Channel|CollNet) \d+(?:/\d+)? : .* via (?:(?P<net>NET|COLLNET)/(?P<name>.+?)/\d+|(?P<other>\S+))')
_COLL_CHANNELS_RE = re.compile(r'^(\d+) coll channels, (\d+) collnet channels, (\d+) nvls channels')
_RING_RE = re.compile(r'^Channel \d+/(\d+) :(?:\s+\d+)+\s*$')
_INDEXED_ITEM_RE = re.compile(r'\[\d+\]([^\s;]+)')
_COMM_INIT_RE = re.compile(r'^ncclCommInitRank\w* comm (\S+) rank (\d+) nranks (\d+) cudaDev (\d+)(?: nvmlDev \d+)? busId (\S+)'
                           r'(?: commId (\S+))?')
_NNODES_RE = re.compile(r'^comm \S+ rank \d+ nRanks \d+ nNodes (\d+)')
_LOADED_PLUGIN_RE = re.compile(r'Loaded net plugin (.+?)(?: \(v\d+\))?\s*$')

# Per-lane, per-direction PCIe payload bandwidth in GB/s after line coding (8b/10b, 128b/130b, FLIT).
_PCIE_GBPS_PER_LANE = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}
_MAX_ERROR_REASONS = 5


def strip_mpi_tags(text):
    """Open MPI or Slurm output -> [(rank or None, stream or None, line)] in order.

    Handles `--tag-output` ("[1,3]<stderr>:text"), `--tag-output --timestamp-output` (ctime before the tag),
    `--timestamp-output` alone (rank None), `srun --label` ("12: text", stream None, the task number as rank) and
    untagged text (rank and stream None). rank is the MPI_COMM_WORLD rank of the process that wrote the line. Open
    MPI 4.1 tags every chunk it forwards, so a line flushed in two pieces can carry a second tag in the middle,
    possibly after another rank's text: the pieces are joined per rank and stream, and the line is emitted when it
    ends.
    """
    out = []
    pending = {}
    for raw in (text or '').splitlines():
        label = _SRUN_LABEL_RE.match(raw)
        if label:
            out.append((int(label.group(1)), None, raw[label.end():]))
            continue
        only_stamp = _MPI_TIMESTAMP_ONLY_RE.match(raw)
        if only_stamp:
            out.append((None, only_stamp.group(1), raw[only_stamp.end():]))
            continue
        tags = list(_MPI_TAG_RE.finditer(raw))
        if not tags:
            out.append((None, None, raw))
            continue
        if tags[0].start() > 0:
            out.append((None, None, raw[:tags[0].start()]))
        for position, tag in enumerate(tags):
            key = (int(tag.group(1)), tag.group(2))
            last = position == len(tags) - 1
            piece = raw[tag.end():] if last else raw[tag.end():tags[position + 1].start()]
            if last:
                out.append((key[0], key[1], pending.pop(key, '') + piece))
            else:
                pending[key] = pending.get(key, '') + piece
    for (rank, stream), piece in pending.items():
        out.append((rank, stream, piece))
    return out


def _lines(text):
    return [line for _rank, _stream, line in strip_mpi_tags(text)]


def _new_result(source):
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


def _collective(program):
    """'/opt/nccl-tests/build/all_reduce_perf_mpi' -> 'all_reduce'."""
    name = posixpath.basename(program or '')
    match = re.match(r'(\w+?)_perf', name)
    return match.group(1) if match else (name or None)


def _scan_failures(lines, result):
    """Fill result['errors'] with failure lines and result['failed_processes'] with what mpirun says about them."""
    failed = result['failed_processes']
    awaiting_exit_code = None
    for line in lines:
        stripped = line.strip()
        if _ERROR_RE.search(stripped):
            result['errors'].append(stripped)
        noticed = _NOTICED_RE.search(stripped)
        received = _RECEIVED_SIGNAL_RE.match(stripped)
        signal = _SIGNAL_RE.match(stripped)
        process_name = _PROCESS_NAME_RE.match(line)
        exit_code = _EXIT_CODE_RE.match(line)
        if noticed:
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


def _number(token):
    """nccl-tests number ('12479.3', '1.2e+03') -> float; 'nan' -> None. Raises ValueError on anything else."""
    value = float(token)
    return None if math.isnan(value) else value


def _wrong(token):
    """#wrong column ('%6g' of a count, or N/A when run with -c 0) -> int or None."""
    if token is None or token == 'N/A':
        return None
    value = _number(token)
    return None if value is None else int(value)


def _measurement(tokens):
    side = {'time_us': _number(tokens[0]), 'algbw': _number(tokens[1]), 'busbw': _number(tokens[2]), 'wrong': _wrong(tokens[3])}
    if len(tokens) == 8:
        side['per_iter'] = {'min_us': _number(tokens[4]), 'max_us': _number(tokens[5]), 'p99_us': _number(tokens[6]),
                            'cv_pct': _number(tokens[7])}
    return side


def _parse_row(line, per_iter):
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


def _finish_rows(result):
    values = [side['wrong'] for row in result['rows'] for side in (row['out_of_place'], row['in_place'])
              if side is not None and side['wrong'] is not None]
    result['wrong_total'] = sum(values) if values else None


def parse_perf_output(text):
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


def _parse_comment(line, result):
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


def _json_close_truncated(text):
    """Parse JSON cut short: nccl-tests writes its file as the run goes, so a killed run leaves it unclosed.

    Cuts back to the last point where a value ended (after a comma's predecessor, an opening or a closing bracket)
    and closes what is open there. Returns None when even that does not parse.
    """
    closers = []
    in_string = escaped = False
    cut = None
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


def _json_number(value):
    """JSON number, or nccl-tests' "nan" string -> float or None."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return None if math.isnan(value) else float(value)
    return None


def _json_side(side):
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


def _json_per_iter(side, stats):
    if side is not None and isinstance(stats, dict):
        side['per_iter'] = {key: _json_number(stats.get(key)) for key in ('min_us', 'max_us', 'p99_us', 'cv_pct')}


def _json_int(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def parse_perf_json(text):
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
    config = doc.get('config') if isinstance(doc.get('config'), dict) else {}
    step_factor = config.get('step_factor')
    result['params'] = {
        'nthreads': _json_int(config.get('nthreads')),
        'ngpus': _json_int(config.get('ngpus')),
        'min_bytes': _json_int(config.get('minimum_bytes')),
        'max_bytes': _json_int(config.get('maximum_bytes')),
        'step': _json_int(step_factor if step_factor is not None else config.get('step_bytes')),
        'step_type': 'factor' if step_factor is not None else 'bytes',
        'warmup_iters': _json_int(config.get('warmup_iters')),
        'iters': _json_int(config.get('iterations')),
        'agg_iters': _json_int(config.get('aggregated_iterations')),
        'validation': _json_int(config.get('validation')),
        'graph': _json_int(config.get('graph')),
        'unalign': None,
        # nccl-tests writes its booleans as the strings "true"/"false".
        'per_iter_timing': str(config.get('per_iter_timing')).lower() == 'true',
    }
    per_process = (result['params']['nthreads'] or 1) * (result['params']['ngpus'] or 1)
    for device in config.get('devices') or []:
        first = {'rank': _json_int(device.get('rank')), 'group': _json_int(device.get('group')),
                 'pid': _json_int(device.get('pid')), 'host': device.get('hostname'),
                 'device': _json_int(device.get('device')), 'busid': device.get('device_hex'),
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
        result['out_of_bounds'] = _json_int(oob.get('count'))
    avg = doc.get('average_bus_bandwidth')
    if isinstance(avg, dict):
        result['avg_busbw'] = _json_number(avg.get('bandwidth'))
    # nccl-tests always writes ncclGetLastError() into "errors", an empty string when there was none.
    result['errors'].extend(str(error) for error in doc.get('errors') or [] if error)
    result['complete'] = not truncated and isinstance(avg, dict)
    return result


def _json_row(entry):
    if not isinstance(entry, dict) or _json_int(entry.get('size')) is None:
        return None
    out_of_place = _json_side(entry.get('out_of_place'))
    in_place = _json_side(entry.get('in_place'))
    if out_of_place is None and in_place is None:
        return None
    _json_per_iter(out_of_place, entry.get('out_of_place_per_iter'))
    _json_per_iter(in_place, entry.get('in_place_per_iter'))
    return {
        'size': _json_int(entry.get('size')),
        'count': _json_int(entry.get('count')),
        'type': entry.get('type'),
        'redop': entry.get('redop'),
        # root is written as the padded text of the column ("    -1").
        'root': _json_int(str(entry.get('root')).strip()),
        'out_of_place': out_of_place,
        'in_place': in_place,
    }


def help_supports_json(text):
    """``all_reduce_perf -h`` output -> whether the binary takes ``-J <file>`` (results as JSON)."""
    return bool(_JSON_OPTION_RE.search(text or ''))


def help_problem(rc, output, timed_out, timeout):
    """Result of ``all_reduce_perf -h`` -> None when the binary ran, else why not, in one line.

    nccl-tests prints its usage and returns 0 for -h, before it starts MPI or CUDA; 1 is taken as fine too. Anything
    else (127 for a library the loader cannot find, a signal) means the binary cannot run on this node.
    """
    if timed_out:
        return '-h did not finish within %d s' % timeout
    if rc in (0, 1):
        return None
    lines = [line.strip() for line in (output or '').splitlines() if line.strip()]
    return 'exited with rc %d%s' % (rc, ': ' + lines[-1][:300] if lines else ' and printed nothing')


def _transport_name(via):
    """'via' part of a connection line -> 'NET/IB', 'NET/Socket', 'P2P/CUMEM', 'P2P/direct', 'SHM', 'CollNet'."""
    if via.group('net'):
        return 'CollNet' if via.group('net') == 'COLLNET' else 'NET/' + via.group('name')
    parts = via.group('other').split('/')
    if parts[0] == 'P2P' and len(parts) > 1:
        return 'P2P/' + parts[1]
    return parts[0]


def parse_nccl_debug(text):
    """NCCL_DEBUG=INFO log (alone, or mixed into any output, tagged by mpirun or not) -> what NCCL found and used.

    Returns {nccl_version ("2.28.9"), nccl_cuda ("13.0"), hosts (sorted), transports (sorted distinct: from the
    connection lines "Channel .. via X" / "CollNet .. via COLLNET", e.g. P2P/CUMEM, P2P/IPC, P2P/direct, SHM,
    NET/IB, NET/Socket, CollNet; plus NVLS when NVLS channels were set up), transports_by_host {host: [...]},
    networks (the "Using network X" choices), channels (coll channels, else ring count), nvls_channels,
    socket_interfaces ["eth0:10.0.0.5<0>"], bootstrap_interfaces, ib_devices ["mlx5_0:1/IB"], ib_devices_by_host,
    ib_no_device (some rank logged "NET/IB : No device found."), ib_no_device_hosts, net_plugin {loaded (True,
    False, or None when never mentioned), name, messages}, warnings (NCCL WARN lines), ranks [{rank, host, pid,
    cuda_dev, bus_id}] of the largest communicator, nranks, nnodes}.

    "Using network Socket" alone does not mean traffic went over sockets: a single-node run chooses a network too.
    Only the connection lines say which transport carried data.
    """
    info = {
        'nccl_version': None, 'nccl_cuda': None, 'hosts': set(), 'transports': set(), 'transports_by_host': {},
        'networks': [], 'channels': None, 'nvls_channels': None, 'socket_interfaces': [], 'bootstrap_interfaces': [],
        'ib_devices': [], 'ib_devices_by_host': {}, 'ib_no_device': False, 'ib_no_device_hosts': set(),
        'net_plugin': {'loaded': None, 'name': None, 'messages': []}, 'warnings': [], 'ranks': [], 'nranks': None,
        'nnodes': None,
    }
    rings = None
    comms = {}
    for line in _lines(text):
        version = _NCCL_VERSION_RE.search(line)
        if version and info['nccl_version'] is None:
            info['nccl_version'], info['nccl_cuda'] = version.group(1), version.group(2)
        match = _NCCL_LINE_RE.search(line)
        if not match:
            continue
        host, msg = match.group('host'), match.group('msg').strip()
        info['hosts'].add(host)
        if match.group('level') == 'WARN':
            info['warnings'].append(line.strip())
            continue
        ring = _RING_RE.match(msg)
        if ring:
            rings = max(rings or 0, int(ring.group(1)))
            continue
        via = _VIA_RE.match(msg)
        if via:
            name = _transport_name(via)
            info['transports'].add(name)
            info['transports_by_host'].setdefault(host, set()).add(name)
            continue
        _parse_nccl_info(host, int(match.group('pid')), msg, info, comms)
    if rings is not None and info['channels'] is None:
        info['channels'] = rings
    if comms:
        ranks = max(comms.values(), key=len)
        info['ranks'] = [ranks[rank] for rank in sorted(ranks)]
    return _finish_debug(info)


def _append_new(items, values):
    for value in values:
        if value not in items:
            items.append(value)


def _parse_nccl_info(host, pid, msg, info, comms):
    channels = _COLL_CHANNELS_RE.match(msg)
    comm_init = _COMM_INIT_RE.match(msg)
    nnodes = _NNODES_RE.match(msg)
    if channels:
        info['channels'] = max(info['channels'] or 0, int(channels.group(1)))
        info['nvls_channels'] = max(info['nvls_channels'] or 0, int(channels.group(3)))
        if int(channels.group(3)) > 0:
            info['transports'].add('NVLS')
            info['transports_by_host'].setdefault(host, set()).add('NVLS')
    elif comm_init:
        info['nranks'] = max(info['nranks'] or 0, int(comm_init.group(3)))
        key = comm_init.group(6) or comm_init.group(3)
        comms.setdefault(key, {})[int(comm_init.group(2))] = {
            'rank': int(comm_init.group(2)), 'host': host, 'pid': pid, 'cuda_dev': int(comm_init.group(4)),
            'bus_id': comm_init.group(5)}
    elif nnodes:
        info['nnodes'] = max(info['nnodes'] or 0, int(nnodes.group(1)))
    elif msg.startswith('Connected NVLS'):
        info['transports'].add('NVLS')
        info['transports_by_host'].setdefault(host, set()).add('NVLS')
    elif msg.startswith('NET/Socket') and ': Using' in msg:
        _append_new(info['socket_interfaces'], _INDEXED_ITEM_RE.findall(msg.split(': Using', 1)[1]))
    elif msg.startswith('NET/IB') and ': Using' in msg:
        devices = _INDEXED_ITEM_RE.findall(msg.split(': Using', 1)[1].split(';', 1)[0])
        if devices:
            _append_new(info['ib_devices'], devices)
            _append_new(info['ib_devices_by_host'].setdefault(host, []), devices)
    elif msg.startswith('NET/IB') and 'No device found' in msg:
        info['ib_no_device'] = True
        info['ib_no_device_hosts'].add(host)
    elif msg.startswith('NET/Plugin'):
        plugin = info['net_plugin']
        _append_new(plugin['messages'], [msg])
        loaded = _LOADED_PLUGIN_RE.search(msg)
        if loaded:
            plugin.update(loaded=True, name=loaded.group(1))
        elif plugin['loaded'] is None:
            plugin['loaded'] = False
    elif msg.startswith('Using network '):
        _append_new(info['networks'], [msg[len('Using network '):]])
    elif re.match(r'^Bootstrap ?: Using', msg):
        _append_new(info['bootstrap_interfaces'], msg.split('Using', 1)[1].split())


def _finish_debug(info):
    info['hosts'] = sorted(info['hosts'])
    info['transports'] = sorted(info['transports'])
    info['transports_by_host'] = {host: sorted(names) for host, names in sorted(info['transports_by_host'].items())}
    info['ib_no_device_hosts'] = sorted(info['ib_no_device_hosts'])
    return info


_CPU_REQUIRED = ('rank', 'size', 'host', 'bytes', 'seconds', 'wrong')


def parse_cpu_allreduce(text):
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
    world_sizes = set()
    ranks = {}
    measured = {}
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
    busbws = []
    for key in sorted(measured):
        by_rank = measured[key]
        complete = complete and sorted(by_rank) == list(range(nranks))
        row = _cpu_row(key, by_rank, nranks)
        busbws.extend(side['busbw'] for side in (row['out_of_place'], row['in_place']) if side and side['busbw'] is not None)
        _merge_row(result['rows'], row)
    result['complete'] = complete and sorted(ranks) == list(range(nranks))
    _finish_rows(result)
    sides = [side for row in result['rows'] for side in (row['out_of_place'], row['in_place']) if side]
    result['out_of_bounds'] = len([side for side in sides if side['wrong']])
    result['avg_busbw'] = round(sum(busbws) / len(busbws), 3) if busbws else None
    sizes = [row['size'] for row in result['rows']]
    result['params'] = {'nranks': nranks, 'min_bytes': min(sizes) if sizes else None, 'max_bytes': max(sizes) if sizes else None,
                        'validation': 1}
    _scan_failures(lines, result)
    return result


def _cpu_record(record, result, world_sizes, ranks, measured):
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


def _cpu_row(key, by_rank, nranks):
    size, dtype, op, in_place = key
    seconds = max(entry['seconds'] for entry in by_rank.values())
    algbw = size / 1e9 / seconds if seconds > 0 else None
    busbw = algbw * 2.0 * (nranks - 1) / nranks if algbw is not None and nranks else None
    side = {'time_us': round(seconds * 1e6, 3), 'algbw': None if algbw is None else round(algbw, 3),
            'busbw': None if busbw is None else round(busbw, 3), 'wrong': sum(entry['wrong'] for entry in by_rank.values())}
    counts = [entry['count'] for entry in by_rank.values() if entry['count'] is not None]
    return {'size': size, 'count': _json_int(counts[0]) if counts else None, 'type': dtype, 'redop': op, 'root': -1,
            'out_of_place': None if in_place else side, 'in_place': side if in_place else None}


def _merge_row(rows, row):
    """An in-place and an out-of-place line of one size make one row, as in nccl-tests."""
    for existing in rows:
        if (existing['size'], existing['type'], existing['redop']) == (row['size'], row['type'], row['redop']):
            for half in ('out_of_place', 'in_place'):
                existing[half] = existing[half] or row[half]
            return
    rows.append(row)


def link_limit_gbps(gpu_facts, comm_facts, scope):
    """Bandwidth a rung's busbw is measured against, in GB/s per direction like nccl-tests busbw.

    scope "gpu": one GPU, nothing crosses a link: limit None. scope "node": NVLink per GPU from
    gpu_facts['nvlink'] {links_per_gpu, link_speed_gbps, bandwidth_gbps_per_gpu} (GB/s, as nvidia-smi prints;
    bandwidth_gbps_per_gpu wins, else links x speed), else PCIe from gpu_facts['pcie'] {gen, width} (gpu.summarize_pcie:
    the slowest GPU's maximum link). scope
    "multi_node": the sum of ACTIVE InfiniBand/RoCE port rates (comm_facts['infiniband'] [{device, port, state,
    rate_gbps, link_layer}], Gb/s) / 8, else the fastest Ethernet interface that is up (comm_facts['interfaces']
    [{name, state, speed_mbps}]). Returns {limit_gbps (None when unknown), basis (human text), kind ("NVLink",
    "PCIe", "InfiniBand", "RoCE", "InfiniBand+RoCE", "Ethernet" or None)}. Raises ValueError on another scope.
    """
    gpu_facts = gpu_facts or {}
    comm_facts = comm_facts or {}
    if scope == 'gpu':
        return {'limit_gbps': None, 'basis': 'single GPU: no link between GPUs is exercised', 'kind': None}
    if scope == 'node':
        return _node_limit(gpu_facts)
    if scope == 'multi_node':
        return _network_limit(comm_facts)
    raise ValueError('scope must be gpu, node or multi_node, not %r' % (scope,))


def _node_limit(gpu_facts):
    nvlink = gpu_facts.get('nvlink') or {}
    links = nvlink.get('links_per_gpu') or 0
    speed = nvlink.get('link_speed_gbps') or 0
    total = nvlink.get('bandwidth_gbps_per_gpu') or links * speed
    if total > 0:
        detail = ' (%d links x %g GB/s)' % (links, speed) if links and speed else ''
        return {'limit_gbps': round(total, 1), 'basis': 'NVLink %.1f GB/s per GPU per direction%s' % (total, detail), 'kind': 'NVLink'}
    pcie = gpu_facts.get('pcie') or {}
    gen, width = _json_int(pcie.get('gen')), _json_int(pcie.get('width'))
    if gen in _PCIE_GBPS_PER_LANE and width:
        total = _PCIE_GBPS_PER_LANE[gen] * width
        return {'limit_gbps': round(total, 1), 'basis': 'PCIe Gen%d x%d: %.1f GB/s per direction (no NVLink)' % (gen, width, total),
                'kind': 'PCIe'}
    return {'limit_gbps': None, 'basis': 'no NVLink or PCIe link facts for this node', 'kind': None}


def _network_limit(comm_facts):
    ports = [port for port in comm_facts.get('infiniband') or []
             if str(port.get('state') or '').rsplit(':', 1)[-1].strip().upper() == 'ACTIVE' and (port.get('rate_gbps') or 0) > 0]
    if ports:
        gbit = sum(port['rate_gbps'] for port in ports)
        kinds = sorted(set('RoCE' if str(port.get('link_layer')).lower() == 'ethernet' else 'InfiniBand' for port in ports))
        names = ', '.join('%s:%s %g Gb/s' % (port.get('device'), port.get('port'), port['rate_gbps']) for port in ports)
        return {'limit_gbps': round(gbit / 8.0, 1),
                'basis': '%d active %s port%s (%s) = %g Gb/s = %.1f GB/s' % (
                    len(ports), '/'.join(kinds), 's' if len(ports) > 1 else '', names, gbit, gbit / 8.0),
                'kind': '+'.join(kinds)}
    nics = [nic for nic in comm_facts.get('interfaces') or []
            if nic.get('name') != 'lo' and str(nic.get('state') or '').upper() == 'UP' and (nic.get('speed_mbps') or 0) > 0]
    if nics:
        fastest = max(nics, key=lambda nic: nic['speed_mbps'])
        total = fastest['speed_mbps'] / 8000.0
        return {'limit_gbps': round(total, 1),
                'basis': 'Ethernet %s at %d Mb/s = %.1f GB/s (no active InfiniBand/RoCE port)' % (fastest['name'], fastest['speed_mbps'], total),
                'kind': 'Ethernet'}
    return {'limit_gbps': None, 'basis': 'no active InfiniBand/RoCE port and no Ethernet speed known', 'kind': None}


def _short_host(name):
    """nccl-tests and NCCL cut hostnames at the first dot; compare names the same way."""
    return str(name).split('.', 1)[0].lower()


def _spans(numbers):
    """[0, 1, 2, 5] -> '0-2, 5'."""
    spans = []
    for number in sorted(numbers):
        if spans and number == spans[-1][1] + 1:
            spans[-1][1] = number
        else:
            spans.append([number, number])
    return ', '.join(str(a) if a == b else '%d-%d' % (a, b) for a, b in spans)


def _ranks_text(numbers):
    return ('rank %s' if len(numbers) == 1 else 'ranks %s') % _spans(numbers)


def _expected_placement(expected_ranks, expected_hosts):
    """-> ({rank: expected host or None}, placement_is_given)."""
    if isinstance(expected_ranks, dict):
        return {int(rank): host for rank, host in expected_ranks.items()}, True
    ranks = list(range(expected_ranks)) if isinstance(expected_ranks, int) else [int(rank) for rank in expected_ranks]
    hosts = list(expected_hosts or [])
    # mpirun's default by-slot mapping with -N/ppr puts consecutive ranks on one node: used only to name hosts.
    per_host = len(ranks) // len(hosts) if hosts and ranks and len(ranks) % len(hosts) == 0 else None
    if per_host and ranks == list(range(len(ranks))):
        return {rank: hosts[rank // per_host] for rank in ranks}, False
    return {rank: None for rank in ranks}, False


def _rank_reasons(result, expected_ranks, expected_hosts):
    reasons = []
    found = {}
    for entry in result.get('ranks') or []:
        if entry.get('rank') is not None:
            found[entry['rank']] = entry.get('host')
    found_hosts = set(_short_host(host) for host in found.values() if host)
    if expected_ranks is not None:
        placement, given = _expected_placement(expected_ranks, expected_hosts)
        missing = {}
        for rank in sorted(set(placement) - set(found)):
            missing.setdefault(placement[rank], []).append(rank)
        for host, ranks in sorted(missing.items(), key=lambda item: item[1][0]):
            reasons.append('%s%s missing' % (_ranks_text(ranks), ' (%s)' % host if host else ''))
        extra = sorted(set(found) - set(placement))
        if extra:
            reasons.append('unexpected %s' % _ranks_text(extra))
        if given:
            for rank in sorted(set(found) & set(placement)):
                if placement[rank] and found[rank] and _short_host(found[rank]) != _short_host(placement[rank]):
                    reasons.append('rank %d ran on %s, expected %s' % (rank, found[rank], placement[rank]))
    if expected_hosts is not None:
        wanted = dict((_short_host(host), host) for host in expected_hosts)
        for short in sorted(set(wanted) - found_hosts):
            reasons.append('host %s missing: no rank ran there' % wanted[short])
        strangers = {}
        for rank, host in found.items():
            if host and _short_host(host) not in wanted:
                strangers.setdefault(host, []).append(rank)
        for host, ranks in sorted(strangers.items()):
            reasons.append('%s ran on unexpected host %s' % (_ranks_text(ranks), host))
    return reasons


def _failure_reasons(result):
    reasons = []
    for proc in result.get('failed_processes') or []:
        where = ' (%s)' % proc['host'] if proc.get('host') else ''
        who = 'MPI rank %d%s' % (proc['rank'], where) if proc.get('rank') is not None else 'process %s%s' % (proc.get('pid'), where)
        if proc.get('signal') is not None:
            name = ' (%s)' % proc['signal_name'] if proc.get('signal_name') else ''
            reasons.append('%s exited on signal %d%s' % (who, proc['signal'], name))
        elif proc.get('exit_code') is not None:
            reasons.append('%s exited with code %d' % (who, proc['exit_code']))
        else:
            reasons.append('%s failed' % who)
    errors = result.get('errors') or []
    reasons.extend('error: %s' % line for line in errors[:_MAX_ERROR_REASONS])
    if len(errors) > _MAX_ERROR_REASONS:
        reasons.append('... and %d more error lines' % (len(errors) - _MAX_ERROR_REASONS))
    return reasons


def _largest(rows):
    """-> (size, best busbw over both halves of the rows of that size) of the largest size measured."""
    if not rows:
        return None, None
    size = max(row['size'] for row in rows)
    values = [side['busbw'] for row in rows if row['size'] == size for side in (row['out_of_place'], row['in_place'])
              if side is not None and side['busbw'] is not None]
    return size, (max(values) if values else None)


def _socket_reason(ib_present, transports):
    """NET/Socket carried data although InfiniBand exists: name the hosts where that is known."""
    if isinstance(transports, dict):
        used = transports.get('transports') or []
        socket_hosts = [host for host, names in (transports.get('transports_by_host') or {}).items() if 'NET/Socket' in names]
        ib_hosts = set(_short_host(host) for host, devices in (transports.get('ib_devices_by_host') or {}).items() if devices)
    else:
        used = list(transports or [])
        socket_hosts = []
        ib_hosts = set()
    if 'NET/Socket' not in used:
        return None
    everywhere = ib_present is True
    if isinstance(ib_present, (list, tuple, set)):
        ib_hosts |= set(_short_host(host) for host in ib_present)
    if socket_hosts:
        flagged = sorted(host for host in socket_hosts if everywhere or _short_host(host) in ib_hosts)
        return 'NET/Socket used although IB devices exist on %s' % ', '.join(flagged) if flagged else None
    if everywhere or ib_hosts:
        return 'NET/Socket used although IB devices exist%s' % (' on %s' % ', '.join(sorted(ib_hosts)) if ib_hosts else '')
    return None


def judge_rung(result, expected_ranks, expected_hosts, min_busbw_gbps=None, ib_present=False, transports=None,
               limit=None, require_validation=True):
    """Verdict for one rung from a parse_* result.

    expected_ranks: a count N (ranks 0..N-1), a list of ranks, or {rank: host} (then placement is checked too);
    with a count and expected_hosts dividing it, missing ranks are named with the host mpirun's by-slot mapping
    would have used. expected_hosts: hosts that must have run a rank (compared by short name). min_busbw_gbps: the
    threshold for busbw at the largest size (best of in-place and out-of-place). ib_present: True, or the hosts
    that have InfiniBand/RoCE devices (from facts). transports: parse_nccl_debug()'s result (hosts are then named)
    or a list of transport names. limit: link_limit_gbps()'s result, for pct_of_limit and the wording.
    require_validation: a run without data checks (-c 0) fails, since nothing then proves the values right.

    Returns {passed, reasons (human, naming ranks and hosts), busbw_gbps, size_bytes, threshold_gbps, limit_gbps,
    pct_of_limit (busbw in % of the limit, when known), transports}.
    """
    reasons = _failure_reasons(result)
    rows = result.get('rows') or []
    if not result.get('complete'):
        last = '; last size %d B' % rows[-1]['size'] if rows else ''
        reasons.append('output incomplete: no end-of-run footer (aborted, killed or timed out%s)' % last)
    if not rows:
        reasons.append('no result rows')
    reasons.extend(_rank_reasons(result, expected_ranks, expected_hosts))
    built, loaded = result.get('nccl_headers'), result.get('nccl_library')
    if built and loaded and built != loaded:
        # The field reports' first suspect for hangs: another libnccl than the build's won at run time.
        reasons.append('NCCL %s loaded, but nccl-tests was built against NCCL %s: another libnccl.so.2 won at run time '
                       '(LD_LIBRARY_PATH, ldconfig)' % (loaded, built))
    wrong_total = result.get('wrong_total')
    if wrong_total:
        sizes = sorted(set(row['size'] for row in rows for side in (row['out_of_place'], row['in_place']) if side and side['wrong']))
        shown = ', '.join(str(size) for size in sizes[:_MAX_ERROR_REASONS]) + (', ...' if len(sizes) > _MAX_ERROR_REASONS else '')
        reasons.append('%d wrong value%s (at %s B)' % (wrong_total, '' if wrong_total == 1 else 's', shown))
    elif wrong_total is None and rows and require_validation:
        reasons.append('values not checked: the run had no data validation (-c 0)')
    size, busbw = _largest(rows)
    limit_gbps = (limit or {}).get('limit_gbps')
    if min_busbw_gbps is not None:
        if busbw is None:
            reasons.append('no busbw measured')
        elif busbw < min_busbw_gbps:
            of_limit = ''
            if limit_gbps:
                of_limit = ' (%.0f%% of %.0f GB/s %s)' % (100.0 * min_busbw_gbps / limit_gbps, limit_gbps, limit.get('kind') or 'limit')
            reasons.append('busbw %.1f GB/s < threshold %.1f GB/s%s' % (busbw, min_busbw_gbps, of_limit))
    socket = _socket_reason(ib_present, transports)
    if socket:
        reasons.append(socket)
    used = transports.get('transports') if isinstance(transports, dict) else transports
    return {
        'passed': not reasons,
        'reasons': reasons,
        'busbw_gbps': busbw,
        'size_bytes': size,
        'threshold_gbps': min_busbw_gbps,
        'limit_gbps': limit_gbps,
        'pct_of_limit': round(100.0 * busbw / limit_gbps, 1) if busbw is not None and limit_gbps else None,
        'transports': list(used) if used is not None else None,
    }
