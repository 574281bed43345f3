# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""nccl_tests_state end to end: a fake node tree (NCCL behind links, an all_reduce_perf script, a stamp) under the real `timeout`."""

from __future__ import annotations

import os

import pytest

from ansible_collections.trainops.cluster.plugins.modules import nccl_tests_state
import helpers.modules
from helpers.modules import script

USAGE_WITH_J = ('USAGE: all_reduce_perf \n\t[-t,--nthreads <num threads>] \n\t'
                '[-J,--output_file <file> write output to filepath, if accessible. Infer type from suffix (only json supported presently.)] \n\t'
                '[-h,--help]\n')
USAGE_WITHOUT_J = 'USAGE: all_reduce_perf \n\t[-t,--nthreads <num threads>] \n\t[-h,--help]\n'
STAMP = 'source: git https://github.com/NVIDIA/nccl-tests.git v2.19.6\nnccl: /x/libnccl.so.2 3 1.5\ncuda: /usr/local/cuda 13.0\nmpi: /usr\n'


def usage_script(path, usage, rc=0):
    """all_reduce_perf stand-in: -h prints the usage on stdout, as nccl-tests does, and exits with rc."""
    text = path.parent / (path.name + '.usage')
    path.parent.mkdir(parents=True, exist_ok=True)
    text.write_text(usage)
    return script(path, '[ "$1" = -h ] || exit 9\ncat %s\nexit %d' % (text, rc))


@pytest.fixture
def node(tmp_path):
    """pip NCCL: site/nvidia/nccl/lib/libnccl.so.2 -> libnccl.so.2.28.9; system: a plain libnccl.so.2; a built all_reduce_perf."""
    pip_lib = tmp_path / 'site' / 'nvidia' / 'nccl' / 'lib'
    system_lib = tmp_path / 'usr' / 'lib'
    for d in (pip_lib, system_lib):
        d.mkdir(parents=True)
    (pip_lib / 'libnccl.so.2.28.9').write_bytes(b'\0' * 1234)
    (pip_lib / 'libnccl.so.2').symlink_to('libnccl.so.2.28.9')
    (system_lib / 'libnccl.so.2').write_bytes(b'\0' * 99)
    os.utime(pip_lib / 'libnccl.so.2.28.9', (1754565600.25, 1754565600.25))
    binary = usage_script(tmp_path / 'nccl-tests' / 'src' / 'build' / 'all_reduce_perf', USAGE_WITH_J)
    stamp = tmp_path / 'nccl-tests' / 'build.stamp'
    stamp.write_text(STAMP)
    return {'tmp': tmp_path, 'pip_lib': pip_lib, 'system_lib': system_lib, 'binary': binary, 'stamp': str(stamp)}


def run_module(capsys, **args):
    return helpers.modules.run_module(nccl_tests_state, capsys, **args)


def test_cached_build(node, capsys):
    result = run_module(capsys, nccl_dirs=[str(node['tmp'] / 'missing' / 'lib'), str(node['pip_lib']), str(node['system_lib'])],
                        binary=node['binary'], stamp_file=node['stamp'])
    assert result['changed'] is False
    assert 'failed' not in result
    # The link's path, as found; size and time of the file it leads to.
    assert result['nccl_lib'] == str(node['pip_lib'] / 'libnccl.so.2')
    assert result['nccl_lib_size'] == 1234
    assert result['nccl_lib_mtime'] == 1754565600.25
    assert result['binary_exists'] is True
    assert result['stamp'] == STAMP
    assert (result['json_output'], result['help_rc'], result['help_error']) == (True, 0, None)
    # make -j of the build: the CPUs this process may use, as nproc counts them.
    assert result['cpus'] == len(os.sched_getaffinity(0)) >= 1


def test_fresh_node_in_check_mode(node, capsys, tmp_path):
    result = run_module(capsys, nccl_dirs=[str(node['system_lib'])], binary=str(tmp_path / 'none' / 'all_reduce_perf'),
                        stamp_file=str(tmp_path / 'none' / 'build.stamp'), _ansible_check_mode=True)
    assert result['changed'] is False
    assert (result['nccl_lib'], result['nccl_lib_size']) == (str(node['system_lib'] / 'libnccl.so.2'), 99)
    assert result['binary_exists'] is False
    assert result['stamp'] is None
    assert (result['json_output'], result['help_rc']) == (False, None)
    assert result['help_error'] == '%s is not an executable file' % (tmp_path / 'none' / 'all_reduce_perf')


def test_no_nccl_dangling_link_and_directories_passed_over(node, capsys, tmp_path):
    dangling = tmp_path / 'dangling'
    dangling.mkdir()
    (dangling / 'libnccl.so.2').symlink_to('libnccl.so.2.0.0')
    (tmp_path / 'dir' / 'libnccl.so.2').mkdir(parents=True)
    result = run_module(capsys, nccl_dirs=[str(dangling), str(tmp_path / 'dir'), str(tmp_path / 'missing')], binary=node['binary'])
    assert (result['nccl_lib'], result['nccl_lib_size'], result['nccl_lib_mtime']) == (None, None, None)
    assert result['stamp'] is None


def test_binary_without_json_and_one_that_cannot_run(node, capsys, tmp_path):
    old = usage_script(tmp_path / 'old' / 'all_reduce_perf', USAGE_WITHOUT_J, rc=1)
    result = run_module(capsys, binary=old)
    assert (result['json_output'], result['help_rc'], result['help_error']) == (False, 1, None)
    assert result['nccl_lib'] is None

    broken = script(tmp_path / 'broken' / 'all_reduce_perf',
                    'echo "all_reduce_perf: error while loading shared libraries: libmpi.so.40" >&2; exit 127')
    result = run_module(capsys, binary=broken)
    assert (result['binary_exists'], result['json_output'], result['help_rc']) == (True, False, 127)
    assert result['help_error'] == 'exited with rc 127: all_reduce_perf: error while loading shared libraries: libmpi.so.40'


def test_not_executable_and_hanging_binaries(node, capsys, tmp_path):
    plain = tmp_path / 'plain' / 'all_reduce_perf'
    plain.parent.mkdir()
    plain.write_text(USAGE_WITH_J)
    result = run_module(capsys, binary=str(plain))
    assert (result['binary_exists'], result['help_rc'], result['json_output']) == (False, None, False)

    hanging = script(tmp_path / 'hang' / 'all_reduce_perf', 'exec sleep 30')
    result = run_module(capsys, binary=hanging, timeout=1)
    assert result['binary_exists'] is True
    assert result['help_error'] == '-h did not finish within 1 s'
    assert result['json_output'] is False


def test_bad_timeout(node, capsys):
    result = run_module(capsys, binary=node['binary'], timeout=0)
    assert result['failed'] is True
    assert 'timeout' in result['msg']
