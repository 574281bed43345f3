# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""allreduce_run end to end: real commands under the real `timeout`, fake launchers that replay recorded output."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from ansible_collections.trainops.cluster.plugins.module_utils.nccl_tests.perf_json import parse_perf_json
from ansible_collections.trainops.cluster.plugins.module_utils.nccl_tests.perf_text import parse_perf_output
from ansible_collections.trainops.cluster.plugins.modules import allreduce_run
import helpers.modules
from helpers.modules import script

ROOT = Path(__file__).resolve().parents[4]
REAL = ROOT / 'tests' / 'fixtures' / 'gpu' / 'h200x2'
VARIANTS = ROOT / 'tests' / 'fixtures' / 'nccl_tests'
CPU_PROGRAM = ROOT / 'roles' / 'verify' / 'files' / 'cpu_allreduce.py'
SYSTEM_PYTHON = '/usr/bin/python3'
RESULT_KEYS = {'rc', 'timed_out', 'seconds', 'cmd', 'output', 'result', 'debug', 'json_removed', 'changed', 'failed'}


@pytest.fixture(autouse=True)
def restore_cwd(monkeypatch):
    """The module changes its working directory for chdir; in-process that is pytest's, so put it back afterwards."""
    monkeypatch.chdir(ROOT)


def run_module(capsys, **args):
    return helpers.modules.run_module(allreduce_run, capsys, **args)


def ran(result):
    # failed is given as false, or Ansible would fail the task on a non-zero rc.
    assert result['failed'] is False, result.get('msg')
    assert result['changed'] is False
    assert set(result) == RESULT_KEYS
    return result


def best_busbw(row):
    return max(side['busbw'] for side in (row['out_of_place'], row['in_place']) if side)


def test_single_node_real_output(tmp_path, capsys):
    fake = script(tmp_path / 'all_reduce_perf', 'cat %s' % (REAL / 'all_reduce_perf.txt'))
    result = ran(run_module(capsys, argv=[fake, '-b', '8', '-e', '8G', '-g', '2']))
    assert (result['rc'], result['timed_out']) == (0, False)
    assert result['cmd'] == '%s -b 8 -e 8G -g 2' % fake
    assert result['output'] == (REAL / 'all_reduce_perf.txt').read_text()
    assert 0 <= result['seconds'] < 10
    parsed = result['result']
    assert parsed['source'] == 'nccl_tests_text'
    assert parsed['complete'] is True and parsed['errors'] == [] and parsed['wrong_total'] == 0
    last = parsed['rows'][-1]
    assert last['size'] == 8 * 1024 ** 3
    assert best_busbw(last) == pytest.approx(348.6)
    assert [rank['host'] for rank in parsed['ranks']] and len(parsed['ranks']) == 2
    assert isinstance(result['debug'], dict) and result['debug']['transports'] == []
    assert result['json_removed'] == []


def test_tagged_two_nodes_with_nccl_debug(tmp_path, capsys):
    fake = script(tmp_path / 'mpirun', 'cat %s' % (VARIANTS / 'mpirun_2x8_tagged.txt'))
    result = ran(run_module(capsys, argv=[fake, '--tag-output', '-np', '16', 'all_reduce_perf'], environment={'NCCL_DEBUG': 'INFO'}))
    parsed = result['result']
    assert parsed['complete'] is True and parsed['errors'] == []
    assert [rank['rank'] for rank in parsed['ranks']] == list(range(16))
    assert sorted(set(rank['host'] for rank in parsed['ranks'])) == ['node1', 'node2']
    assert best_busbw(parsed['rows'][-1]) == pytest.approx(348.6)
    debug = result['debug']
    assert 'NET/IB' in debug['transports']
    assert (debug['nnodes'], debug['nranks']) == (2, 16)


def test_failed_run_is_reported_not_failed(tmp_path, capsys):
    fake = script(tmp_path / 'mpirun', 'cat %s; echo "mpirun: forwarding stderr" >&2; exit 1' % (VARIANTS / 'mpirun_2x2_aborted.txt'))
    result = ran(run_module(capsys, argv=[fake]))
    assert (result['rc'], result['timed_out']) == (1, False)
    assert result['output'].endswith('\n--- stderr ---\nmpirun: forwarding stderr\n')
    parsed = result['result']
    assert parsed['complete'] is False
    assert any('IBV_WC_RETRY_EXC_ERR' in error for error in parsed['errors'])
    assert any(proc['rank'] == 3 and proc['signal'] == 9 for proc in parsed['failed_processes'])


def test_environment_reaches_the_command(tmp_path, capsys):
    fake = script(tmp_path / 'show', 'echo "NCCL_DEBUG=$NCCL_DEBUG NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE"')
    result = ran(run_module(capsys, argv=[fake], environment={'NCCL_DEBUG': 'INFO', 'NCCL_NVLS_ENABLE': 0}))
    assert result['output'] == 'NCCL_DEBUG=INFO NCCL_NVLS_ENABLE=0\n'
    assert result['result']['rows'] == [] and result['result']['complete'] is False


def test_check_mode_launches_nothing(tmp_path, capsys):
    marker = tmp_path / 'ran'
    fake = script(tmp_path / 'all_reduce_perf', 'touch %s' % marker)
    result = run_module(capsys, argv=[fake], _ansible_check_mode=True)
    assert result['skipped'] and not marker.exists()


def test_timeout_kills_the_run_and_keeps_the_partial_output(tmp_path, capsys):
    fake = script(tmp_path / 'all_reduce_perf', 'cat %s; echo; sleep 60; echo never' % (VARIANTS / 'timeout_partial.txt'))
    start = time.monotonic()
    result = ran(run_module(capsys, argv=[fake], timeout=2))
    elapsed = time.monotonic() - start
    assert elapsed < 2 + 5
    assert result['timed_out'] is True and result['rc'] in (124, 137)
    assert 2 <= result['seconds'] < 2 + 5
    assert 'never' not in result['output']
    parsed = result['result']
    assert parsed['complete'] is False
    assert parsed['rows'][-1]['size'] == 4 * 1024 ** 3 and parsed['rows'][-1]['in_place'] is None


def test_missing_command_is_reported(tmp_path, capsys):
    result = ran(run_module(capsys, argv=[str(tmp_path / 'absent')]))
    assert result['rc'] == 127
    assert 'No such file' in result['output'] and '--- stderr ---' in result['output']


def nccl_tests_writing_json(tmp_path, json_fixture, target):
    """A fake all_reduce_perf that writes json_fixture to `target` (relative to its cwd) as nccl-tests' rank 0 does."""
    return script(tmp_path / 'all_reduce_perf',
                  'cp %s %s\necho "# Writing JSON output to %s"\ncat %s' % (json_fixture, target, target, REAL / 'all_reduce_perf.txt'))


def test_rows_from_the_json_file_which_is_then_deleted(tmp_path, capsys):
    workdir = tmp_path / 'work'
    workdir.mkdir()
    # Left over by an earlier run: nccl-tests would not overwrite it, so the module deletes it first.
    (workdir / 'ar.json').write_text('{"env": ["SECRET=stale"]}')
    fake = nccl_tests_writing_json(tmp_path, VARIANTS / 'all_reduce_perf.json', 'ar.json')
    result = ran(run_module(capsys, argv=[fake, '-J', 'ar.json'], json_file='ar.json', chdir=str(workdir)))
    assert list(workdir.iterdir()) == []
    assert result['json_removed'] == [str(workdir / 'ar.json')] * 2
    parsed = result['result']
    assert parsed['source'] == 'nccl_tests_text+json'
    assert parsed['json_output'] == 'ar.json'
    expected = parse_perf_json((VARIANTS / 'all_reduce_perf.json').read_text())
    assert parsed['rows'] == expected['rows']
    text = parse_perf_output((REAL / 'all_reduce_perf.txt').read_text())
    assert parsed['rows'] != text['rows']
    assert parsed['ranks'] == text['ranks'] and parsed['errors'] == text['errors']
    assert parsed['complete'] is True and parsed['wrong_total'] == 0
    assert parsed['notes'] == []
    assert 'SECRET' not in json.dumps(result) and 'CUDA_HOME' not in json.dumps(result)


def test_json_file_is_created_private(tmp_path, capsys):
    """nccl-tests creates the file with the umask's mode; it holds rank 0's environment, so the run's umask is 0077."""
    fake = script(tmp_path / 'all_reduce_perf', 'cp %s %s\necho "# mode $(stat -c %%a %s)"\ncat %s' % (
        VARIANTS / 'all_reduce_perf.json', tmp_path / 'ar.json', tmp_path / 'ar.json', REAL / 'all_reduce_perf.txt'))
    # Under the common umask 022 the file would be 0644, readable by every user of the node.
    previous = os.umask(0o022)
    try:
        result = ran(run_module(capsys, argv=[fake], json_file=str(tmp_path / 'ar.json')))
    finally:
        os.umask(previous)
    assert '# mode 600\n' in result['output']
    assert result['json_removed'] == [str(tmp_path / 'ar.json')]


def test_json_written_to_the_fallback_name(tmp_path, capsys):
    # nccl-tests opens its file with "wx"; when FILE exists it writes FILE.0 and names that in its output.
    fake = nccl_tests_writing_json(tmp_path, VARIANTS / 'all_reduce_perf.json', str(tmp_path / 'ar.json.0'))
    result = ran(run_module(capsys, argv=[fake], json_file=str(tmp_path / 'ar.json')))
    assert not (tmp_path / 'ar.json.0').exists()
    assert result['json_removed'] == [str(tmp_path / 'ar.json.0')]
    assert result['result']['source'] == 'nccl_tests_text+json'


def test_truncated_json_is_deleted_and_not_used(tmp_path, capsys):
    fake = nccl_tests_writing_json(tmp_path, VARIANTS / 'all_reduce_perf_truncated.json', str(tmp_path / 'ar.json'))
    result = ran(run_module(capsys, argv=[fake], json_file=str(tmp_path / 'ar.json')))
    assert not (tmp_path / 'ar.json').exists()
    parsed = result['result']
    assert parsed['source'] == 'nccl_tests_text'
    assert parsed['rows'] == parse_perf_output((REAL / 'all_reduce_perf.txt').read_text())['rows']
    assert len(parsed['notes']) == 1 and parsed['notes'][0].startswith('JSON output %s not used: nccl-tests JSON output is truncated' % (tmp_path / 'ar.json'))


def test_json_elsewhere_or_missing(tmp_path, capsys):
    other = tmp_path / 'other.json'
    fake = nccl_tests_writing_json(tmp_path, VARIANTS / 'all_reduce_perf.json', str(other))
    result = ran(run_module(capsys, argv=[fake], json_file=str(tmp_path / 'ar.json')))
    # Not the file it was told about: neither read nor deleted.
    assert other.exists()
    assert result['json_removed'] == []
    assert result['result']['source'] == 'nccl_tests_text'
    assert result['result']['notes'] == [
        'nccl-tests wrote its JSON output to %s, not to json_file %s; it was not read' % (other, tmp_path / 'ar.json'),
        'JSON output %s not found on this host (not written, or rank 0 ran on another node)' % (tmp_path / 'ar.json')]


def test_cpu_kind_with_recorded_output(tmp_path, capsys):
    fake = script(tmp_path / 'mpirun', 'cat %s' % (VARIANTS / 'cpu_allreduce_3ranks.txt'))
    result = ran(run_module(capsys, argv=[fake, '--tag-output', '-np', '3', 'python3', 'cpu_allreduce.py'], kind='cpu'))
    assert result['debug'] is None
    parsed = result['result']
    assert parsed['source'] == 'cpu_allreduce'
    assert parsed['complete'] is True and parsed['wrong_total'] == 0
    assert [rank['host'] for rank in parsed['ranks']] == ['node1', 'node2', 'node3']
    assert [row['size'] for row in parsed['rows']] == [1048576, 16777216, 67108864]


def mpi_missing():
    if not shutil.which('mpirun'):
        return 'mpirun not found (apt-get install openmpi-bin)'
    if not Path(SYSTEM_PYTHON).exists() or subprocess.run([SYSTEM_PYTHON, '-c', 'import mpi4py'], capture_output=True,
                                                          timeout=60, check=False).returncode != 0:
        return 'mpi4py not importable by %s (apt-get install python3-mpi4py)' % SYSTEM_PYTHON
    return None


@pytest.mark.skipif(mpi_missing() is not None, reason=str(mpi_missing()))
def test_cpu_kind_with_the_real_program(capsys):
    argv = ['mpirun', '--allow-run-as-root', '--oversubscribe', '--tag-output', '-np', '3', SYSTEM_PYTHON, str(CPU_PROGRAM),
            '--max-bytes', '1048576']
    result = ran(run_module(capsys, argv=argv, kind='cpu', timeout=120))
    assert (result['rc'], result['timed_out']) == (0, False)
    parsed = result['result']
    assert parsed['errors'] == []
    assert [rank['rank'] for rank in parsed['ranks']] == [0, 1, 2]
    assert parsed['complete'] is True and parsed['wrong_total'] == 0
    assert len(parsed['rows']) == 18 and parsed['rows'][-1]['size'] == 1048576


@pytest.mark.parametrize('args, message', [
    ({'argv': []}, 'argv must name a command'),
    ({'argv': ['true'], 'timeout': 0}, 'timeout must be at least 1 second, got 0'),
    ({'argv': ['true'], 'kind': 'cpu', 'json_file': '/tmp/x.json'}, 'json_file applies to kind nccl_tests only'),
    ({'argv': ['true'], 'environment': {'NCCL_NVLS_ENABLE': False}}, 'environment NCCL_NVLS_ENABLE: give a string or a number, not False'),
    ({'argv': ['true'], 'chdir': '/nonexistent/dir'}, 'chdir /nonexistent/dir is not a directory'),
    ({'argv': ['true'], 'kind': 'gloo'}, 'value of kind must be one of: nccl_tests, cpu, got: gloo'),
])
def test_bad_arguments_fail(capsys, args, message):
    result = run_module(capsys, **args)
    assert result['failed'] is True
    assert result['msg'] == message
