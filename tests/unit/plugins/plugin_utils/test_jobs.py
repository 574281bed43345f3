# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Training jobs: the pre-flight's findings and a job's status, on real torchrun output (tests/fixtures/torchrun)."""

import base64
import os

from ansible_collections.trainops.cluster.plugins.module_utils import _oom as oom
from ansible_collections.trainops.cluster.plugins.plugin_utils import jobs

NODES = ['node1', 'node2', 'node3']
MASTER = '10.96.0.11:29500'
ADDRESSES = {'node1': '10.96.0.11', 'node2': '10.96.0.12', 'node3': '10.96.0.13'}
FIXTURES = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'fixtures', 'torchrun')
RECORD = {'name': 'ddp1', 'run_id': 'trainops-job-ddp1-1'}


def env(rank):
    text = 'NNODES=3\nNODE_RANK=%d\nNPROC_PER_NODE=1\nMASTER_ADDR=10.96.0.11\nMASTER_PORT=29500\n' % rank
    return base64.b64encode(text.encode()).decode()


def preflight(**changes):
    args = {'launch_env_b64': {n: env(i) for i, n in enumerate(NODES)}, 'matrix': {'messages': []},
            'listeners': {n: [{'port': 29500, 'state': 'listening'}] for n in NODES},
            'writes': {n: {'dest': '/mnt/shared/jobs/.preflight-' + n} for n in NODES},
            'seen': ['.preflight-' + n for n in NODES]}
    args.update(changes)
    return jobs.preflight(NODES, args['launch_env_b64'], MASTER, args['matrix'], args['listeners'], args['writes'], args['seen'],
                          '/mnt/shared/jobs')


def report(node, state='running', rc=None, ended=None, stopped_by=None, log=None, progress=None, run_id=None, **extra):
    """A node's report as trainops-job prints it (roles/train/files/trainops_job/report.py)."""
    return dict({'node': node, 'run_id': run_id or RECORD['run_id'], 'now': 1004.5, 'state': state, 'running': state == 'running',
                 'failed': rc not in (None, 0) and not stopped_by, 'rc': rc, 'stopped_by': stopped_by, 'ended': ended,
                 'progress': progress, 'log': log or []}, **extra)


def reports(*parts, record=None, supervisor=None):
    """{node: report}, the first node's with the job record and the supervisor's view."""
    found = {part['node']: part for part in parts}
    found[NODES[0]] = dict(found[NODES[0]], job=record or RECORD, supervisor=supervisor)
    return found


def test_a_clean_cluster_has_no_findings():
    assert preflight() == []


def test_findings_name_each_node_and_cause():
    envs = {n: env(i) for i, n in enumerate(NODES)}
    envs['node3'] = env(0)
    envs['node2'] = None
    findings = preflight(
        launch_env_b64=envs,
        matrix={'messages': ['node3 -> node1 (29500): timed out', 'node1 -> node2 (29500): timed out']},
        listeners={'node1': [{'port': 29500, 'state': 'served'}]},
        writes={'node1': {'dest': 'x'}, 'node2': {'msg': 'Permission denied'}, 'node3': {'dest': 'x'}},
        seen=['.preflight-node1'])
    assert findings == [
        'node2: no launch environment (run site.yml --tags launch)',
        'node1 and node3 both claimed NODE_RANK 0 (in their launch.env): the rendezvous waits for the node that should hold '
        'the missing rank',
        'node1: the master port 29500 is in use (another program listens there; a job still running?)',
        'master port: node3 -> node1 (29500): timed out',
        'node2: cannot write to /mnt/shared/jobs as the training user: Permission denied',
        'node3: wrote to /mnt/shared/jobs, but node1 does not see the file: not the same shared storage',
    ]


def test_a_running_job_with_its_progress():
    progress = {'run_id': RECORD['run_id'], 'step': 12, 'step_at': 1000.0, 'points': [[940.0, 2, None], [970.0, 7, 0.4], [1000.0, 12, 0.3]]}
    status = jobs.status(NODES, reports(report('node1', progress=progress, log=['TRAINOPS {"event": "step", "step": 12}']),
                                        report('node2', run_id='an-earlier-start', progress={'step': 99}), report('node3')), ADDRESSES)
    assert status['verdict'] == 'partly running: node2' and status['first_failed'] is None
    assert status['rows'][0][:5] == ['node1', 'running', '12', '4.5 s ago', '10.0']
    # An earlier start's report is not this one's.
    assert status['rows'][1][:5] == ['node2', 'no part of this start', '-', '-', '-']
    assert status['nodes']['node1']['points'][-1] == [1000.0, 12, 0.3]


def test_a_stalled_job_says_so_with_the_supervisors_diagnosis():
    supervisor = {'run_id': RECORD['run_id'], 'state': 'stalled', 'stall_seconds': 15.0}
    verdict = "stalled at step 53: rank 1 (node2) is stopped; ranks 0, 2 wait in backward (DDP's gradient all-reduce)"
    record = dict(RECORD, events=[{'event': 'stall', 'run_id': 'an-earlier-start', 'at': 1.0},
                                  {'event': 'stall', 'run_id': RECORD['run_id'], 'at': 2.0},
                                  {'event': 'diagnosis', 'run_id': RECORD['run_id'], 'at': 3.0, 'verdict': verdict}])
    status = jobs.status(NODES, reports(*(report(n) for n in NODES), record=record, supervisor=supervisor), ADDRESSES)
    assert status['verdict'] == 'stalled: no node logged a new step for 15.0 s'
    assert status['diagnosis'] == verdict and [e['at'] for e in status['events']] == [2.0, 3.0]


def test_a_job_whose_steps_are_not_recognised_says_so():
    note = 'progress unknown: no step recognised in 4 min; set train_progress_pattern'
    status = jobs.status(NODES, reports(*(report(n) for n in NODES), supervisor={'state': 'waiting for the first step', 'note': note}),
                         ADDRESSES)
    assert status['verdict'] == 'running' and status['note'] == note


def test_a_job_the_supervisor_stopped_after_a_stall():
    record = dict(RECORD, events=[{'event': 'stop', 'run_id': RECORD['run_id'], 'why': 'stalled (train_on_stall: stop)'}])
    status = jobs.status(NODES, reports(*(report(n, 'stopped: stalled', rc=143, stopped_by='train_on_stall=stop') for n in NODES),
                                        record=record), ADDRESSES)
    assert status['verdict'] == 'stopped after a stall (train_on_stall)' and status['first_failed'] is None
    assert {row[1] for row in status['rows']} == {'stopped: stalled'}


def test_a_slurm_job_queued_runs_nowhere():
    queued = jobs.status(NODES, reports(*(report(n, 'not started') for n in NODES)), ADDRESSES,
                         {'SlurmState': 'PENDING', 'SlurmReason': 'ReqNodeNotAvail'})
    assert queued['verdict'] == 'queued in Slurm (ReqNodeNotAvail)' and queued['rows'][0][1] == 'queued: ReqNodeNotAvail'


def test_the_node_whose_rank_was_killed_failed_first_though_a_peer_ended_sooner():
    with open(os.path.join(FIXTURES, 'killed-rank.log')) as handle:
        killed = handle.read().splitlines()
    parts = reports(report('node1', 'failed: exited 1', 1, '2026-12-01T12:44:21.0Z',
                           log=['RuntimeError: [../gloo/transport/tcp/pair.cc:598] Connection closed by peer [10.96.0.12]:50123']),
                    report('node2', 'failed: exited 1', 1, '2026-12-01T12:44:25.0Z', log=killed),
                    report('node3', 'stopped: node1 failed', 143, '2026-12-01T12:44:27.0Z', stopped_by='node1', log=['terminated']))
    status = jobs.status(NODES, parts, ADDRESSES)
    assert status['first_failed'] == 'node2' and status['verdict'] == 'failed: node2 failed first'
    assert status['nodes']['node3']['state'] == 'stopped: node1 failed'


def test_a_rank_the_kernel_killed_for_memory_is_said_in_the_verdict():
    # node2's exit record held the kernel's OOM kill of its rank (the runner's, from the kernel log): its state says it.
    killed = oom.said([{'pid': 4242, 'task': 'python3', 'uid': 2000, 'memcg': True, 'rss_kb': 2004000}])
    with open(os.path.join(FIXTURES, 'killed-rank.log')) as handle:
        log = handle.read().splitlines()
    parts = reports(report('node1', 'stopped: node2 failed', 143, '2026-12-01T12:44:27.0Z', stopped_by='node2'),
                    report('node2', 'failed: exited 1; %s' % killed, 1, '2026-12-01T12:44:25.0Z', log=log),
                    report('node3', 'stopped: node2 failed', 143, '2026-12-01T12:44:27.0Z', stopped_by='node2'))
    status = jobs.status(NODES, parts, ADDRESSES)
    assert status['verdict'] == ("failed: node2 failed first (killed by the kernel's OOM killer: python3 (pid 4242) held 1.9 GiB "
                                 "(its container's memory limit))")


def test_the_killed_ranks_node_is_found_through_pdshs_labels():
    # deepspeed --hostfile relays every node's output through pdsh, each line labelled with the node's name.
    with open(os.path.join(FIXTURES, 'killed-rank.log')) as handle:
        killed = ['node2: ' + line for line in handle.read().splitlines()]
    parts = reports(report('node1', 'failed: exited 1', 1, '2026-12-01T12:44:21.0Z',
                           log=['node1: RuntimeError: [../gloo/transport/tcp/pair.cc:598] Connection closed by peer [10.96.0.13]:50123']),
                    report('node2', 'failed: exited 1', 1, '2026-12-01T12:44:25.0Z', log=killed),
                    report('node3', 'failed: exited 1', 1, '2026-12-01T12:44:23.0Z', log=['node3: terminated']))
    # node1 blames node3, and node1 ended first; node2's log says its rank was killed.
    assert jobs.status(NODES, parts, ADDRESSES)['first_failed'] == 'node2'


def test_the_peer_that_went_away_is_named_when_no_log_shows_a_signal():
    parts = reports(report('node1', 'failed: exited 1', 1, '2026-12-01T12:44:21.0Z', log=['RuntimeError: Connection closed by peer [10.96.0.13]:50123']),
                    report('node2', 'not started'), report('node3', 'failed: exited 1', 1, '2026-12-01T12:44:29.0Z'))
    assert jobs.status(NODES, parts, ADDRESSES)['first_failed'] == 'node3'


def test_a_runner_that_ended_without_its_record_failed():
    parts = reports(report('node1', 'failed: its runner ended without a record', failed=True), report('node2'), report('node3'))
    parts['node1']['running'] = False
    status = jobs.status(NODES, parts, ADDRESSES)
    assert status['first_failed'] == 'node1' and status['verdict'] == 'failed: node1 failed first'


def test_succeeded_stopped_and_unknown_jobs():
    done = reports(*(report(n, 'exited 0', 0, '2026-12-01T12:50:00Z') for n in NODES))
    assert jobs.status(NODES, done, ADDRESSES)['verdict'] == 'succeeded'
    stopped = reports(*(report(n, 'stopped', 143, '2026-12-01T12:50:00Z', stopped_by='train_action=stop') for n in NODES))
    status = jobs.status(NODES, stopped, ADDRESSES)
    assert status['verdict'] == 'stopped' and status['first_failed'] is None
    assert jobs.status(NODES, {n: None for n in NODES}, ADDRESSES)['verdict'] == 'no such job'


def test_failed_nodes_without_end_times_are_named_in_rank_order():
    # Units that failed with no exit record: the same nodes name the same one, in whatever order they come.
    assert jobs.first_failed(['node3', 'node2'], {}, ADDRESSES, {}) == 'node2'
    assert jobs.first_failed(['node2', 'node3'], {}, ADDRESSES, {'node2': None, 'node3': None}) == 'node2'
    # An end time still comes first.
    assert jobs.first_failed(['node1', 'node3'], {}, ADDRESSES, {'node1': '2026-12-01T12:44:29Z', 'node3': '2026-12-01T12:44:21Z'}) == 'node3'


def test_a_job_restarting_after_a_failure_and_its_starts():
    parts = reports(report('node1', 'failed: exited 1; restart pending', rc=1, restarting=True, failed=False), report('node2', restarting=True,
                    state='stopped: node1 failed; restart pending', rc=143, stopped_by='node1'), report('node3', 'not started'))
    assert jobs.status(NODES, parts, ADDRESSES)['verdict'] == "restarting: node1, node2 wait for the supervisor's restart"
    record = dict(RECORD, nodes=NODES, events=[
        {'event': 'restart', 'run_id': RECORD['run_id'], 'attempt': 1, 'nodes': ['node1', 'node2'], 'why': 'node3 failed first (train_on_failure: restart)'}])
    status = jobs.status(NODES, reports(*(report(n) for n in NODES), record=record), ADDRESSES)
    assert status['starts'][1] == {'attempt': 1, 'nodes': ['node1', 'node2'], 'why': 'node3 failed first (train_on_failure: restart)'}
    assert status['starts_text'] == 'restarted 1 time: on 3 nodes, then 2 (node3 failed first (train_on_failure: restart))'


def test_without_the_first_node_the_job_is_told_by_the_others():
    parts = reports(*(report(n) for n in NODES))
    parts['node2'] = dict(parts['node2'], job=RECORD)
    del parts['node1']
    status = jobs.status(NODES, parts, ADDRESSES)
    assert status['verdict'] == 'partly running: node1' and status['note'].startswith('node1 gave no report: the job\'s supervisor runs there')


def test_without_the_first_node_a_failure_waiting_for_its_restart_is_said_not_restarted():
    # node1 (the supervisor's node) powered off: node2 and node3 failed (their peer went away) and wait for a restart
    # that cannot come, then end for good once the supervisor has been silent for train_supervisor_silence.
    waiting = reports(report('node1'), report('node2', 'failed: exited 1; restart pending', rc=1, restarting=True),
                      report('node3', 'failed: exited 1; restart pending', rc=1, restarting=True))
    ended = reports(report('node1'), report('node2', 'failed: exited 1; not restarted: the supervisor is silent', rc=1,
                                            not_restarted='the supervisor is silent'), report('node3', 'failed: exited 1', rc=1))
    for parts in (waiting, ended):
        parts['node2'] = dict(parts['node2'], job=RECORD)
        del parts['node1']
        status = jobs.status(NODES, parts, ADDRESSES, unreachable=['node1'])
        assert status['verdict'].endswith('; not restarted: node1, where the supervisor runs, gave no report'), status['verdict']
        assert status['nodes']['node1']['state'] == jobs.UNREACHABLE
    # With a log that names node1's address as the peer that went away, node1 is named first.
    log = ['[default0]:RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer [10.96.0.11]:47838']
    ended['node3'] = dict(ended['node3'], log=log)
    assert jobs.status(NODES, ended, ADDRESSES, unreachable=['node1'])['verdict'] == (
        'failed: node1 failed first; not restarted: node1, where the supervisor runs, gave no report')
    # node1 there and still supervising: a restart may come.
    assert 'not restarted' not in jobs.status(NODES, reports(*(report(n, 'failed: exited 1; restart pending', rc=1, restarting=True)
                                                               for n in NODES)), ADDRESSES)['verdict']


def test_a_node_a_restart_went_on_without_is_shown_left_out():
    record = dict(RECORD, nodes=NODES, events=[
        {'event': 'left out', 'run_id': RECORD['run_id'], 'node': 'node3', 'why': 'unreachable on the training network (timed out)'},
        {'event': 'restart', 'run_id': RECORD['run_id'], 'attempt': 1, 'nodes': ['node1', 'node2'], 'why': 'a stall at step 12',
         'at': 1000.0}])
    # The restarted parts run, but no step since the restart: restarting until the new attempt logs one.
    parts = reports(report('node1', progress={'step': 12, 'step_at': 990.0, 'points': [[990.0, 12, None]]}), report('node2'), record=record)
    status = jobs.status(NODES, parts, ADDRESSES)
    assert status['nodes']['node3']['state'] == 'left out: unreachable on the training network (timed out)'
    assert status['verdict'] == 'restarting: attempt 1 on node1, node2, no step logged yet'
    parts = reports(report('node1', progress={'step': 13, 'step_at': 1003.0, 'points': [[990.0, 12, None], [1003.0, 13, None]]}),
                    report('node2'), record=record)
    status = jobs.status(NODES, parts, ADDRESSES)
    assert status['verdict'] == 'running on 2 of 3 nodes (node3 left out)'
    assert status['starts_text'] == 'restarted 1 time: on 3 nodes, then 2 (a stall at step 12)'


def test_each_restart_says_the_accumulation_that_kept_the_global_batch():
    record = dict(RECORD, nodes=NODES, events=[
        {'event': 'restart', 'run_id': RECORD['run_id'], 'attempt': 1, 'nodes': ['node1', 'node2'], 'why': 'node3 lost', 'at': 990.0,
         'accumulation': 6, 'batch_change': 0.0},
        {'event': 'restart', 'run_id': RECORD['run_id'], 'attempt': 2, 'nodes': ['node1'], 'why': 'node2 lost', 'at': 995.0,
         'accumulation': 11, 'batch_change': -0.083}])
    status = jobs.status(NODES, reports(report('node1', progress={'step': 3, 'step_at': 1000.0, 'points': [[1000.0, 3, None]]}),
                                        record=record), ADDRESSES)
    assert status['starts_text'] == ('restarted 2 times: on 3 nodes, then 2 (node3 lost; accumulation 6: the global batch kept), '
                                     'then 1 (node2 lost; accumulation 11: the global batch 8 % smaller)')
    assert status['starts'][2]['batch'] == 'accumulation 11: the global batch 8 % smaller'


def test_a_restart_says_the_conversion_of_its_checkpoint():
    converted = "checkpoint-20 converted to DeepSpeed's universal checkpoint in 12.7 s"
    record = dict(RECORD, nodes=NODES, events=[
        {'event': 'checkpoint converted', 'run_id': RECORD['run_id'], 'checkpoint': 'checkpoint-20', 'seconds': 12.7,
         'why': converted, 'at': 989.0},
        {'event': 'restart', 'run_id': RECORD['run_id'], 'attempt': 1, 'nodes': ['node1', 'node2'], 'why': 'node3 lost', 'at': 990.0,
         'converted': converted, 'accumulation': 3, 'batch_change': 0.0}])
    status = jobs.status(NODES, reports(report('node1', progress={'step': 21, 'step_at': 1000.0, 'points': [[1000.0, 21, None]]}),
                                        record=record), ADDRESSES)
    assert status['starts_text'] == ("restarted 1 time: on 3 nodes, then 2 (node3 lost; checkpoint-20 converted to DeepSpeed's "
                                     "universal checkpoint in 12.7 s; accumulation 3: the global batch kept)")


def test_a_lost_node_is_named_as_failed_first_not_the_survivor_that_ended_first():
    """node3 powered off: it wrote nothing; node1's and node2's ranks failed because it went away (node2's ended first).
    The supervisor's failure event names node3 lost, and stopped the others (train_on_failure: stop)."""
    why = 'node3 stopped answering: unreachable on the training network (timed out)'
    record = dict(RECORD, nodes=NODES, events=[
        {'event': 'failure', 'run_id': RECORD['run_id'], 'attempt': 0, 'nodes': ['node3'], 'first': 'node3', 'lost': ['node3'], 'why': why},
        {'event': 'stop', 'run_id': RECORD['run_id'], 'why': why, 'guard': True}])
    parts = reports(report('node1', 'stopped: node3 failed', rc=1, stopped_by='node3', ended='2026-12-06T10:00:09Z'),
                    report('node2', 'failed: exited 1', rc=1, ended='2026-12-06T10:00:05Z'), record=record)
    status = jobs.status(NODES, parts, ADDRESSES, unreachable=['node3'])
    assert status['first_failed'] == 'node3'
    assert status['verdict'] == 'failed: node3 failed first; not restarted: ' + why
    # Restarted without it (train_on_failure: restart), then stopped by the user: stopped, no failure of the job.
    record['events'] = [record['events'][0], {'event': 'restart', 'run_id': RECORD['run_id'], 'attempt': 1, 'nodes': ['node1', 'node2'],
                                              'why': why + ' (train_on_failure: restart)', 'at': 1000.0}]
    parts = reports(report('node1', 'stopped', rc=0, stopped_by='train_action=stop'),
                    report('node2', 'stopped', rc=0, stopped_by='train_action=stop'), record=record)
    status = jobs.status(NODES, parts, ADDRESSES, unreachable=['node3'])
    assert status['first_failed'] is None and status['verdict'] == 'stopped', status['verdict']


def test_the_guard_that_stopped_a_failing_job_is_named_in_its_verdict():
    why = 'crash loop: 3 restarts, no checkpoint after step 40'
    record = dict(RECORD, nodes=NODES, events=[{'event': 'stop', 'run_id': RECORD['run_id'], 'why': why, 'guard': True}])
    parts = reports(report('node1', 'failed: exited 1', rc=1), report('node2', 'stopped: node1 failed', rc=143, stopped_by='node1'),
                    report('node3', 'stopped: node1 failed', rc=143, stopped_by='node1'), record=record)
    assert jobs.status(NODES, parts, ADDRESSES)['verdict'] == 'failed: node1 failed first; not restarted: ' + why
    # Stopped by the guard after a stall's restarts: no node failed on its own.
    parts = reports(*(report(n, 'stopped: stalled', rc=143, stopped_by='train_on_stall=stop') for n in NODES),
                    record=dict(record, events=[dict(record['events'][0], why='the restart limit (2)')]))
    assert jobs.status(NODES, parts, ADDRESSES)['verdict'] == 'stopped after a stall (train_on_stall): the restart limit (2)'


def test_a_node_the_controller_cannot_reach_is_said_so_unless_a_restart_left_it_out():
    parts = reports(report('node1'), report('node2'))
    status = jobs.status(NODES, parts, ADDRESSES, unreachable=['node3'])
    assert status['nodes']['node3']['state'] == 'unreachable from the controller: no report'
    assert status['verdict'] == 'partly running: node3'


def test_gloo_read_error_names_the_peer_that_went_away():
    logs = {'node1': ['[rank0]: RuntimeError: [./gloo/transport/tcp/pair.cc:525] Read error [10.96.0.13]:13030: Connection reset by peer']}
    assert jobs.first_failed(['node1', 'node2'], logs, ADDRESSES, {'node1': None, 'node2': None}) == 'node3'


def test_a_spare_is_shown_standing_by_and_judged_once_a_restart_brings_it_in():
    """node4 is a spare (group cluster_spare): standing by it is shown, not judged; in node3's place it is judged."""
    nodes = NODES + ['node4']
    addresses = dict(ADDRESSES, node4='10.96.0.14')
    record = dict(RECORD, nodes=NODES, spares=['node4'], events=[])
    standby = dict(report('node4', 'standby (a spare)', standby=True), running=True)
    status = jobs.status(nodes, reports(report('node1'), report('node2'), report('node3'), standby, record=record), addresses)
    assert status['verdict'] == 'running' and status['nodes']['node4']['standby']
    assert status['nodes']['node4']['state'] == 'standby (a spare)'
    # Ended with the supervision, never brought in: the job's verdict is its world's.
    ended = report('node4', 'standby ended: not needed', rc=0, stopped_by='not needed', standby=True)
    done = [report(n, 'exited 0', rc=0) for n in NODES]
    assert jobs.status(nodes, reports(*done, ended, record=record), addresses)['verdict'] == 'succeeded'
    # No part on the spare at all (Slurm starts the world alone): not judged either.
    assert jobs.status(nodes, reports(*done, record=record), addresses)['verdict'] == 'succeeded'
    # In node3's place after node3 was left out.
    record['events'] = [
        {'event': 'left out', 'run_id': RECORD['run_id'], 'node': 'node3', 'why': 'unreachable on the training network (timed out)'},
        {'event': 'spare joined', 'run_id': RECORD['run_id'], 'node': 'node4', 'replaces': 'node3'},
        {'event': 'restart', 'run_id': RECORD['run_id'], 'attempt': 1, 'nodes': ['node1', 'node2', 'node4'], 'why': 'node3 failed first'}]
    stepping = {'step': 31, 'step_at': 1003.0, 'points': [[1003.0, 31, None]]}  # the new attempt's first step
    status = jobs.status(nodes, reports(report('node1', progress=stepping), report('node2'), report('node4'), record=record), addresses,
                         unreachable=['node3'])
    assert status['verdict'] == 'running on 3 nodes: node4 (a spare) in place of node3', status['verdict']
    assert status['nodes']['node3']['state'].startswith('left out: unreachable') and not status['nodes']['node4']['standby']
    assert status['starts_text'] == 'restarted 1 time: on 3 nodes, then 3 (node3 failed first)'


def test_every_verdict_has_its_place_on_the_pages_scale():
    """The words status() says, judged where they are said (the report page colours a job by verdict_scale)."""
    cases = {'failed: node1 failed first; not restarted: crash loop: 3 restarts, no checkpoint at all': 'fail',
             'stopped after a stall (train_on_stall): the restart limit (2)': 'fail', 'running': 'pass', 'succeeded': 'pass',
             'running on 2 of 3 nodes (node3 left out)': 'warn', 'running on 2 nodes: node3 (a spare) in place of node2': 'warn',
             'partly running: node2': 'warn', 'queued in Slurm (Resources)': 'warn', 'stalled: no node logged a new step for 15 s': 'warn',
             'restarting: node1, node2 wait for the supervisor\'s restart': 'warn', 'stopped': None, 'no such job': None}
    assert {verdict: jobs.verdict_scale(verdict) for verdict in cases} == cases


BOUND = {'kind': 'communication-bound', 'node': 'node2', 'text': "communication-bound: every node's ranks wait in collectives ..."}


def test_a_scaling_run_says_what_each_size_buys_and_what_held_it_back():
    events = [{'event': 'scale', 'run_id': RECORD['run_id'], 'world': 1, 'nodes': ['node1'], 'steps_per_second': 2.0},
              {'event': 'scale', 'run_id': RECORD['run_id'], 'world': 2, 'nodes': ['node1', 'node2'], 'steps_per_second': 1.8},
              {'event': 'scale', 'run_id': RECORD['run_id'], 'world': 3, 'nodes': NODES, 'steps_per_second': 1.4, 'bound': BOUND,
               'ranks': 24, 'samples_per_rank': 4},
              {'event': 'scaled', 'run_id': RECORD['run_id'], 'sizes': [1, 2, 3]}]
    events[1]['bound'] = {'kind': 'healthy', 'node': None, 'text': 'nothing held it back'}
    record = dict(RECORD, nodes=NODES, events=events)
    parts = reports(*(report(n, 'stopped: scaling measured', rc=143, stopped_by='train_action=scale: measured') for n in NODES),
                    record=record)
    status = jobs.status(NODES, parts, ADDRESSES)
    assert status['verdict'] == 'scaled: 2 nodes 1.8x 1 node (90 %), 3 nodes 2.1x (70 %, communication-bound (node2))'
    assert jobs.verdict_scale(status['verdict']) == 'pass'
    assert [(r['world'], r['speedup'], r['efficiency']) for r in status['scale']] == [(1, 1.0, 1.0), (2, 1.8, 0.9), (3, 2.1, 0.7)]
    assert [row[6] for row in status['scale_rows']] == ['not judged', 'healthy', 'communication-bound (node2)']
    # 1.4 steps/s x 4 samples a rank x 24 ranks; the sizes without a batch or a rank count say none.
    assert status['scale_rows'][2] == ['3', 'node1, node2, node3', '1.4', '134.4', '2.1x', '70 %', 'communication-bound (node2)', '']
    assert [row[3] for row in status['scale_rows'][:2]] == ['-', '-']
    assert status['scale_notes'] == ["3 nodes: communication-bound: every node's ranks wait in collectives ..."]
    # A size that did not log its steps in time ends the run: named, and the verdict is a part.
    events[2] = {'event': 'scale', 'run_id': RECORD['run_id'], 'world': 3, 'nodes': NODES,
                 'error': '4 of 26 steps within 300 s (train_scale_timeout)'}
    status = jobs.status(NODES, parts, ADDRESSES)
    assert status['verdict'] == 'scaled in part: 2 nodes 1.8x 1 node (90 %); 3 nodes not measured: 4 of 26 steps within 300 s (train_scale_timeout)'
    assert jobs.verdict_scale(status['verdict']) == 'warn' and status['scale_rows'][2][2:7] == ['-', '-', '-', '-', '-']


def test_a_straggler_makes_a_running_job_slow():
    slow = {'node': 'node3', 'busy': 0.97, 'others': 0.225, 'ratio': 4.31,
            'text': "straggler: node3's ranks are busy 97 % of the time, the other nodes' 22 % (they wait for it); it computes at least 4.3x longer per step"}
    status = jobs.status(NODES, reports(*(report(n) for n in NODES), supervisor={'slow': slow}), ADDRESSES)
    assert status['verdict'] == 'running, slow: ' + slow['text'] and status['slow'] == slow
    assert jobs.verdict_scale(status['verdict']) == 'warn'
