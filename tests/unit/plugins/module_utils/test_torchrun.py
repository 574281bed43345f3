# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The torchrun rungs' reader (node side), on real output of Debian's torch 1.13 (tests/fixtures/torchrun).

Its judges (controller side) are tested in tests/unit/plugins/plugin_utils/test_torchrun_verdict.py."""

import json
import os

import pytest

from ansible_collections.trainops.cluster.plugins.module_utils import torchrun

ROOT = os.path.join(os.path.dirname(__file__), '..', '..', '..', '..')
FIXTURES = os.path.join(ROOT, 'tests', 'fixtures', 'torchrun')


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


# The parser, on real output.

def test_parse_finds_records_behind_torchruns_tee_prefix():
    parsed = torchrun.parse_output(fixture('allreduce-1node.log'))
    results = [r for r in parsed['records'] if r['event'] == 'result']
    assert sorted(r['rank'] for r in results) == [0, 1]
    assert all(r['sum_ok'] and r['backend'] == 'gloo' and r['interface'] == 'lo' for r in results)
    assert parsed['failures'] == [] and parsed['errors'] == []


def test_parse_reads_the_failure_summary_of_a_killed_rank():
    parsed = torchrun.parse_output(fixture('killed-rank.log'))
    by_rank = {f['rank']: f for f in parsed['failures']}
    assert by_rank[1]['exitcode'] == -9 and by_rank[1]['signal'] == '9 (SIGKILL)' and by_rank[1]['local_rank'] == 1
    # torchrun's "Root Cause" is the rank it noticed first, here the survivor that lost its peer.
    assert by_rank[0]['exitcode'] == 1 and by_rank[0]['signal'] is None
    assert any('Connection closed by peer' in e for e in parsed['errors'])


@pytest.mark.parametrize('prefix', ['', '[default0]:', ' 0: ', '0: ', '[1,0]<stdout>:', '[rank0]: ', 'node2: ', 'node2: [rank0]: ',
                                    '(RayTrainWorker pid=8, ip=10.96.0.12) ', '\x1b[36m(RayWorkerWrapper pid=1234)\x1b[0m ',
                                    '(VllmWorker rank=1 pid=12231) ', '\x1b[1;36m(VllmWorkerProcess pid=9)\x1b[0;0m ',
                                    '(head, rank=0, pid=1234) ', '[pod/trainer-worker-1/pytorch] '])
def test_records_and_messages_parse_alike_behind_every_launchers_prefix(prefix):
    text = prefix + 'TRAINOPS {"event": "step", "step": 3, "loss": 0.5}\n' + prefix + (
        'RuntimeError: Timed out after 21 seconds waiting for clients. 2/3 clients joined.')
    parsed = torchrun.parse_output(text)
    assert parsed['records'] == [{'event': 'step', 'step': 3, 'loss': 0.5}]
    assert parsed['clients'] == (2, 3)
    assert parsed['errors'] == ['RuntimeError: Timed out after 21 seconds waiting for clients. 2/3 clients joined.']


# The killed rank's log as launchers that relay a node's output label it (each line, as each writes it).

def labelled(text, label):
    return '\n'.join(label + line for line in text.splitlines())


def with_rank_labels(text):
    """The log as torch 2.2 on writes it: its excepthook labels each line of the rank's traceback "[rank0]: "."""
    lines = text.splitlines()
    first = lines.index('Traceback (most recent call last):')
    last = next(i for i, line in enumerate(lines) if line.startswith('RuntimeError: '))
    return '\n'.join(lines[:first] + ['[rank0]: ' + line for line in lines[first:last + 1]] + lines[last + 1:])


# deepspeed --hostfile: its runner's own lines, then pdsh's, every line of node2's output labelled "node2: ".
PDSH_RUNNER = '[2026-12-01 12:05:01,102] [INFO] [runner.py:568:main] cmd = pdsh -S -f 1024 -w node1,node2 export ...\n'
PDSH_EXIT = '\npdsh@node1: node2: ssh exited with exit code 1'


@pytest.mark.parametrize('relay', [
    lambda text: PDSH_RUNNER + labelled(text, 'node2: ') + PDSH_EXIT,
    lambda text: PDSH_RUNNER + labelled(with_rank_labels(text), 'node2: ') + PDSH_EXIT,
    lambda text: labelled(text, '\x1b[2m\x1b[36m(RayTrainWorker pid=8, ip=10.96.0.12)\x1b[0m '),
    lambda text: labelled(text, '(RayWorkerWrapper pid=1234) '),
    lambda text: labelled(text, '(VllmWorker rank=1 pid=12231) '),
    lambda text: labelled(text, '\x1b[1;36m(VllmWorkerProcess pid=9)\x1b[0;0m '),
    lambda text: labelled(text, '(worker1, rank=1, pid=2345, ip=10.96.0.12) '),
    lambda text: labelled(with_rank_labels(text), '[pod/trainer-worker-1/pytorch] '),
], ids=['pdsh', 'pdsh-torch-2.2', 'ray', 'ray-local', 'vllm', 'vllm-v0', 'skypilot', 'kubectl'])
def test_a_launchers_labels_do_not_change_what_the_log_says(relay):
    plain = torchrun.parse_output(fixture('killed-rank.log'))
    assert torchrun.parse_output(relay(fixture('killed-rank.log'))) == plain
    assert [(f['rank'], f['exitcode'], f['signal']) for f in plain['failures']] == [(1, -9, '9 (SIGKILL)'), (0, 1, None)]


def test_a_failure_without_a_host_takes_the_node_a_launchers_label_names():
    # torch before 1.10 wrote no host line in its summary.
    text = '\n'.join(line for line in fixture('killed-rank.log').splitlines() if not line.startswith('  host '))
    assert {f['host'] for f in torchrun.parse_output(text)['failures']} == {None}
    assert {f['host'] for f in torchrun.parse_output(labelled(text, 'node2: '))['failures']} == {'node2'}
    assert {f['host'] for f in torchrun.parse_output(labelled(text, '(RayTrainWorker pid=8, ip=10.96.0.12) '))['failures']} == {
        '10.96.0.12'}
    assert {f['host'] for f in torchrun.parse_output(labelled(text, '[pod/trainer-worker-1/pytorch] '))['failures']} == {'trainer-worker-1'}
    # vLLM's labels name no node; the summary's own host wins over a label's.
    assert {f['host'] for f in torchrun.parse_output(labelled(text, '(VllmWorker rank=1 pid=12231) '))['failures']} == {None}
    assert {f['host'] for f in torchrun.parse_output(labelled(fixture('killed-rank.log'), 'node2: '))['failures']} == {'localhost'}


ORDINARY = ['Warning: the learning rate is high for this batch size', 'loss: 0.3', 'WARNING: ValueError: retrying the download',
            'host: node7', 'note: [1]:']


def test_ordinary_lines_that_start_with_a_word_and_a_colon_are_read_as_they_are():
    text = fixture('killed-rank.log')
    lines = text.splitlines()
    # Among the summary's own lines too (before its entries: "host: " in one is its field): a few such lines do not
    # make a log pdsh's.
    summary = lines.index('Failures:')
    mixed = '\n'.join(lines[:5] + ORDINARY + lines[5:summary] + ORDINARY + lines[summary:])
    assert torchrun.parse_output(mixed) == torchrun.parse_output(text)
    # Behind pdsh's label, pdsh's is the only one taken off: the line is the node's as it wrote it.
    assert torchrun.parse_output(labelled(mixed, 'node2: ')) == torchrun.parse_output(text)
    # A node's own exception line is no host's label, in pdsh's output too.
    errors = torchrun.parse_output(labelled(text, 'node2: ') + '\nRuntimeError: the runner failed')['errors']
    assert errors[-1] == 'RuntimeError: the runner failed'


def test_records_glued_together_by_torchruns_tail_are_all_found():
    # torchrun --tee copied the record before its newline was written: the next copy is glued behind it.
    text = ('[default0]:TRAINOPS {"event": "step", "step": 7, "loss": 0.25}[default1]:TRAINOPS {"event": "step", "step": 7}\n'
            '[default0]:\n[default1]:TRAINOPS {"event": "done", "step": 8[default0]:\n')
    assert torchrun.parse_output(text)['records'] == [{'event': 'step', 'step': 7, 'loss': 0.25}, {'event': 'step', 'step': 7}]


def test_strip_prefixes_leaves_nccl_lines_for_its_parser():
    assert torchrun.strip_prefixes('[default0]:node1:9:9 [0] NCCL INFO NET/Socket : Using [0]eth1:10.96.0.11<0>') == (
        'node1:9:9 [0] NCCL INFO NET/Socket : Using [0]eth1:10.96.0.11<0>')


def test_read_env_file():
    text = '# comment\nNNODES=3\nNODE_RANK=1\n\nMASTER_ADDR="10.96.0.11"\n'
    assert torchrun.read_env_file(text) == {'NNODES': '3', 'NODE_RANK': '1', 'MASTER_ADDR': '10.96.0.11'}


# Public torchrun failures relayed by a launcher or logger that labels each line (tests/fixtures/torchrun/relayed: each
# <name>.log with <name>.json, its source and the failures and errors a reader labelled by hand).
RELAYED = sorted(name[:-4] for name in os.listdir(os.path.join(FIXTURES, 'relayed')) if name.endswith('.log'))


@pytest.mark.parametrize('name', RELAYED)
def test_a_relayed_failure_is_read_behind_its_logging_and_stream_labels(name):
    labelled = json.loads(fixture(os.path.join('relayed', name + '.json')))
    parsed = torchrun.parse_output(fixture(os.path.join('relayed', name + '.log')))
    assert [{k: f[k] for k in ('rank', 'local_rank', 'host', 'exitcode', 'signal')} for f in parsed['failures']] == labelled['failures']
    assert parsed['errors'] == labelled['errors']


@pytest.mark.parametrize('prefix', ['E1210 12:17:49.123000 140245 torch/distributed/elastic/multiprocessing/api.py:869] ',
                                    '[2024-05-01 10:00:00,123] [ERROR] [launch.py:321:main] ',
                                    '2024-05-01 10:00:00,123 - ERROR - ', '[INFO|trainer.py:2414] 2024-05-01 10:00:00,123 >> ',
                                    '[2023-11-28 09:52:03,012] torch.distributed.elastic.multiprocessing.api: [ERROR] ',
                                    # vLLM's, before and after it put the place in brackets (vllm-project/vllm issues 6564, 19670).
                                    'ERROR 07-19 06:58:27 worker_base.py:340] ', 'ERROR 06-16 02:08:15 [multiproc_worker_utils.py:238] '])
def test_a_killed_ranks_summary_behind_a_logging_prefix_is_read_as_it_is_without(prefix):
    assert torchrun.parse_output(labelled(fixture('killed-rank.log'), prefix)) == torchrun.parse_output(fixture('killed-rank.log'))


def test_a_log_line_that_begins_with_error_is_no_exception():
    # torch 2.6's agent logs this (glog's prefix) once the master's store is gone after a run that went well.
    line = 'E1204 23:25:01.123000 140 torch/distributed/elastic/agent/server/api.py:1043] Error waiting on exit barrier. Elapsed: 0.0074 seconds'
    parsed = torchrun.parse_output(fixture('allreduce-1node.log') + '\n' + line)
    assert parsed['errors'] == [] and parsed['failures'] == []


def test_the_exit_barriers_traceback_after_a_run_that_went_well_is_no_failure():
    # Recorded in CI: the srun rung on node2 (torch 2.6, glog prefix); the master's store was gone when node2's agent
    # reached the exit barrier, after its rank had reported its result.
    parsed = torchrun.parse_output(fixture('exit-barrier-reset-srun.log'))
    assert [r['event'] for r in parsed['records']] == ['start', 'result']
    assert parsed['errors'] == [] and parsed['failures'] == []


def test_an_error_after_the_exit_barriers_traceback_is_still_read():
    later = 'RuntimeError: something else went wrong'
    parsed = torchrun.parse_output(fixture('exit-barrier-reset-srun.log') + '\n' + later)
    assert parsed['errors'] == [later]
