# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import copy
import json
import os

import pytest

from ansible_collections.trainops.cluster.plugins.module_utils import gpu
from ansible_collections.trainops.cluster.plugins.module_utils import nccl_tests as nt

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..', '..'))
REAL = os.path.join(ROOT, 'tests', 'fixtures', 'gpu', 'h200x2')
VARIANTS = os.path.join(ROOT, 'tests', 'fixtures', 'nccl_tests')
NODES = os.path.join(ROOT, 'tests', 'fixtures', 'gpu', 'h200x2-nodes')

H200_NVLINK = {'nvlink': {'links_per_gpu': 18, 'link_speed_gbps': 26.562, 'bandwidth_gbps_per_gpu': 478.116}}


def real(name):
    with open(os.path.join(REAL, name)) as f:
        return f.read()


def variant(name):
    with open(os.path.join(VARIANTS, name)) as f:
        return f.read()


def last_row(result):
    return result['rows'][-1]


# ---------------------------------------------------------------- strip_mpi_tags

def test_strip_tags_tagged_streams_and_plain_lines():
    text = ('[1,0]<stdout>:# nccl-tests version 2.19.6\n'
            '[1,3]<stderr>:node2: Test NCCL failure common.cu:514\n'
            '[12,15]<stddiag>:diag\n'
            'mpirun noticed that process rank 3 with PID 0 on node node2 exited on signal 9 (Killed).\n')
    assert nt.strip_mpi_tags(text) == [
        (0, 'stdout', '# nccl-tests version 2.19.6'),
        (3, 'stderr', 'node2: Test NCCL failure common.cu:514'),
        (15, 'stddiag', 'diag'),
        (None, None, 'mpirun noticed that process rank 3 with PID 0 on node node2 exited on signal 9 (Killed).'),
    ]


def test_strip_tags_with_timestamps():
    text = ('Sun Nov 29 22:41:10 2026[1,2]<stdout>:  hello\n'
            'Sun Nov  9 02:41:10 2026<stderr>:no tag, only time\n')
    assert nt.strip_mpi_tags(text) == [(2, 'stdout', '  hello'), (None, 'stderr', 'no tag, only time')]


def test_strip_tags_joins_a_line_forwarded_in_two_chunks():
    # Open MPI 4.1 tags each forwarded chunk; rank 0's row was flushed in two pieces with rank 1's line in between.
    text = ('[1,0]<stdout>:     1048576        262144     float     sum[1,1]<stdout>:node1:1:1 [1] NCCL INFO x\n'
            '[1,0]<stdout>:      -1    15.30   68.54   68.54       0    15.89   65.98   65.98       0\n')
    lines = nt.strip_mpi_tags(text)
    assert lines[0] == (1, 'stdout', 'node1:1:1 [1] NCCL INFO x')
    assert lines[1][0] == 0
    assert lines[1][2].split() == ['1048576', '262144', 'float', 'sum', '-1', '15.30', '68.54', '68.54', '0',
                                   '15.89', '65.98', '65.98', '0']


def test_strip_tags_keeps_untagged_text_before_a_tag_and_unfinished_pieces():
    lines = nt.strip_mpi_tags('WARNING: x[1,0]<stdout>:abc[1,0]<stdout>:def\n[1,4]<stdout>:cut off')
    assert lines == [(None, None, 'WARNING: x'), (0, 'stdout', 'abcdef'), (4, 'stdout', 'cut off')]
    assert nt.strip_mpi_tags('') == []
    assert nt.strip_mpi_tags(None) == []


# ---------------------------------------------------------------- parse_perf_output: real outputs

def test_real_all_reduce_perf():
    result = nt.parse_perf_output(real('all_reduce_perf.txt'))
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
    result = nt.parse_perf_output(real('all_reduce_perf_debug.txt'))
    assert [row['size'] for row in result['rows']] == [1048576, 4194304, 16777216, 67108864]
    assert last_row(result)['in_place']['busbw'] == pytest.approx(269.98)
    assert result['params']['step'] == 4
    assert result['avg_busbw'] == pytest.approx(163.476)
    assert result['errors'] == []
    assert result['complete'] is True


def test_real_four_nodes_tagged_and_interleaved():
    with open(os.path.join(NODES, 'all_nodes.txt')) as f:
        text = f.read()
    result = nt.parse_perf_output(text)
    assert [(entry['rank'], entry['host'], entry['busid']) for entry in result['ranks']] == [
        (0, 'gpu1', '0000:00:06'), (1, 'gpu2', '0000:00:07'), (2, 'gpu3', '0000:00:06'), (3, 'gpu4', '0000:00:07')]
    assert (result['params']['ngpus'], result['params']['max_bytes']) == (1, 268435456)
    # 8 B to 256 MiB, every row kept although the NCCL lines of ranks 1-3 come between rank 0's rows.
    assert [row['size'] for row in result['rows']] == [8 * 2 ** i for i in range(26)]
    assert last_row(result)['out_of_place'] == {'time_us': 245358.0, 'algbw': 1.09, 'busbw': 1.64, 'wrong': 0}
    assert (result['wrong_total'], result['complete'], result['errors']) == (0, True, [])
    info = nt.parse_nccl_debug(text)
    assert info['hosts'] == ['gpu1', 'gpu2', 'gpu3', 'gpu4']
    assert (info['transports'], info['networks'], info['nranks'], info['nnodes']) == (['NET/Socket'], ['Socket'], 4, 4)
    assert info['ib_no_device_hosts'] == ['gpu1', 'gpu2', 'gpu3', 'gpu4']
    assert sorted(info['socket_interfaces']) == ['train0:10.77.0.1%d<0>' % node for node in range(1, 5)]


def srun_labelled(text):
    """The same output as `srun --label` prints it: each rank's lines behind its task number, right-aligned to the
    widest (" 0: ", "15: "); lines no rank wrote (the launcher's own) unlabelled."""
    lines = nt.strip_mpi_tags(text)
    width = len(str(max([rank for rank, _stream, _line in lines if rank is not None] or [0])))
    return ''.join('%*d: %s\n' % (width, rank, line) if rank is not None else line + '\n' for rank, _stream, line in lines)


def test_srun_label_strips_the_task_number():
    assert nt.strip_mpi_tags(' 0: # nccl-tests version 2.19.6\n12: NCCL WARN x\nsrun: error: node2: task 12: Exited') == [
        (0, None, '# nccl-tests version 2.19.6'), (12, None, 'NCCL WARN x'), (None, None, 'srun: error: node2: task 12: Exited')]


@pytest.mark.parametrize('path', [os.path.join(VARIANTS, 'mpirun_2x8_tagged.txt'), os.path.join(NODES, 'all_nodes.txt'),
                                  os.path.join(VARIANTS, 'mpirun_2x2_aborted.txt')], ids=['2x8', 'four_nodes', '2x2_aborted'])
def test_srun_labelled_output_parses_like_mpirun_tagged(path):
    """The recorded (and derived) mpirun --tag-output runs, relabelled as srun --label prints them, give the same result."""
    with open(path) as f:
        tagged = f.read()
    labelled = srun_labelled(tagged)
    assert labelled.startswith(' 0: ' if 'mpirun_2x8' in path else '0: ') and '[1,' not in labelled
    result = nt.parse_perf_output(labelled)
    assert result == nt.parse_perf_output(tagged) and result['rows']
    assert nt.parse_nccl_debug(labelled) == nt.parse_nccl_debug(tagged)


def test_srun_labelled_plain_and_cpu_outputs_parse_alike():
    plain = real('all_reduce_perf.txt')
    one_task = ''.join('0: ' + line for line in plain.splitlines(True))
    assert nt.parse_perf_output(one_task) == nt.parse_perf_output(plain) and len(nt.parse_perf_output(one_task)['rows']) == 31
    cpu = variant('cpu_allreduce_3ranks.txt')
    assert nt.parse_cpu_allreduce(srun_labelled(cpu)) == nt.parse_cpu_allreduce(cpu)


# ---------------------------------------------------------------- parse_perf_output: variants

def test_tagged_two_nodes_by_eight():
    result = nt.parse_perf_output(variant('mpirun_2x8_tagged.txt'))
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
    result = nt.parse_perf_output(variant('wrong_values.txt'))
    wrong = dict((row['size'], (row['out_of_place']['wrong'], row['in_place']['wrong'])) for row in result['rows'])
    assert wrong[1048576] == (0, 4)
    assert wrong[2097152] == (8, 0)
    assert result['wrong_total'] == 12
    assert result['out_of_bounds'] == 2
    assert result['complete'] is True


def test_aborted_run():
    result = nt.parse_perf_output(variant('mpirun_2x2_aborted.txt'))
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


def test_timeout_killed_partial_output():
    result = nt.parse_perf_output(variant('timeout_partial.txt'))
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
    result = nt.parse_perf_output(text)
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
    assert nt.parse_perf_output(text)['wrong_total'] is None
    assert nt.parse_perf_output('')['wrong_total'] is None


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
    result = nt.parse_perf_output(text)
    assert result['json_output'] == '/tmp/ar.json.1'
    assert result['notes'] == ['# Reducing maxBytes to 4294967296 due to memory limitation']
    assert result['failed_processes'] == [
        {'rank': None, 'host': 'node2', 'pid': 5202, 'signal': 11, 'signal_name': 'Segmentation fault', 'exit_code': None},
        {'rank': 2, 'host': None, 'pid': None, 'signal': None, 'signal_name': None, 'exit_code': 3},
    ]
    assert len(result['errors']) == 4


# ---------------------------------------------------------------- parse_perf_json

def test_json_output_matches_the_text_output_of_the_same_run():
    result = nt.parse_perf_json(variant('all_reduce_perf.json'))
    text = nt.parse_perf_output(real('all_reduce_perf.txt'))
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
    result = nt.parse_perf_json(variant('all_reduce_perf_truncated.json'))
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
    result = nt.parse_perf_json(json.dumps(doc))
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
    result = nt.parse_perf_json(text)
    assert result['complete'] is False
    assert result['rows'] == []
    assert result['errors'] == ['nccl-tests JSON output could not be read (empty or not JSON)']


# ---------------------------------------------------------------- help_supports_json, help_problem

# The -h usage text of nccl-tests 2.19 (src/common.cu), cut to the lines around -J.
USAGE_WITH_J = (
    'USAGE: all_reduce_perf \n\t[-t,--nthreads <num threads>] \n\t[-C,--report_cputime <0/1>] \n\t'
    '[-J,--output_file <file> write output to filepath, if accessible. Infer type from suffix (only json supported presently.)] \n\t'
    '[-h,--help]\n')
USAGE_WITHOUT_J = 'USAGE: all_reduce_perf \n\t[-t,--nthreads <num threads>] \n\t[-C,--report_cputime <0/1>] \n\t[-h,--help]\n'
# Builds exist whose --output_file is -F and writes CSV: that is not -J.
USAGE_CSV_F = 'USAGE: all_reduce_perf \n\t[-F,--output_file <CSV file path> Export results to CSV file on rank 0.] \n\t[-h,--help]\n'


@pytest.mark.parametrize('text, expected', [
    (USAGE_WITH_J, True),
    (USAGE_WITHOUT_J, False),
    (USAGE_CSV_F, False),
    ('', False),
    (None, False),
])
def test_help_supports_json(text, expected):
    assert nt.help_supports_json(text) is expected


@pytest.mark.parametrize('rc, output, timed_out, expected', [
    (0, USAGE_WITH_J, False, None),
    (1, "invalid option 'q'\n" + USAGE_WITHOUT_J, False, None),
    (127, 'all_reduce_perf: error while loading shared libraries: libmpi.so.40: cannot open shared object file\n\n', False,
     'exited with rc 127: all_reduce_perf: error while loading shared libraries: libmpi.so.40: cannot open shared object file'),
    (-11, '', False, 'exited with rc -11 and printed nothing'),
    (124, 'USAGE: all_reduce_perf', True, '-h did not finish within 30 s'),
])
def test_help_problem(rc, output, timed_out, expected):
    assert nt.help_problem(rc, output, timed_out, 30) == expected


def test_help_problem_cuts_a_long_last_line():
    assert nt.help_problem(2, 'x' * 1000, False, 30) == 'exited with rc 2: ' + 'x' * 300


# ---------------------------------------------------------------- parse_nccl_debug

def test_debug_real_single_process():
    info = nt.parse_nccl_debug(real('all_reduce_perf_debug.txt'))
    assert info['nccl_version'] == '2.28.9'
    assert info['nccl_cuda'] == '13.0'
    assert info['hosts'] == ['vm']
    # One process, two GPUs: NCCL connects them by direct pointer over NVLink.
    assert info['transports'] == ['P2P/direct']
    assert info['transports_by_host'] == {'vm': ['P2P/direct']}
    # A single-node run still chooses a network; it carries nothing.
    assert info['networks'] == ['Socket']
    assert info['channels'] == 24
    assert info['nvls_channels'] == 0
    assert info['socket_interfaces'] == ['eth0:192.0.2.2<0>']
    assert info['bootstrap_interfaces'] == ['eth0:192.0.2.2<0>']
    assert info['ib_devices'] == []
    assert info['ib_devices_by_host'] == {}
    assert info['ib_no_device'] is True
    assert info['ib_no_device_hosts'] == ['vm']
    assert info['net_plugin'] == {'loaded': False, 'name': None, 'messages': ['NET/Plugin: Could not find: libnccl-net.so']}
    assert info['warnings'] == []
    assert info['ranks'] == [{'rank': 0, 'host': 'vm', 'pid': 1439, 'cuda_dev': 0, 'bus_id': '60'},
                             {'rank': 1, 'host': 'vm', 'pid': 1439, 'cuda_dev': 1, 'bus_id': '70'}]
    assert info['nranks'] == 2
    assert info['nnodes'] == 1


def test_debug_real_torch_two_processes():
    info = nt.parse_nccl_debug(real('torch_allreduce.txt'))
    assert info['nccl_version'] == '2.28.9'
    assert info['transports'] == ['P2P/CUMEM']
    assert [(entry['rank'], entry['pid']) for entry in info['ranks']] == [(0, 1506), (1, 1507)]
    assert info['nnodes'] == 1
    assert info['channels'] == 24


def test_debug_two_nodes_over_infiniband():
    info = nt.parse_nccl_debug(variant('mpirun_2x8_tagged.txt'))
    assert info['hosts'] == ['node1', 'node2']
    assert info['transports'] == ['NET/IB', 'P2P/CUMEM']
    assert info['transports_by_host'] == {'node1': ['NET/IB', 'P2P/CUMEM'], 'node2': ['NET/IB', 'P2P/CUMEM']}
    assert info['networks'] == ['IB']
    assert info['ib_devices'] == ['mlx5_%d:1/IB' % index for index in range(8)]
    assert sorted(info['ib_devices_by_host']) == ['node1', 'node2']
    assert info['ib_no_device'] is False
    assert info['socket_interfaces'] == []
    assert info['channels'] == 16
    assert info['nranks'] == 16
    assert info['nnodes'] == 2
    assert [entry['host'] for entry in info['ranks']] == ['node1'] * 8 + ['node2'] * 8
    assert info['ranks'][8] == {'rank': 8, 'host': 'node2', 'pid': 5201, 'cuda_dev': 0, 'bus_id': '18000'}


def test_debug_socket_although_nodes_have_hcas():
    info = nt.parse_nccl_debug(variant('socket_with_ib_debug.txt'))
    assert info['transports'] == ['NET/Socket', 'P2P/CUMEM']
    assert info['networks'] == ['Socket']
    assert info['ib_no_device_hosts'] == ['node1', 'node2']
    assert info['socket_interfaces'] == ['eth0:10.0.0.1<0>', 'eth1:10.1.0.1<0>', 'eth0:10.0.0.2<0>', 'eth1:10.1.0.2<0>']


def test_debug_aborted_warning_lines():
    info = nt.parse_nccl_debug(variant('mpirun_2x2_aborted.txt'))
    assert len(info['warnings']) == 1
    assert info['warnings'][0].startswith('[2026-11-30 02:14:07] node1:4102:4130 [1] transport/net_ib.cc:2543 NCCL WARN NET/IB')


def test_debug_other_transports_and_plugins():
    text = '\n'.join([
        'a:1:1 [0] NCCL INFO NET/Plugin: Loaded net plugin NCCL RDMA Plugin v8 (v8)',
        'a:1:1 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct',
        'a:1:1 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via P2P/IPC/read',
        'a:1:1 [0] NCCL INFO Channel 02/0 : 0[0] -> 2[0] [send] via NET/AWS Libfabric/0/GDRDMA',
        'a:1:1 [0] NCCL INFO Channel 03/0 : 0[0] -> 2[0] [send] via NET/IB/1(3)/GDRDMA/Shared',
        'b:2:2 [0] NCCL INFO CollNet 00/0 : 2 [receive] via COLLNET/SHARP/0/GDRDMA',
        'b:2:2 [0] NCCL INFO 32 coll channels, 32 collnet channels, 16 nvls channels, 32 p2p channels, 32 p2p channels per peer',
        'c:3:3 [0] NCCL INFO Connected NVLS tree',
        'c:3:3 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1:0/IB ; OOB bond0:10.0.0.3<0>',
    ])
    info = nt.parse_nccl_debug(text)
    assert info['transports'] == ['CollNet', 'NET/AWS Libfabric', 'NET/IB', 'NVLS', 'P2P/IPC', 'SHM']
    assert info['transports_by_host'] == {'a': ['NET/AWS Libfabric', 'NET/IB', 'P2P/IPC', 'SHM'], 'b': ['CollNet', 'NVLS'], 'c': ['NVLS']}
    assert info['nvls_channels'] == 16
    assert info['channels'] == 32
    assert info['net_plugin']['loaded'] is True
    assert info['net_plugin']['name'] == 'NCCL RDMA Plugin v8'
    assert info['ib_devices_by_host'] == {'c': ['mlx5_0:1/RoCE', 'mlx5_1:1:0/IB']}
    assert info['nccl_version'] is None
    assert info['ranks'] == []


# ---------------------------------------------------------------- parse_cpu_allreduce

def test_cpu_rung_fixture():
    result = nt.parse_cpu_allreduce(variant('cpu_allreduce_3ranks.txt'))
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
    result = nt.parse_cpu_allreduce(text)
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
    result = nt.parse_cpu_allreduce('mpirun was unable to launch the specified application\n')
    assert result['rows'] == []
    assert result['complete'] is False
    assert result['params']['nranks'] is None
    verdict = nt.judge_rung(result, 3, ['node1', 'node2', 'node3'])
    assert 'ranks 0-2 missing' not in verdict['reasons']
    assert 'rank 0 (node1) missing' in verdict['reasons']
    assert 'no result rows' in verdict['reasons']


# ---------------------------------------------------------------- link_limit_gbps

def test_limit_single_gpu():
    assert nt.link_limit_gbps(H200_NVLINK, {}, 'gpu')['limit_gbps'] is None


def test_limit_nvlink_h200():
    limit = nt.link_limit_gbps(H200_NVLINK, None, 'node')
    assert limit['limit_gbps'] == pytest.approx(478.1)
    assert limit['kind'] == 'NVLink'
    assert '18 links x 26.562 GB/s' in limit['basis']
    computed = nt.link_limit_gbps({'nvlink': {'links_per_gpu': 18, 'link_speed_gbps': 26.562}}, None, 'node')
    assert computed['limit_gbps'] == pytest.approx(478.1)


def test_limit_pcie_and_unknown_node():
    limit = nt.link_limit_gbps({'nvlink': None, 'pcie': {'gen': 5, 'width': 16}}, None, 'node')
    assert limit['limit_gbps'] == pytest.approx(63.0)
    assert limit['kind'] == 'PCIe'
    assert nt.link_limit_gbps({'nvlink': {'links_per_gpu': 0, 'link_speed_gbps': None}}, None, 'node')['limit_gbps'] is None
    assert nt.link_limit_gbps(None, None, 'node') == {'limit_gbps': None, 'basis': 'no NVLink or PCIe link facts for this node', 'kind': None}


def test_limit_pcie_from_gathered_facts_of_a_pcie_node():
    """4x L40S without NVLink (variant fixture): the limit comes from the PCIe link gpu_facts reads from the XML."""
    pcie_node = os.path.join(ROOT, 'tests', 'fixtures', 'gpu', 'variants', 'l40sx4-pcie')
    with open(os.path.join(pcie_node, 'nvidia-smi-q.xml')) as xml, open(os.path.join(pcie_node, 'nvlink-s.txt')) as nvlink:
        facts = gpu.gather(smi_xml=xml.read(), nvlink=nvlink.read())
    limit = nt.link_limit_gbps(facts, None, 'node')
    assert (limit['limit_gbps'], limit['kind']) == (63.0, 'PCIe')


def test_limit_infiniband_counts_active_ports_only():
    ports = [{'device': 'mlx5_%d' % index, 'port': 1, 'state': 'ACTIVE', 'rate_gbps': 400.0, 'link_layer': 'InfiniBand'}
             for index in range(8)]
    ports.append({'device': 'mlx5_8', 'port': 1, 'state': 'DOWN', 'rate_gbps': 400.0, 'link_layer': 'InfiniBand'})
    ports.append({'device': 'mlx5_9', 'port': 1, 'state': '4: ACTIVE', 'rate_gbps': None, 'link_layer': 'InfiniBand'})
    limit = nt.link_limit_gbps(H200_NVLINK, {'infiniband': ports}, 'multi_node')
    assert limit['limit_gbps'] == pytest.approx(400.0)
    assert limit['kind'] == 'InfiniBand'
    assert limit['basis'].startswith('8 active InfiniBand ports (mlx5_0:1 400 Gb/s')
    assert limit['basis'].endswith('= 3200 Gb/s = 400.0 GB/s')


def test_limit_roce_and_ethernet():
    roce = [{'device': 'mlx5_0', 'port': 1, 'state': '4: ACTIVE', 'rate_gbps': 200.0, 'link_layer': 'Ethernet'}]
    limit = nt.link_limit_gbps({}, {'infiniband': roce}, 'multi_node')
    assert (limit['limit_gbps'], limit['kind']) == (25.0, 'RoCE')
    nics = [{'name': 'lo', 'state': 'UNKNOWN', 'speed_mbps': 100000}, {'name': 'eth0', 'state': 'UP', 'speed_mbps': 25000},
            {'name': 'eth1', 'state': 'DOWN', 'speed_mbps': 100000}, {'name': 'eth2', 'state': 'UP', 'speed_mbps': -1}]
    limit = nt.link_limit_gbps({}, {'infiniband': [], 'interfaces': nics}, 'multi_node')
    assert limit['limit_gbps'] == pytest.approx(3.1)
    assert limit['kind'] == 'Ethernet'
    assert limit['basis'].startswith('Ethernet eth0 at 25000 Mb/s')
    assert nt.link_limit_gbps({}, {}, 'multi_node')['limit_gbps'] is None


def test_limit_bad_scope():
    with pytest.raises(ValueError):
        nt.link_limit_gbps({}, {}, 'rack')


# ---------------------------------------------------------------- judge_rung

def test_judge_real_run_passes_at_73_percent_of_nvlink():
    result = nt.parse_perf_output(real('all_reduce_perf.txt'))
    limit = nt.link_limit_gbps(H200_NVLINK, {}, 'node')
    verdict = nt.judge_rung(result, 2, ['vm'], min_busbw_gbps=0.6 * limit['limit_gbps'], limit=limit,
                            transports=nt.parse_nccl_debug(real('all_reduce_perf_debug.txt')))
    assert verdict['passed'] is True
    assert verdict['reasons'] == []
    assert verdict['busbw_gbps'] == pytest.approx(348.6)
    assert verdict['size_bytes'] == 8589934592
    assert verdict['pct_of_limit'] == pytest.approx(72.9)
    assert verdict['transports'] == ['P2P/direct']


def test_judge_threshold_reason_wording():
    result = nt.parse_perf_output(real('all_reduce_perf.txt'))
    slow = copy.deepcopy(result)
    last_row(slow)['in_place']['busbw'] = 40.1
    last_row(slow)['out_of_place']['busbw'] = 39.0
    limit = nt.link_limit_gbps(H200_NVLINK, {}, 'node')
    verdict = nt.judge_rung(slow, 2, ['vm'], min_busbw_gbps=250.0, limit=limit)
    assert verdict['passed'] is False
    assert verdict['reasons'] == ['busbw 40.1 GB/s < threshold 250.0 GB/s (52% of 478 GB/s NVLink)']
    assert verdict['pct_of_limit'] == pytest.approx(8.4)
    assert nt.judge_rung(slow, 2, ['vm'], min_busbw_gbps=250.0)['reasons'] == ['busbw 40.1 GB/s < threshold 250.0 GB/s']


def test_judge_names_missing_ranks_and_hosts():
    result = nt.parse_perf_output(variant('mpirun_2x8_tagged.txt'))
    verdict = nt.judge_rung(result, 24, ['node1.cluster.local', 'node2', 'node3'])
    assert verdict['passed'] is False
    assert verdict['reasons'] == ['ranks 16-23 (node3) missing', 'host node3 missing: no rank ran there']
    dropped = copy.deepcopy(result)
    dropped['ranks'] = [entry for entry in dropped['ranks'] if entry['rank'] != 3]
    assert nt.judge_rung(dropped, 16, ['node1', 'node2'])['reasons'] == ['rank 3 (node1) missing']
    assert nt.judge_rung(dropped, [0, 1, 2, 3], None)['reasons'] == ['rank 3 missing', 'unexpected ranks 4-15']


def test_judge_placement_and_strangers():
    result = nt.parse_perf_output(variant('socket_with_ib_debug.txt'))
    placement = {0: 'node1', 1: 'node1', '2': 'node2', 3: 'node3'}
    verdict = nt.judge_rung(result, placement, ['node1', 'node3'])
    assert verdict['reasons'] == ['rank 3 ran on node2, expected node3', 'host node3 missing: no rank ran there',
                                  'ranks 2-3 ran on unexpected host node2']


def test_judge_wrong_values_and_unchecked_runs():
    verdict = nt.judge_rung(nt.parse_perf_output(variant('wrong_values.txt')), 2, ['vm'], min_busbw_gbps=100)
    assert verdict['reasons'] == ['12 wrong values (at 1048576, 2097152 B)']
    unchecked = nt.parse_perf_output(real('all_reduce_perf.txt'))
    for row in unchecked['rows']:
        row['in_place']['wrong'] = row['out_of_place']['wrong'] = None
    unchecked['wrong_total'] = None
    assert nt.judge_rung(unchecked, 2, ['vm'])['reasons'] == ['values not checked: the run had no data validation (-c 0)']
    assert nt.judge_rung(unchecked, 2, ['vm'], require_validation=False)['passed'] is True


def test_judge_aborted_run():
    result = nt.parse_perf_output(variant('mpirun_2x2_aborted.txt'))
    verdict = nt.judge_rung(result, 4, ['node1', 'node2'], min_busbw_gbps=10)
    reasons = verdict['reasons']
    assert verdict['passed'] is False
    assert reasons[0] == 'MPI rank 3 (node2) exited on signal 9 (Killed)'
    assert reasons[1].startswith('error: [2026-11-30 02:14:07] node1:4102:4130 [1] transport/net_ib.cc:2543 NCCL WARN')
    assert '... and 6 more error lines' in reasons
    assert 'output incomplete: no end-of-run footer (aborted, killed or timed out; last size 67108864 B)' in reasons
    assert verdict['busbw_gbps'] == pytest.approx(67.15)


def test_judge_timeout_and_empty():
    verdict = nt.judge_rung(nt.parse_perf_output(variant('timeout_partial.txt')), 2, ['vm'], min_busbw_gbps=250)
    assert verdict['reasons'] == ['output incomplete: no end-of-run footer (aborted, killed or timed out; last size 4294967296 B)']
    assert verdict['busbw_gbps'] == pytest.approx(344.17)
    empty = nt.judge_rung(nt.parse_perf_output(''), None, None, min_busbw_gbps=1)
    assert empty['reasons'] == ['output incomplete: no end-of-run footer (aborted, killed or timed out)', 'no result rows',
                                'no busbw measured']
    assert empty['busbw_gbps'] is None
    assert empty['size_bytes'] is None


def test_judge_socket_while_ib_exists():
    text = variant('socket_with_ib_debug.txt')
    result = nt.parse_perf_output(text)
    debug = nt.parse_nccl_debug(text)
    assert nt.judge_rung(result, 4, ['node1', 'node2'], transports=debug)['passed'] is True
    verdict = nt.judge_rung(result, 4, ['node1', 'node2'], ib_present=['node2.cluster.local'], transports=debug)
    assert verdict['reasons'] == ['NET/Socket used although IB devices exist on node2']
    assert verdict['transports'] == ['NET/Socket', 'P2P/CUMEM']
    assert nt.judge_rung(result, 4, None, ib_present=True, transports=debug)['reasons'] == [
        'NET/Socket used although IB devices exist on node1, node2']
    assert nt.judge_rung(result, 4, None, ib_present=True, transports=['NET/Socket'])['reasons'] == [
        'NET/Socket used although IB devices exist']
    assert nt.judge_rung(result, 4, None, ib_present=['node1'], transports=['NET/Socket'])['reasons'] == [
        'NET/Socket used although IB devices exist on node1']
    assert nt.judge_rung(result, 4, None, ib_present=True, transports=['NET/IB'])['passed'] is True


def test_judge_socket_when_the_log_itself_lists_hcas():
    debug = nt.parse_nccl_debug('\n'.join([
        'n1:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB eth0:10.0.0.1<0>',
        'n1:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0',
        'n2:2:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [receive] via NET/Socket/0',
    ]))
    result = nt.parse_perf_output(real('all_reduce_perf.txt'))
    assert nt.judge_rung(result, None, None, transports=debug)['reasons'] == ['NET/Socket used although IB devices exist on n1']


def test_judge_cpu_rung():
    result = nt.parse_cpu_allreduce(variant('cpu_allreduce_3ranks.txt'))
    verdict = nt.judge_rung(result, 3, ['node1', 'node2', 'node3'], min_busbw_gbps=0.1)
    assert verdict == {'passed': True, 'reasons': [], 'busbw_gbps': 0.143, 'size_bytes': 67108864, 'threshold_gbps': 0.1,
                       'limit_gbps': None, 'pct_of_limit': None, 'transports': None}
    assert nt.judge_rung(result, 4, ['node1', 'node2', 'node3', 'node4'], min_busbw_gbps=0.5)['reasons'] == [
        'rank 3 (node4) missing', 'host node4 missing: no rank ran there', 'busbw 0.1 GB/s < threshold 0.5 GB/s']
