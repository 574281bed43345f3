# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The torchrun rungs' judges (controller side), on real output of Debian's torch 1.13 (tests/fixtures/torchrun).

Each node's output is read with the reader of module_utils/torchrun.py, as the module torchrun_run reads it on the node."""

import copy
import json
import os

import pytest

from ansible_collections.trainops.cluster.plugins.module_utils import torchrun
from ansible_collections.trainops.cluster.plugins.plugin_utils import torchrun_verdict

ROOT = os.path.join(os.path.dirname(__file__), '..', '..', '..', '..')
FIXTURES = os.path.join(ROOT, 'tests', 'fixtures', 'torchrun')
NODES = ['node1', 'node2', 'node3']
MASTER = '10.96.0.11:29500'
SETTINGS = {'steps': 40, 'stop_at': 30, 'min_loss_drop': 0.5, 'resume_tolerance': 1e-5}


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def launch_env(rank, addr='10.96.0.11', nnodes='3'):
    return {'NNODES': nnodes, 'NODE_RANK': str(rank), 'NPROC_PER_NODE': '1', 'MASTER_ADDR': addr, 'MASTER_PORT': '29500'}


def result(node, text, rc=0, stopped=None, probe_ok=True, probe_error=None, seconds=8.0, found=()):
    rank = NODES.index(node)
    return {'rc': rc, 'timed_out': stopped is not None, 'stopped': stopped, 'seconds': seconds, 'output': text,
            'launch': launch_env(rank), 'parsed': torchrun.parse_output(text),
            'probe': {'address': '10.96.0.11', 'port': 29500, 'ok': probe_ok, 'error': probe_error, 'seconds': 0.4},
            'cleanup': {'found': list(found), 'killed': [], 'left': []}, 'nccl_debug': None}


def record_line(node, rank, **extra):
    fields = {'event': 'result', 'rank': rank, 'local_rank': 0, 'world_size': 3, 'node_rank': rank, 'host': node,
              'backend': 'gloo', 'sum_ok': True, 'wrong': 0, 'bytes': 4194304, 'seconds': 0.05, 'algbw_gbps': 0.08,
              'busbw_gbps': 0.11, 'rendezvous_s': 3.2 + rank, 'interface': 'eth1'}
    fields.update(extra)

    return '[default0]:TRAINOPS ' + json.dumps(fields)


def passing():
    return {node: result(node, record_line(node, rank)) for rank, node in enumerate(NODES)}


# The all-reduce verdict.

def test_allreduce_passes_with_every_rank_on_its_node():
    verdict = torchrun_verdict.judge_allreduce(passing(), NODES, {n: 1 for n in NODES}, {n: 0 for n in NODES}, MASTER)
    assert verdict['passed'], verdict['reasons']
    assert verdict['world_size'] == 3 and verdict['backend'] == 'gloo'
    assert [r['node'] for r in verdict['ranks']] == NODES
    assert verdict['interfaces'] == {n: ['eth1'] for n in NODES}
    assert verdict['rendezvous_s'] == 5.2 and verdict['busbw_gbps'] == 0.11


def test_a_node_that_never_reached_the_master_is_named_with_the_cause():
    results = {n: result(n, '', rc=-15, stopped='not ready', seconds=20.4) for n in NODES}
    results['node3'] = result('node3', '', rc=-15, stopped='not ready', probe_ok=False, probe_error='timed out', seconds=20.4)
    verdict = torchrun_verdict.judge_allreduce(results, NODES, {n: 1 for n in NODES}, {n: 0 for n in NODES}, MASTER)
    assert not verdict['passed']
    assert 'node3 never reached 10.96.0.11:29500 (MASTER_ADDR:MASTER_PORT): timed out' in verdict['reasons']
    assert any(r.startswith('no worker started within the rendezvous limit (20s) on node1, node2, node3') for r in verdict['reasons'])
    assert 'ranks 0 (node1) never reported' in verdict['reasons']


def test_master_count_of_joined_agents_names_the_missing_node():
    results = passing()
    results['node1'] = result('node1', 'RuntimeError: Timed out after 21 seconds waiting for clients. 2/3 clients joined.', rc=1)
    results['node3'] = result('node3', '', rc=1, probe_ok=False, probe_error='refused')
    verdict = torchrun_verdict.judge_allreduce(results, NODES, {n: 1 for n in NODES}, {n: 0 for n in NODES}, MASTER)
    assert ('node1 (master) timed out waiting: 2/3 agents joined the rendezvous (reached the master: node1, node2; '
            'never did: node3)') in verdict['reasons']


def test_two_nodes_claiming_node_rank_zero_are_named():
    results = {n: result(n, '', rc=-15, stopped='not ready') for n in NODES}
    results['node3']['launch']['NODE_RANK'] = '0'
    verdict = torchrun_verdict.judge_allreduce(results, NODES, {n: 1 for n in NODES}, {n: 0 for n in NODES}, MASTER)
    assert verdict['reasons'][0].startswith('node1 and node3 both claimed NODE_RANK 0 (in their launch.env)')


@pytest.mark.parametrize('addr, expected', [
    ('127.0.0.1', 'node2: MASTER_ADDR=127.0.0.1 is loopback'),
    ('10.96.0.12', 'node2: MASTER_ADDR:MASTER_PORT is 10.96.0.12:29500, the cluster\'s master is 10.96.0.11:29500'),
])
def test_a_wrong_master_address_is_named(addr, expected):
    results = passing()
    results['node2']['launch']['MASTER_ADDR'] = addr
    verdict = torchrun_verdict.judge_allreduce(results, NODES, {n: 1 for n in NODES}, {n: 0 for n in NODES}, MASTER)
    assert not verdict['passed'] and verdict['reasons'][0].startswith(expected)


def test_gloo_on_a_gpu_node_and_a_wrong_sum_fail():
    results = passing()
    results['node2'] = result('node2', record_line('node2', 1, sum_ok=False, wrong=7))
    verdict = torchrun_verdict.judge_allreduce(results, NODES, {n: 1 for n in NODES}, {'node1': 8, 'node2': 8, 'node3': 8}, MASTER)
    assert 'rank 1 on node2: 7 of 1048576 elements of the sum are wrong' in verdict['reasons']
    assert 'node1 ran gloo, expected nccl (the facts found GPUs but torch sees none)' in verdict['reasons']


def test_a_rank_on_another_node_than_its_node_rank_fails():
    results = passing()
    results['node3'] = result('node3', record_line('node3', 1))
    verdict = torchrun_verdict.judge_allreduce(results, NODES, {n: 1 for n in NODES}, {n: 0 for n in NODES}, MASTER)
    assert 'ranks 2 (node3) never reported' in verdict['reasons']
    assert 'ranks 1 ran on node2,node3, expected on node2' in verdict['reasons']


def test_nccls_log_names_the_interface():
    results = passing()
    results['node1']['nccl_debug'] = {'socket_interfaces': ['eth1:10.96.0.11<0>']}
    results['node2']['nccl_debug'] = {'socket_interfaces': ['ens7:10.96.0.12<0>']}
    verdict = torchrun_verdict.judge_allreduce(results, NODES, {n: 1 for n in NODES}, {n: 0 for n in NODES}, MASTER)
    assert verdict['interfaces']['node2'] == ['ens7']


def test_a_killed_rank_is_named_first_and_what_the_cleanup_ended():
    results = passing()
    killed = fixture('killed-rank.log')
    results['node1'] = result('node1', killed, rc=1, found=[{'pid': 5, 'state': 'sleeping', 'comm': 'conmon'}])
    verdict = torchrun_verdict.judge_allreduce(results, NODES, {n: 1 for n in NODES}, {n: 0 for n in NODES}, MASTER)
    assert verdict['reasons'][0].startswith('rank 1 on node1 died of signal 9 (SIGKILL) at 2026-12-01_12:05:43')
    assert 'cleanup: ended what was still running on node1 (conmon sleeping); nothing left on node2, node3' in verdict['reasons']


def test_a_stopped_rank_is_named_as_the_cause_and_our_own_sigterm_is_not():
    results = passing()
    for node in ('node1', 'node3'):
        started = '[default0]:TRAINOPS {"event": "start", "rank": %d}\n' % NODES.index(node)
        results[node] = result(node, started + 'torch.distributed.elastic.multiprocessing.api.SignalException: Process 41 got '
                               'signal: 15', rc=1, stopped='timeout', seconds=61.2)
    results['node2'] = result('node2', '', rc=-15, stopped='not ready', seconds=24.1,
                              found=[{'pid': 6860, 'state': 'stopped', 'comm': 'python'}])
    verdict = torchrun_verdict.judge_allreduce(results, NODES, {n: 1 for n in NODES}, {n: 0 for n in NODES}, MASTER)
    assert verdict['reasons'][0] == ('node2: python (pid 6860) was stopped (SIGSTOP) when the launch was ended: the ranks on '
                                     'the other nodes waited for it')
    assert not any('got signal: 15' in r for r in verdict['reasons'])
    assert 'no worker started within the rendezvous limit (24s) on node2, while node1, node3 did: stopped there' in verdict['reasons']
    assert 'timed out after 61s on node1, node3' in verdict['reasons']


def test_a_process_in_state_d_after_a_launch_that_ended_well_is_no_failure():
    # Recorded in CI (molecule train, the in-image rung): every rank reported its result, every launch ended 0, and the
    # cleanup found podman's own teardown in state D on node2.
    results = passing()
    results['node2'] = dict(results['node2'], cleanup={'found': [{'pid': 4826, 'state': 'uninterruptible', 'comm': 'podman'}],
                                                       'killed': [], 'left': []})
    verdict = torchrun_verdict.judge_allreduce(results, NODES, {n: 1 for n in NODES}, {n: 0 for n in NODES}, MASTER)
    assert verdict['passed'], verdict['reasons']
    # The same process where a launch failed is named as its possible cause.
    results['node1'] = dict(results['node1'], rc=1)
    verdict = torchrun_verdict.judge_allreduce(results, NODES, {n: 1 for n in NODES}, {n: 0 for n in NODES}, MASTER)
    assert 'node2: podman (pid 4826) was stuck in the kernel (state D) when the launch was ended: the ranks on the other nodes waited for it' \
        in verdict['reasons']


def test_an_unreached_node_is_named():
    results = passing()
    results['node2'] = None
    verdict = torchrun_verdict.judge_allreduce(results, NODES, {n: 1 for n in NODES}, {n: 0 for n in NODES}, MASTER)
    assert 'node2: not launched (the controller could not run the rung there)' in verdict['reasons']


# The training verdict.

def training_output(steps, resume_from=None, eval_loss=0.2, stored=0.2):

    lines = []

    def emit(**fields):
        lines.append('[default0]:TRAINOPS ' + json.dumps(fields))
    if resume_from is not None:
        emit(event='resumed', step=resume_from, eval_loss=eval_loss, stored_eval_loss=stored, path='/mnt/shared/x/step-000030.pt')
    for step in steps:
        emit(event='step', step=step, loss=4.0 / step)
        if step == 30:
            emit(event='checkpoint', step=30, path='/mnt/shared/x/step-000030.pt', sha256='abc', eval_loss=0.2)
    return '\n'.join(lines)


def training_results(first_steps=range(1, 31), resumed_steps=range(31, 41), **kwargs):
    first, resumed = {}, {}
    for rank, node in enumerate(NODES):
        text = training_output(first_steps if rank == 0 else [])
        import json
        done = '\n[default0]:TRAINOPS ' + json.dumps({'event': 'done', 'rank': rank, 'step': 30, 'params_sha256': 'p1', 'host': node})
        read = '\n[default0]:TRAINOPS ' + json.dumps({'event': 'checkpoint_read', 'step': 30, 'sha256': 'abc', 'host': node, 'rank': rank})
        first[node] = result(node, text + read + done)
        text = training_output(resumed_steps if rank == 0 else [], resume_from=30 if rank == 0 else None, **kwargs)
        done = '\n[default0]:TRAINOPS ' + json.dumps({'event': 'done', 'rank': rank, 'step': 40, 'params_sha256': 'p2', 'host': node})
        resumed[node] = result(node, text + done)
    return first, resumed


def judge_training(first, resumed):
    return torchrun_verdict.judge_training(first, resumed, NODES, {n: 1 for n in NODES}, MASTER, SETTINGS)


def test_training_passes_and_reports_the_loss_curve():
    verdict = judge_training(*training_results())
    assert verdict['passed'], verdict['reasons']
    assert verdict['losses'][0] == [1, 4.0] or verdict['losses'][0] == (1, 4.0)
    assert len(verdict['losses']) == 40 and verdict['resumed_at'] == 30 and verdict['loss_drop'] == 0.975


def test_a_loss_that_does_not_fall_enough_fails():
    first, resumed = training_results()
    settings = dict(SETTINGS, min_loss_drop=0.99)
    verdict = torchrun_verdict.judge_training(first, resumed, NODES, {n: 1 for n in NODES}, MASTER, settings)
    assert verdict['reasons'] == ['the loss fell by 98% (4 -> 0.1), less than 99%']


def test_ranks_with_different_parameters_fail():
    first, resumed = training_results()
    resumed['node3']['parsed']['records'][-1]['params_sha256'] = 'other'
    verdict = judge_training(first, resumed)
    assert verdict['reasons'] == ['resumed launch: the ranks hold different parameters after training (DDP did not '
                                  'synchronise): ranks 2 differ from rank 0']


def test_a_node_that_reads_another_checkpoint_file_fails():
    first, resumed = training_results()
    for record in first['node2']['parsed']['records']:
        if record['event'] == 'checkpoint_read':
            record['sha256'] = 'fff'
    verdict = judge_training(first, resumed)
    assert verdict['reasons'][0].startswith('node2 read another file at /mnt/shared/x/step-000030.pt than rank 0 wrote')


def test_a_resume_that_lost_the_model_fails():
    verdict = judge_training(*training_results(eval_loss=0.9))
    assert verdict['reasons'] == ['after the resume the loss is 0.9, it stopped at 0.2: the model did not come back as saved']


def test_a_resume_that_restarts_at_step_one_fails():
    verdict = judge_training(*training_results(resumed_steps=range(1, 41)))
    assert 'the resumed run went on at step 1, not 31' in verdict['reasons']


def test_a_failed_first_launch_is_judged_alone():
    first, resumed = training_results()
    first['node2'] = result('node2', fixture('killed-rank.log'), rc=1)
    verdict = judge_training(first, {n: None for n in NODES})
    assert verdict['reasons'][0].startswith('first launch: rank 1 on node2 died of signal 9 (SIGKILL)')
    assert not any(r.startswith('resumed') for r in verdict['reasons'])


def test_rows_show_skipped_as_skipped():
    rows = torchrun_verdict.report_rows([{'label': 'DDP training run', 'skipped': 'not run: torchrun all-reduce failed', 'passed': False,
                                          'reasons': []}])
    assert rows[0][7] == 'skipped'


def test_launch_reasons_ignore_nodes_that_were_not_read():
    assert torchrun_verdict.launch_reasons({'node1': launch_env(0), 'node2': None, 'node3': launch_env(2)}, NODES, MASTER) == []


def test_expected_ranks_follow_node_order_and_process_counts():
    assert torchrun_verdict.expected_ranks(NODES, {'node1': 2, 'node2': 1, 'node3': 3}) == {'node1': [0, 1], 'node2': [2], 'node3': [3, 4, 5]}


def test_judges_do_not_change_their_input():
    results = passing()
    before = copy.deepcopy(results)
    torchrun_verdict.judge_allreduce(results, NODES, {n: 1 for n in NODES}, {n: 0 for n in NODES}, MASTER)
    assert results == before


def test_rungs_that_cannot_run_are_skipped_or_name_the_nodes():
    where = 'in training_image localhost/probe:1'
    assert torchrun_verdict.blocked(NODES, ['node pairs'], {}, 'torchrun', where)['skipped'] == 'not run: node pairs failed'
    none = torchrun_verdict.blocked(NODES, [], {n: 127 for n in NODES}, 'torchrun', where)
    assert none['passed'] is None
    assert none['skipped'] == 'not run: no torchrun in training_image localhost/probe:1 on any node (install torch there to run the rungs)'
    some = torchrun_verdict.blocked(NODES, [], {'node1': 0, 'node2': 127, 'node3': 0}, 'torchrun', 'on the hosts (no training_image)')
    assert some['passed'] is False and some['reasons'] == ['node2: no torchrun on the hosts (no training_image), the other nodes have one']
    assert torchrun_verdict.blocked(NODES, [], {n: None for n in NODES}, 'torchrun', where) is None
    assert torchrun_verdict.blocked(NODES, [], {n: 0 for n in NODES}, 'torchrun', where) is None


def test_ranks_that_loaded_another_nccl_than_torchs_own_fail():
    # As on the GPU test machine: torch's pip NCCL 2.28.9, the system's 2.28.3 on LD_LIBRARY_PATH of one node.
    results = {node: result(node, record_line(node, rank, backend='nccl', nccl='2.28.9')) for rank, node in enumerate(NODES)}
    results['node3'] = result('node3', record_line('node3', 2, backend='nccl', nccl='2.28.3'))
    gpus = {n: 1 for n in NODES}
    verdict = torchrun_verdict.judge_allreduce(results, NODES, {n: 1 for n in NODES}, gpus, MASTER, {n: '2.28.9' for n in NODES})
    assert verdict['reasons'] == [
        'the ranks loaded different NCCL versions: 2.28.3 on node3; 2.28.9 on node1, node2',
        "node3's ranks loaded NCCL 2.28.3, but torch's own NCCL there is 2.28.9: another libnccl.so.2 won at run time "
        "(LD_LIBRARY_PATH)"]
    same = {node: result(node, record_line(node, rank, backend='nccl', nccl='2.28.9')) for rank, node in enumerate(NODES)}
    assert torchrun_verdict.judge_allreduce(same, NODES, {n: 1 for n in NODES}, gpus, MASTER, {'node1': '2.28.9', 'node2': None})['passed']
