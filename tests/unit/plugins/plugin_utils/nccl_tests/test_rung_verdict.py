# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import copy

import pytest

from ansible_collections.trainops.cluster.plugins.module_utils.nccl_tests.cpu_allreduce import parse_cpu_allreduce
from ansible_collections.trainops.cluster.plugins.module_utils.nccl_tests.nccl_debug import parse_nccl_debug
from ansible_collections.trainops.cluster.plugins.module_utils.nccl_tests.perf_text import parse_perf_output
from ansible_collections.trainops.cluster.plugins.plugin_utils.nccl_tests.bandwidth import link_limit_gbps
from ansible_collections.trainops.cluster.plugins.plugin_utils.nccl_tests.rung_verdict import busbw_curve, judge_rung
from helpers.nccl_fixtures import H200_NVLINK, last_row, real, variant


# ---------------------------------------------------------------- judge_rung

def test_judge_real_run_passes_at_73_percent_of_nvlink():
    result = parse_perf_output(real('all_reduce_perf.txt'))
    limit = link_limit_gbps(H200_NVLINK, {}, 'node')
    verdict = judge_rung(result, 2, ['vm'], min_busbw_gbps=0.6 * limit['limit_gbps'], limit=limit,
                         transports=parse_nccl_debug(real('all_reduce_perf_debug.txt')))
    assert verdict['passed'] is True
    assert verdict['reasons'] == []
    assert verdict['busbw_gbps'] == pytest.approx(348.6)
    assert verdict['size_bytes'] == 8589934592
    assert verdict['pct_of_limit'] == pytest.approx(72.9)
    assert verdict['transports'] == ['P2P/direct']


def test_judge_threshold_reason_wording():
    result = parse_perf_output(real('all_reduce_perf.txt'))
    slow = copy.deepcopy(result)
    last_row(slow)['in_place']['busbw'] = 40.1
    last_row(slow)['out_of_place']['busbw'] = 39.0
    limit = link_limit_gbps(H200_NVLINK, {}, 'node')
    verdict = judge_rung(slow, 2, ['vm'], min_busbw_gbps=250.0, limit=limit)
    assert verdict['passed'] is False
    assert verdict['reasons'] == ['busbw 40.1 GB/s < threshold 250.0 GB/s (52% of 478 GB/s NVLink)']
    assert verdict['pct_of_limit'] == pytest.approx(8.4)
    assert judge_rung(slow, 2, ['vm'], min_busbw_gbps=250.0)['reasons'] == ['busbw 40.1 GB/s < threshold 250.0 GB/s']


def test_judge_names_missing_ranks_and_hosts():
    result = parse_perf_output(variant('mpirun_2x8_tagged.txt'))
    verdict = judge_rung(result, 24, ['node1.cluster.local', 'node2', 'node3'])
    assert verdict['passed'] is False
    assert verdict['reasons'] == ['ranks 16-23 (node3) missing', 'host node3 missing: no rank ran there']
    dropped = copy.deepcopy(result)
    dropped['ranks'] = [entry for entry in dropped['ranks'] if entry['rank'] != 3]
    assert judge_rung(dropped, 16, ['node1', 'node2'])['reasons'] == ['rank 3 (node1) missing']
    assert judge_rung(dropped, [0, 1, 2, 3], None)['reasons'] == ['rank 3 missing', 'unexpected ranks 4-15']


def test_judge_placement_and_strangers():
    result = parse_perf_output(variant('socket_with_ib_debug.txt'))
    placement = {0: 'node1', 1: 'node1', '2': 'node2', 3: 'node3'}
    verdict = judge_rung(result, placement, ['node1', 'node3'])
    assert verdict['reasons'] == ['rank 3 ran on node2, expected node3', 'host node3 missing: no rank ran there',
                                  'ranks 2-3 ran on unexpected host node2']


def test_judge_wrong_values_and_unchecked_runs():
    verdict = judge_rung(parse_perf_output(variant('wrong_values.txt')), 2, ['vm'], min_busbw_gbps=100)
    assert verdict['reasons'] == ['12 wrong values (at 1048576, 2097152 B)']
    unchecked = parse_perf_output(real('all_reduce_perf.txt'))
    for row in unchecked['rows']:
        row['in_place']['wrong'] = row['out_of_place']['wrong'] = None
    unchecked['wrong_total'] = None
    assert judge_rung(unchecked, 2, ['vm'])['reasons'] == ['values not checked: the run had no data validation (-c 0)']
    assert judge_rung(unchecked, 2, ['vm'], require_validation=False)['passed'] is True


def test_judge_aborted_run():
    result = parse_perf_output(variant('mpirun_2x2_aborted.txt'))
    verdict = judge_rung(result, 4, ['node1', 'node2'], min_busbw_gbps=10)
    reasons = verdict['reasons']
    assert verdict['passed'] is False
    assert reasons[0] == 'MPI rank 3 (node2) exited on signal 9 (Killed)'
    assert reasons[1].startswith('error: [2026-11-30 02:14:07] node1:4102:4130 [1] transport/net_ib.cc:2543 NCCL WARN')
    assert '... and 6 more error lines' in reasons
    assert 'output incomplete: no end-of-run footer (aborted, killed or timed out; last size 67108864 B)' in reasons
    assert verdict['busbw_gbps'] == pytest.approx(67.15)


def test_judge_timeout_and_empty():
    verdict = judge_rung(parse_perf_output(variant('timeout_partial.txt')), 2, ['vm'], min_busbw_gbps=250)
    assert verdict['reasons'] == ['output incomplete: no end-of-run footer (aborted, killed or timed out; last size 4294967296 B)']
    assert verdict['busbw_gbps'] == pytest.approx(344.17)
    empty = judge_rung(parse_perf_output(''), None, None, min_busbw_gbps=1)
    assert empty['reasons'] == ['output incomplete: no end-of-run footer (aborted, killed or timed out)', 'no result rows',
                                'no busbw measured']
    assert empty['busbw_gbps'] is None
    assert empty['size_bytes'] is None


def test_judge_socket_while_ib_exists():
    text = variant('socket_with_ib_debug.txt')
    result = parse_perf_output(text)
    debug = parse_nccl_debug(text)
    assert judge_rung(result, 4, ['node1', 'node2'], transports=debug)['passed'] is True
    verdict = judge_rung(result, 4, ['node1', 'node2'], ib_present=['node2.cluster.local'], transports=debug)
    assert verdict['reasons'] == ['NET/Socket used although IB devices exist on node2']
    assert verdict['transports'] == ['NET/Socket', 'P2P/CUMEM']
    assert judge_rung(result, 4, None, ib_present=True, transports=debug)['reasons'] == [
        'NET/Socket used although IB devices exist on node1, node2']
    assert judge_rung(result, 4, None, ib_present=True, transports=['NET/Socket'])['reasons'] == [
        'NET/Socket used although IB devices exist']
    assert judge_rung(result, 4, None, ib_present=['node1'], transports=['NET/Socket'])['reasons'] == [
        'NET/Socket used although IB devices exist on node1']
    assert judge_rung(result, 4, None, ib_present=True, transports=['NET/IB'])['passed'] is True


def test_judge_socket_when_the_log_itself_lists_hcas():
    debug = parse_nccl_debug('\n'.join([
        'n1:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB eth0:10.0.0.1<0>',
        'n1:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0',
        'n2:2:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [receive] via NET/Socket/0',
    ]))
    result = parse_perf_output(real('all_reduce_perf.txt'))
    assert judge_rung(result, None, None, transports=debug)['reasons'] == ['NET/Socket used although IB devices exist on n1']


def test_judge_cpu_rung():
    result = parse_cpu_allreduce(variant('cpu_allreduce_3ranks.txt'))
    verdict = judge_rung(result, 3, ['node1', 'node2', 'node3'], min_busbw_gbps=0.1)
    assert verdict == {'passed': True, 'reasons': [], 'busbw_gbps': 0.143, 'size_bytes': 67108864, 'threshold_gbps': 0.1,
                       'limit_gbps': None, 'pct_of_limit': None, 'transports': None}
    assert judge_rung(result, 4, ['node1', 'node2', 'node3', 'node4'], min_busbw_gbps=0.5)['reasons'] == [
        'rank 3 (node4) missing', 'host node4 missing: no rank ran there', 'busbw 0.1 GB/s < threshold 0.5 GB/s']


def test_the_curve_takes_the_better_half_of_each_size_in_size_order():
    result = parse_perf_output(real('all_reduce_perf.txt'))
    curve = busbw_curve(result['rows'])
    assert [size for size, _busbw in curve] == sorted(row['size'] for row in result['rows'])
    largest = max(result['rows'], key=lambda row: row['size'])
    assert curve[-1][1] == max(largest['out_of_place']['busbw'], largest['in_place']['busbw'])
    assert busbw_curve([]) == [] and busbw_curve(None) == []
