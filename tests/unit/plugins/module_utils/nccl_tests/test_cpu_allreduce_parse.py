# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import json

import pytest

from ansible_collections.trainops.cluster.plugins.module_utils.nccl_tests.cpu_allreduce import parse_cpu_allreduce
from ansible_collections.trainops.cluster.plugins.plugin_utils.nccl_tests.rung_verdict import judge_rung
from helpers.nccl_fixtures import last_row, variant


# ---------------------------------------------------------------- parse_cpu_allreduce

def test_cpu_rung_fixture():
    result = parse_cpu_allreduce(variant('cpu_allreduce_3ranks.txt'))
    assert result['source'] == 'cpu_allreduce'
    assert result['collective'] == 'all_reduce'
    assert [(entry['rank'], entry['host'], entry['pid']) for entry in result['ranks']] == [(0, 'node1', 3101), (1, 'node2', 3202), (2, 'node3', 3303)]
    assert [row['size'] for row in result['rows']] == [1048576, 16777216, 67108864]
    row = last_row(result)
    # Slowest rank sets the time: 67108864 B / 0.625 s = 0.107 GB/s, x 2*(3-1)/3 = 0.143 GB/s.
    assert row['out_of_place'] == {'time_us': 625000.0, 'algbw': 0.107, 'busbw': 0.143, 'wrong': 0}
    assert row['in_place'] is None
    assert row['count'] == 16777216
    assert result['params'] == {'nranks': 3, 'min_bytes': 1048576, 'max_bytes': 67108864, 'validation': 1}
    assert result['wrong_total'] == 0
    assert result['out_of_bounds'] == 0
    assert result['avg_busbw'] == pytest.approx(0.133)
    assert result['errors'] == []
    assert result['complete'] is True


def test_cpu_rung_missing_rank_error_wrong_and_bad_lines():
    lines = [
        {'rank': 0, 'size': 3, 'host': 'node1', 'bytes': 1024, 'seconds': 0.001, 'wrong': 2},
        {'rank': 0, 'size': 3, 'host': 'node1', 'bytes': 1024, 'seconds': 0.002, 'wrong': 0, 'in_place': True},
        {'rank': 1, 'size': 3, 'host': 'node2', 'bytes': 1024, 'seconds': 0.004, 'wrong': 1},
        {'rank': 1, 'size': 3, 'host': 'node2', 'error': 'MPI_Allreduce returned 15'},
        {'rank': 2, 'size': 4, 'host': 'node3', 'bytes': 1024},
        {'other': 'json'},
    ]
    text = '\n'.join('[1,%d]<stdout>:%s' % (index, json.dumps(line)) for index, line in enumerate(lines))
    text += '\n[1,2]<stdout>:{"rank": 2, "size": 3, "ho\n'
    result = parse_cpu_allreduce(text)
    assert result['complete'] is False
    assert result['wrong_total'] == 3
    row = result['rows'][0]
    assert row['out_of_place']['wrong'] == 3
    assert row['in_place']['wrong'] == 0
    assert row['out_of_place']['time_us'] == 4000.0
    assert result['out_of_bounds'] == 1
    assert result['errors'] == [
        'rank 1 (node2): MPI_Allreduce returned 15',
        'rank 2: result line lacks seconds, wrong',
        'unreadable result line: {"rank": 2, "size": 3, "ho',
        'ranks disagree on the world size: 3, 4',
    ]
    assert [entry['rank'] for entry in result['ranks']] == [0, 1, 2]


def test_cpu_rung_with_nothing_reported():
    result = parse_cpu_allreduce('mpirun was unable to launch the specified application\n')
    assert result['rows'] == []
    assert result['complete'] is False
    assert result['params']['nranks'] is None
    verdict = judge_rung(result, 3, ['node1', 'node2', 'node3'])
    assert 'ranks 0-2 missing' not in verdict['reasons']
    assert 'rank 0 (node1) missing' in verdict['reasons']
    assert 'no result rows' in verdict['reasons']
