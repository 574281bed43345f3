# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The torchrun rungs' reader (node side), on real output of Debian's torch 1.13 (tests/fixtures/torchrun).

Its judges (controller side) are tested in tests/unit/plugins/plugin_utils/test_torchrun_verdict.py."""

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


@pytest.mark.parametrize('prefix', ['', '[default0]:', ' 0: ', '[1,0]<stdout>:'])
def test_records_and_messages_parse_alike_behind_every_launchers_prefix(prefix):
    text = prefix + 'TRAINOPS {"event": "step", "step": 3, "loss": 0.5}\n' + prefix + (
        'RuntimeError: Timed out after 21 seconds waiting for clients. 2/3 clients joined.')
    parsed = torchrun.parse_output(text)
    assert parsed['records'] == [{'event': 'step', 'step': 3, 'loss': 0.5}]
    assert parsed['clients'] == (2, 3)
    assert parsed['errors'] == ['RuntimeError: Timed out after 21 seconds waiting for clients. 2/3 clients joined.']


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
