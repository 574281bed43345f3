# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""roles/verify/files/cpu_allreduce.py: its pattern and checks imported directly, then a real 3-rank run under mpirun."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from array import array
from pathlib import Path

import pytest

from ansible_collections.trainops.cluster.plugins.module_utils.nccl_tests.cpu_allreduce import parse_cpu_allreduce

SCRIPT = Path(__file__).resolve().parents[3] / 'roles' / 'verify' / 'files' / 'cpu_allreduce.py'
# Debian's interpreter, where python3-mpi4py installs mpi4py; the nodes run the program with it.
SYSTEM_PYTHON = '/usr/bin/python3'

_spec = importlib.util.spec_from_file_location('cpu_allreduce', str(SCRIPT))
cpu_allreduce = importlib.util.module_from_spec(_spec)
# No __pycache__ next to the program: the role copies files/ to the nodes.
_dont_write_bytecode, sys.dont_write_bytecode = sys.dont_write_bytecode, True
try:
    _spec.loader.exec_module(cpu_allreduce)
finally:
    sys.dont_write_bytecode = _dont_write_bytecode


def float32(value):
    """Round a Python float to float32, as each step of an MPI float sum does."""
    return array('f', [value])[0]


def reduce_float32(buffers):
    """Element-wise float32 sum of the buffers, in the order given."""
    total = array('f', buffers[0])
    for buf in buffers[1:]:
        total = array('f', [float32(a + b) for a, b in zip(total, buf)])
    return total


def test_defaults_are_those_of_the_docstring():
    options = cpu_allreduce.parse_args([])
    assert (options.min_bytes, options.max_bytes, options.factor, options.iters, options.warmup) == (8, 16 * 1024 * 1024, 2, 10, 2)
    assert '--max-bytes 16777216 (16 MiB), --factor 2, --iters 10, --warmup 2' in cpu_allreduce.__doc__


@pytest.mark.parametrize('argv', [['--min-bytes', '0'], ['--min-bytes', '64', '--max-bytes', '8'], ['--factor', '1'],
                                  ['--iters', '0'], ['--warmup', '-1'], ['--iters', 'ten'], ['--bogus']])
def test_bad_arguments_raise(argv):
    with pytest.raises(ValueError):
        cpu_allreduce.parse_args(argv)


def test_message_sizes():
    sizes = cpu_allreduce.message_sizes(8, 16 * 1024 * 1024, 2)
    assert len(sizes) == 22
    assert sizes[0] == (8, 2) and sizes[-1] == (16777216, 4194304)
    # Whole float32 elements, rounded down; sizes that round to the same count are measured once.
    assert cpu_allreduce.message_sizes(6, 100, 3) == [(4, 1), (16, 4), (52, 13)]
    assert cpu_allreduce.message_sizes(1, 8, 2) == [(4, 1), (8, 2)]
    assert cpu_allreduce.message_sizes(1000, 1000, 2) == [(1000, 250)]


@pytest.mark.parametrize('nranks', [1, 2, 3, 8, 64])
def test_float32_sums_are_exact_in_any_order(nranks):
    period = cpu_allreduce.pattern_period(nranks)
    count = 2 * period + 7
    buffers = [cpu_allreduce.send_buffer(rank, count, period) for rank in range(nranks)]
    expected = cpu_allreduce.expected_sum(nranks, count, period)
    assert len(expected) == count and all(len(buf) == count for buf in buffers)
    assert cpu_allreduce.count_wrong(reduce_float32(buffers), expected) == 0
    assert cpu_allreduce.count_wrong(reduce_float32(buffers[::-1]), expected) == 0


@pytest.mark.parametrize('nranks', [1, 3, 64, 512, 1000, 5792])
def test_period_keeps_the_largest_sum_below_2_to_the_24(nranks):
    period = cpu_allreduce.pattern_period(nranks)
    assert 1 <= period <= cpu_allreduce.MAX_PERIOD
    assert period * nranks * (nranks + 1) // 2 < 2 ** 24
    assert max(cpu_allreduce.expected_sum(nranks, period, period)) == period * nranks * (nranks + 1) // 2


def test_too_many_ranks_for_exact_sums():
    with pytest.raises(ValueError, match='too many'):
        cpu_allreduce.pattern_period(6000)


def test_wrong_results_are_counted():
    nranks, count = 3, 1000
    period = cpu_allreduce.pattern_period(nranks)
    buffers = [cpu_allreduce.send_buffer(rank, count, period) for rank in range(nranks)]
    expected = cpu_allreduce.expected_sum(nranks, count, period)
    good = reduce_float32(buffers)
    assert cpu_allreduce.count_wrong(good, expected) == 0
    # A rank's contribution missing or doubled changes every element.
    assert cpu_allreduce.count_wrong(reduce_float32(buffers[:2]), expected) == count
    assert cpu_allreduce.count_wrong(reduce_float32(buffers + buffers[1:2]), expected) == count
    # One rank's data reduced in place of all of them.
    assert cpu_allreduce.count_wrong(reduce_float32([buffers[0]] * 3), expected) == count
    assert cpu_allreduce.count_wrong(reduce_float32([buffers[2]] * 3), expected) == count
    one_off = array('f', good)
    one_off[517] += 1.0
    assert cpu_allreduce.count_wrong(one_off, expected) == 1
    shifted = array('f', good[1:]) + array('f', good[:1])
    assert cpu_allreduce.count_wrong(shifted, expected) == count
    untouched = array('f', [-1.0]) * count
    assert cpu_allreduce.count_wrong(untouched, expected) == count
    nan = array('f', good)
    nan[0] = float('nan')
    assert cpu_allreduce.count_wrong(nan, expected) == 1
    assert cpu_allreduce.count_wrong(good[:-10], expected) == 10


def test_bad_arguments_give_an_error_line_without_mpi():
    run = subprocess.run([sys.executable, str(SCRIPT), '--min-bytes', '100', '--max-bytes', '10'],
                         capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 1
    record = json.loads(run.stdout)
    assert set(record) == {'rank', 'size', 'host', 'pid', 'error'}
    assert record['error'] == 'ValueError: need 1 <= --min-bytes <= --max-bytes, got 100 and 10'
    result = parse_cpu_allreduce(run.stdout)
    assert result['complete'] is False
    assert result['errors'] == ['rank 0 (%s): %s' % (record['host'], record['error'])]


def mpi_available():
    """-> reason to skip, or None when mpirun and Debian's python3-mpi4py are both there."""
    if not shutil.which('mpirun'):
        return 'mpirun not found (apt-get install openmpi-bin)'
    probe = subprocess.run([SYSTEM_PYTHON, '-c', 'import mpi4py'], capture_output=True, text=True, timeout=60, check=False) \
        if Path(SYSTEM_PYTHON).exists() else None
    if probe is None or probe.returncode != 0:
        return 'mpi4py not importable by %s (apt-get install python3-mpi4py)' % SYSTEM_PYTHON
    return None


MPIRUN = ['mpirun', '--allow-run-as-root', '--oversubscribe', '-np', '3', SYSTEM_PYTHON, str(SCRIPT)]


@pytest.mark.skipif(mpi_available() is not None, reason=str(mpi_available()))
@pytest.mark.parametrize('tagged', [False, True], ids=['plain', 'tag-output'])
def test_real_run_with_three_ranks(tagged):
    argv = MPIRUN[:1] + (['--tag-output'] if tagged else []) + MPIRUN[1:] + ['--max-bytes', '65536']
    run = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    result = parse_cpu_allreduce(run.stdout)
    assert result['errors'] == []
    assert [entry['rank'] for entry in result['ranks']] == [0, 1, 2]
    assert result['complete'] is True
    assert result['wrong_total'] == 0
    assert result['out_of_bounds'] == 0
    assert result['params'] == {'nranks': 3, 'min_bytes': 8, 'max_bytes': 65536, 'validation': 1}
    assert [(row['size'], row['count']) for row in result['rows']] == cpu_allreduce.message_sizes(8, 65536, 2)
    # busbw is rounded to 3 decimals of GB/s, so the smallest sizes may show 0.0.
    assert all(row['out_of_place']['busbw'] is not None and row['in_place'] is None for row in result['rows'])
    assert result['rows'][-1]['out_of_place']['busbw'] > 0
    records = [json.loads(line.split(':', 1)[1] if tagged else line) for line in run.stdout.splitlines() if '{' in line]
    assert len(records) == 3 * len(result['rows'])
    assert set(records[0]) == {'rank', 'size', 'host', 'bytes', 'seconds', 'wrong', 'pid', 'count', 'dtype', 'op', 'in_place'}
