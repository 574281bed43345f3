# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import json

import pytest

from ansible_collections.trainops.cluster.plugins.module_utils.nccl_tests.perf_json import parse_perf_json
from ansible_collections.trainops.cluster.plugins.module_utils.nccl_tests.perf_text import parse_perf_output
from helpers.nccl_fixtures import last_row, real, variant


# ---------------------------------------------------------------- parse_perf_json

def test_json_output_matches_the_text_output_of_the_same_run():
    result = parse_perf_json(variant('all_reduce_perf.json'))
    text = parse_perf_output(real('all_reduce_perf.txt'))
    assert result['source'] == 'nccl_tests_json'
    assert result['version'] is None
    assert result['nccl_library'] == '2.28.9'
    assert result['collective'] == 'all_reduce'
    assert result['params'] == dict(text['params'], unalign=None)
    # The file names only the first GPU of each process; rank 1 is filled in from nccl-tests' numbering.
    assert result['ranks'][0] == text['ranks'][0]
    assert result['ranks'][1] == dict(text['ranks'][1], busid=None, name=None)
    assert [row['size'] for row in result['rows']] == [row['size'] for row in text['rows']]
    for mine, printed in zip(result['rows'], text['rows']):
        for half in ('out_of_place', 'in_place'):
            # The sample's bandwidths were recomputed from the printed (rounded) times, hence the tolerance.
            assert mine[half]['busbw'] == pytest.approx(printed[half]['busbw'], rel=2e-3, abs=0.01)
            assert mine[half]['wrong'] == 0
    assert last_row(result)['in_place']['busbw'] == pytest.approx(348.5977, abs=1e-4)
    assert last_row(result)['root'] == -1
    assert result['wrong_total'] == 0
    assert result['avg_busbw'] == pytest.approx(112.049)
    assert result['out_of_bounds'] == 0
    assert result['errors'] == []
    assert result['notes'] == []
    assert result['complete'] is True


def test_truncated_json_keeps_the_rows_written_so_far():
    result = parse_perf_json(variant('all_reduce_perf_truncated.json'))
    assert result['complete'] is False
    assert 'truncated' in result['errors'][0]
    assert len(result['rows']) == 18
    row = last_row(result)
    assert row['size'] == 1048576
    assert row['out_of_place']['busbw'] == pytest.approx(68.534379)
    assert row['in_place'] is None
    assert result['avg_busbw'] is None


def test_json_mpi_processes_errors_and_other_formats():
    doc = {'version': 4, 'args': ['/opt/nccl-tests/build/all_reduce_perf_mpi'], 'nccl_version': 2708,
           'config': {'nthreads': 1, 'ngpus': 1, 'step_bytes': 1048576, 'per_iter_timing': 'true',
                      'devices': [{'rank': 0, 'group': 0, 'pid': 11, 'hostname': 'a', 'device': 0, 'device_hex': '0000:18:00',
                                   'device_info': 'GPU'},
                                  {'rank': 1, 'group': 0, 'pid': 12, 'hostname': 'b', 'device': 0, 'device_hex': '0000:18:00',
                                   'device_info': 'GPU'}]},
           'results': [{'size': 8, 'count': 2, 'type': 'float', 'redop': 'sum', 'root': '    -1', 'out_of_place': None,
                        'in_place': {'cpu_time': 5.0, 'alg_bw': 'nan', 'bus_bw': 1.5, 'nwrong': None},
                        'in_place_per_iter': {'min_us': 4.0, 'max_us': 6.0, 'p99_us': 6.0, 'cv_pct': 1.0}}, 'junk'],
           'out_of_bounds': {'count': 0, 'okay': 'true'}, 'average_bus_bandwidth': {'bandwidth': 1.5, 'okay': 'unchecked'},
           'errors': ['unhandled cuda error']}
    result = parse_perf_json(json.dumps(doc))
    assert result['collective'] == 'all_reduce'
    assert result['nccl_library'] == '2.7.8'
    assert [(entry['rank'], entry['host']) for entry in result['ranks']] == [(0, 'a'), (1, 'b')]
    assert result['params']['step_type'] == 'bytes'
    assert result['params']['per_iter_timing'] is True
    assert result['rows'] == [{'size': 8, 'count': 2, 'type': 'float', 'redop': 'sum', 'root': -1, 'out_of_place': None,
                               'in_place': {'time_us': 5.0, 'algbw': None, 'busbw': 1.5, 'wrong': None,
                                            'per_iter': {'min_us': 4.0, 'max_us': 6.0, 'p99_us': 6.0, 'cv_pct': 1.0}}}]
    assert result['wrong_total'] is None
    assert result['errors'] == ['unhandled cuda error']
    assert result['notes'] == ['JSON format version 4; this parser follows version 3 (nccl-tests 2.19)']
    assert result['complete'] is True


@pytest.mark.parametrize('text', ['', 'not json', '[1, 2]', '"text"'])
def test_json_that_cannot_be_read(text):
    result = parse_perf_json(text)
    assert result['complete'] is False
    assert result['rows'] == []
    assert result['errors'] == ['nccl-tests JSON output could not be read (empty or not JSON)']
