# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import os

import pytest

from ansible_collections.trainops.cluster.plugins.module_utils.nccl_tests.cpu_allreduce import parse_cpu_allreduce
from ansible_collections.trainops.cluster.plugins.module_utils.nccl_tests.mpi_output import strip_mpi_tags
from ansible_collections.trainops.cluster.plugins.module_utils.nccl_tests.nccl_debug import parse_nccl_debug
from ansible_collections.trainops.cluster.plugins.module_utils.nccl_tests.perf_text import parse_perf_output
from helpers.nccl_fixtures import NODES, VARIANTS, real, variant


# ---------------------------------------------------------------- strip_mpi_tags

def test_strip_tags_tagged_streams_and_plain_lines():
    text = ('[1,0]<stdout>:# nccl-tests version 2.19.6\n'
            '[1,3]<stderr>:node2: Test NCCL failure common.cu:514\n'
            '[12,15]<stddiag>:diag\n'
            'mpirun noticed that process rank 3 with PID 0 on node node2 exited on signal 9 (Killed).\n')
    assert strip_mpi_tags(text) == [
        (0, 'stdout', '# nccl-tests version 2.19.6'),
        (3, 'stderr', 'node2: Test NCCL failure common.cu:514'),
        (15, 'stddiag', 'diag'),
        (None, None, 'mpirun noticed that process rank 3 with PID 0 on node node2 exited on signal 9 (Killed).'),
    ]


def test_strip_tags_with_timestamps():
    text = ('Sun Nov 29 22:41:10 2026[1,2]<stdout>:  hello\n'
            'Sun Nov  9 02:41:10 2026<stderr>:no tag, only time\n')
    assert strip_mpi_tags(text) == [(2, 'stdout', '  hello'), (None, 'stderr', 'no tag, only time')]


def test_strip_tags_joins_a_line_forwarded_in_two_chunks():
    # Open MPI 4.1 tags each forwarded chunk; rank 0's row was flushed in two pieces with rank 1's line in between.
    text = ('[1,0]<stdout>:     1048576        262144     float     sum[1,1]<stdout>:node1:1:1 [1] NCCL INFO x\n'
            '[1,0]<stdout>:      -1    15.30   68.54   68.54       0    15.89   65.98   65.98       0\n')
    lines = strip_mpi_tags(text)
    assert lines[0] == (1, 'stdout', 'node1:1:1 [1] NCCL INFO x')
    assert lines[1][0] == 0
    assert lines[1][2].split() == ['1048576', '262144', 'float', 'sum', '-1', '15.30', '68.54', '68.54', '0',
                                   '15.89', '65.98', '65.98', '0']


def test_strip_tags_keeps_untagged_text_before_a_tag_and_unfinished_pieces():
    lines = strip_mpi_tags('WARNING: x[1,0]<stdout>:abc[1,0]<stdout>:def\n[1,4]<stdout>:cut off')
    assert lines == [(None, None, 'WARNING: x'), (0, 'stdout', 'abcdef'), (4, 'stdout', 'cut off')]
    assert strip_mpi_tags('') == []
    assert strip_mpi_tags(None) == []


# ---------------------------------------------------------------- srun --label

def srun_labelled(text):
    """The same output as `srun --label` prints it: each rank's lines behind its task number, right-aligned to the
    widest (" 0: ", "15: "); lines no rank wrote (the launcher's own) unlabelled."""
    lines = strip_mpi_tags(text)
    width = len(str(max([rank for rank, _stream, _line in lines if rank is not None] or [0])))
    return ''.join('%*d: %s\n' % (width, rank, line) if rank is not None else line + '\n' for rank, _stream, line in lines)


def test_srun_label_strips_the_task_number():
    assert strip_mpi_tags(' 0: # nccl-tests version 2.19.6\n12: NCCL WARN x\nsrun: error: node2: task 12: Exited') == [
        (0, None, '# nccl-tests version 2.19.6'), (12, None, 'NCCL WARN x'), (None, None, 'srun: error: node2: task 12: Exited')]


@pytest.mark.parametrize('path', [os.path.join(VARIANTS, 'mpirun_2x8_tagged.txt'), os.path.join(NODES, 'all_nodes.txt'),
                                  os.path.join(VARIANTS, 'mpirun_2x2_aborted.txt')], ids=['2x8', 'four_nodes', '2x2_aborted'])
def test_srun_labelled_output_parses_like_mpirun_tagged(path):
    """The recorded (and derived) mpirun --tag-output runs, relabelled as srun --label prints them, give the same result."""
    with open(path) as f:
        tagged = f.read()
    labelled = srun_labelled(tagged)
    assert labelled.startswith(' 0: ' if 'mpirun_2x8' in path else '0: ') and '[1,' not in labelled
    result = parse_perf_output(labelled)
    assert result == parse_perf_output(tagged) and result['rows']
    assert parse_nccl_debug(labelled) == parse_nccl_debug(tagged)


def test_srun_labelled_plain_and_cpu_outputs_parse_alike():
    plain = real('all_reduce_perf.txt')
    one_task = ''.join('0: ' + line for line in plain.splitlines(True))
    assert parse_perf_output(one_task) == parse_perf_output(plain) and len(parse_perf_output(one_task)['rows']) == 31
    cpu = variant('cpu_allreduce_3ranks.txt')
    assert parse_cpu_allreduce(srun_labelled(cpu)) == parse_cpu_allreduce(cpu)
