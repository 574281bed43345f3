# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import pytest

from ansible_collections.trainops.cluster.plugins.module_utils.nccl_tests.perf_help import help_problem, help_supports_json


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
    assert help_supports_json(text) is expected


@pytest.mark.parametrize('rc, output, timed_out, expected', [
    (0, USAGE_WITH_J, False, None),
    (1, "invalid option 'q'\n" + USAGE_WITHOUT_J, False, None),
    (127, 'all_reduce_perf: error while loading shared libraries: libmpi.so.40: cannot open shared object file\n\n', False,
     'exited with rc 127: all_reduce_perf: error while loading shared libraries: libmpi.so.40: cannot open shared object file'),
    (-11, '', False, 'exited with rc -11 and printed nothing'),
    (124, 'USAGE: all_reduce_perf', True, '-h did not finish within 30 s'),
])
def test_help_problem(rc, output, timed_out, expected):
    assert help_problem(rc, output, timed_out, 30) == expected


def test_help_problem_cuts_a_long_last_line():
    assert help_problem(2, 'x' * 1000, False, 30) == 'exited with rc 2: ' + 'x' * 300
