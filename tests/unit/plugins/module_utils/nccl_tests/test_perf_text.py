# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import os

import pytest

from ansible_collections.trainops.cluster.plugins.module_utils.nccl_tests.nccl_debug import parse_nccl_debug
from ansible_collections.trainops.cluster.plugins.module_utils.nccl_tests.perf_text import parse_perf_output
from helpers.nccl_fixtures import NODES, last_row, real, variant


# ---------------------------------------------------------------- parse_perf_output: real outputs

def test_real_all_reduce_perf():
    result = parse_perf_output(real('all_reduce_perf.txt'))
    assert result['source'] == 'nccl_tests_text'
    assert result['version'] == '2.19.6'
    assert result['nccl_library'] == '2.28.9'
    assert result['collective'] == 'all_reduce'
    assert result['params'] == {
        'nthreads': 1, 'ngpus': 2, 'min_bytes': 8, 'max_bytes': 8589934592, 'step': 2, 'step_type': 'factor',
        'warmup_iters': 5, 'iters': 20, 'agg_iters': 1, 'validation': 1, 'graph': 0, 'unalign': 0, 'per_iter_timing': False}
    # -g 2: one process drives both GPUs, so two Rank lines with one pid on one host.
    assert result['ranks'] == [
        {'rank': 0, 'group': 0, 'pid': 1418, 'host': 'vm', 'device': 0, 'busid': '0000:00:06', 'name': 'NVIDIA H200'},
        {'rank': 1, 'group': 0, 'pid': 1418, 'host': 'vm', 'device': 1, 'busid': '0000:00:07', 'name': 'NVIDIA H200'},
    ]
    assert len(result['rows']) == 31
    assert result['rows'][0]['size'] == 8
    row = last_row(result)
    assert (row['size'], row['count'], row['type'], row['redop'], row['root']) == (8589934592, 2147483648, 'float', 'sum', -1)
    assert row['in_place'] == {'time_us': 24641.4, 'algbw': 348.6, 'busbw': 348.6, 'wrong': 0}
    assert row['out_of_place'] == {'time_us': 24707.6, 'algbw': 347.66, 'busbw': 347.66, 'wrong': 0}
    assert result['wrong_total'] == 0
    assert result['out_of_bounds'] == 0
    assert result['avg_busbw'] == pytest.approx(112.049)
    assert result['errors'] == []
    assert result['failed_processes'] == []
    assert result['complete'] is True


def test_real_debug_output_keeps_rows_apart_from_nccl_lines():
    result = parse_perf_output(real('all_reduce_perf_debug.txt'))
    assert [row['size'] for row in result['rows']] == [1048576, 4194304, 16777216, 67108864]
    assert last_row(result)['in_place']['busbw'] == pytest.approx(269.98)
    assert result['params']['step'] == 4
    assert result['avg_busbw'] == pytest.approx(163.476)
    assert result['errors'] == []
    assert result['complete'] is True


def test_real_four_nodes_tagged_and_interleaved():
    with open(os.path.join(NODES, 'all_nodes.txt')) as f:
        text = f.read()
    result = parse_perf_output(text)
    assert [(entry['rank'], entry['host'], entry['busid']) for entry in result['ranks']] == [
        (0, 'gpu1', '0000:00:06'), (1, 'gpu2', '0000:00:07'), (2, 'gpu3', '0000:00:06'), (3, 'gpu4', '0000:00:07')]
    assert (result['params']['ngpus'], result['params']['max_bytes']) == (1, 268435456)
    # 8 B to 256 MiB, every row kept although the NCCL lines of ranks 1-3 come between rank 0's rows.
    assert [row['size'] for row in result['rows']] == [8 * 2 ** i for i in range(26)]
    assert last_row(result)['out_of_place'] == {'time_us': 245358.0, 'algbw': 1.09, 'busbw': 1.64, 'wrong': 0}
    assert (result['wrong_total'], result['complete'], result['errors']) == (0, True, [])
    info = parse_nccl_debug(text)
    assert info['hosts'] == ['gpu1', 'gpu2', 'gpu3', 'gpu4']
    assert (info['transports'], info['networks'], info['nranks'], info['nnodes']) == (['NET/Socket'], ['Socket'], 4, 4)
    assert info['ib_no_device_hosts'] == ['gpu1', 'gpu2', 'gpu3', 'gpu4']
    assert sorted(info['socket_interfaces']) == ['train0:10.77.0.1%d<0>' % node for node in range(1, 5)]


# ---------------------------------------------------------------- parse_perf_output: variants

def test_tagged_two_nodes_by_eight():
    result = parse_perf_output(variant('mpirun_2x8_tagged.txt'))
    assert [entry['rank'] for entry in result['ranks']] == list(range(16))
    assert set(entry['host'] for entry in result['ranks'][:8]) == {'node1'}
    assert set(entry['host'] for entry in result['ranks'][8:]) == {'node2'}
    assert len(set(entry['pid'] for entry in result['ranks'])) == 16
    assert result['params']['ngpus'] == 1
    assert len(result['rows']) == 31
    assert last_row(result)['in_place']['busbw'] == pytest.approx(348.6)
    assert last_row(result)['in_place']['algbw'] == pytest.approx(185.92)
    assert result['wrong_total'] == 0
    assert result['complete'] is True
    assert result['errors'] == []


def test_wrong_values():
    result = parse_perf_output(variant('wrong_values.txt'))
    wrong = dict((row['size'], (row['out_of_place']['wrong'], row['in_place']['wrong'])) for row in result['rows'])
    assert wrong[1048576] == (0, 4)
    assert wrong[2097152] == (8, 0)
    assert result['wrong_total'] == 12
    assert result['out_of_bounds'] == 2
    assert result['complete'] is True


def test_aborted_run():
    result = parse_perf_output(variant('mpirun_2x2_aborted.txt'))
    assert result['complete'] is False
    assert last_row(result)['size'] == 67108864
    assert result['avg_busbw'] is None
    errors = result['errors']
    assert any('NCCL WARN NET/IB: Got completion from peer 10.0.0.2<52113>' in line for line in errors)
    assert any(line.startswith("node1: Test NCCL failure common.cu:514 'remote process exited") for line in errors)
    assert '.. node1 pid 4101: Test failure common.cu:1454' in errors
    assert 'Primary job  terminated normally, but 1 process returned' in errors
    assert 'mpirun noticed that process rank 3 with PID 0 on node node2 exited on signal 9 (Killed).' in errors
    assert result['failed_processes'] == [
        {'rank': 3, 'host': 'node2', 'pid': 0, 'signal': 9, 'signal_name': 'Killed', 'exit_code': None}]


def test_srun_names_the_tasks_that_failed():
    # srun's own lines, as Slurm 22.05 printed them on the molecule train cluster (task 1 killed, a drained node).
    text = ("0: # nccl-tests version 2.19.6 nccl-headers=22809 nccl-library=22809\n"
            "srun: error: node2: task 1: Exited with exit code 1\n"
            "srun: error: node3: tasks 2-3: Killed\n"
            "srun: Required node not available (down, drained or reserved)\n")
    result = parse_perf_output(text)
    assert result['failed_processes'] == [
        {'rank': 1, 'host': 'node2', 'pid': None, 'signal': None, 'signal_name': None, 'exit_code': 1},
        {'rank': 2, 'host': 'node3', 'pid': None, 'signal': 9, 'signal_name': 'Killed', 'exit_code': None},
        {'rank': 3, 'host': 'node3', 'pid': None, 'signal': 9, 'signal_name': 'Killed', 'exit_code': None}]
    assert 'srun: Required node not available (down, drained or reserved)' in result['errors']


def test_timeout_killed_partial_output():
    result = parse_perf_output(variant('timeout_partial.txt'))
    assert result['complete'] is False
    assert len(result['rows']) == 30
    row = last_row(result)
    assert row['size'] == 4294967296
    assert row['out_of_place']['busbw'] == pytest.approx(344.17)
    assert row['in_place'] is None
    assert result['out_of_bounds'] is None
    assert result['errors'] == []


def test_rows_without_validation_per_iter_and_timestamps():
    text = '\n'.join([
        '# nThread 1 nGpus 1 minBytes 8 maxBytes 16 step: 2(factor) warmup iters: 1 iters: 20 agg iters: 1 validation: 0 graph: 0',
        '# Per-Iteration Report: CUDA event timing; i_* uses max over process rows ',
        '#',
        '           8             2     float     sum      -1    17.71    0.00    0.00     N/A    16.00    17.90    17.95    2.10'
        '    17.84    0.00    0.00     N/A    16.10    18.00    18.02    2.00  2026-11-29 22:41:10',
        '          16             4     float     sum      -1    17.75    0.00    0.00 1.2e+06    16.00    17.90    17.95    2.10'
        '    12.73    0.00    0.00       0    11.00    13.00    13.10    3.50',
    ])
    result = parse_perf_output(text)
    assert result['params']['validation'] == 0
    assert result['params']['graph'] == 0
    assert result['params']['unalign'] is None
    assert result['params']['per_iter_timing'] is True
    first, second = result['rows']
    assert first['out_of_place']['wrong'] is None
    assert first['in_place']['per_iter'] == {'min_us': 16.1, 'max_us': 18.0, 'p99_us': 18.02, 'cv_pct': 2.0}
    assert second['out_of_place']['wrong'] == 1200000
    assert result['wrong_total'] == 1200000
    assert result['complete'] is False


def test_all_unchecked_gives_no_wrong_total():
    text = '           8             2     float     sum      -1    17.71    0.00    0.00     N/A    17.84    0.00    0.00     N/A\n'
    assert parse_perf_output(text)['wrong_total'] is None
    assert parse_perf_output('')['wrong_total'] is None


def test_notes_json_path_and_signal_messages():
    text = '\n'.join([
        '# Writing JSON output to /tmp/ar.json.1',
        '#',
        '# Reducing maxBytes to 4294967296 due to memory limitation',
        '[node2:05202] *** Process received signal ***',
        '[node2:05202] Signal: Segmentation fault (11)',
        'mpirun detected that one or more processes exited with non-zero status, thus causing',
        'the job to be terminated. The first process to do so was:',
        '',
        '  Process name: [[51234,1],2]',
        '  Exit code:    3',
        'node1: Test CUDA failure common.cu:1046 \'out of memory\'',
    ])
    result = parse_perf_output(text)
    assert result['json_output'] == '/tmp/ar.json.1'
    assert result['notes'] == ['# Reducing maxBytes to 4294967296 due to memory limitation']
    assert result['failed_processes'] == [
        {'rank': None, 'host': 'node2', 'pid': 5202, 'signal': 11, 'signal_name': 'Segmentation fault', 'exit_code': None},
        {'rank': 2, 'host': None, 'pid': None, 'signal': None, 'signal_name': None, 'exit_code': 3},
    ]
    assert len(result['errors']) == 4
