# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

from ansible_collections.trainops.cluster.plugins.module_utils.nccl_tests.nccl_debug import parse_nccl_debug
from helpers.nccl_fixtures import real, variant


# ---------------------------------------------------------------- parse_nccl_debug

def test_debug_real_single_process():
    info = parse_nccl_debug(real('all_reduce_perf_debug.txt'))
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
    info = parse_nccl_debug(real('torch_allreduce.txt'))
    assert info['nccl_version'] == '2.28.9'
    assert info['transports'] == ['P2P/CUMEM']
    assert [(entry['rank'], entry['pid']) for entry in info['ranks']] == [(0, 1506), (1, 1507)]
    assert info['nnodes'] == 1
    assert info['channels'] == 24


def test_debug_two_nodes_over_infiniband():
    info = parse_nccl_debug(variant('mpirun_2x8_tagged.txt'))
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
    info = parse_nccl_debug(variant('socket_with_ib_debug.txt'))
    assert info['transports'] == ['NET/Socket', 'P2P/CUMEM']
    assert info['networks'] == ['Socket']
    assert info['ib_no_device_hosts'] == ['node1', 'node2']
    assert info['socket_interfaces'] == ['eth0:10.0.0.1<0>', 'eth1:10.1.0.1<0>', 'eth0:10.0.0.2<0>', 'eth1:10.1.0.2<0>']


def test_debug_aborted_warning_lines():
    info = parse_nccl_debug(variant('mpirun_2x2_aborted.txt'))
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
    info = parse_nccl_debug(text)
    assert info['transports'] == ['CollNet', 'NET/AWS Libfabric', 'NET/IB', 'NVLS', 'P2P/IPC', 'SHM']
    assert info['transports_by_host'] == {'a': ['NET/AWS Libfabric', 'NET/IB', 'P2P/IPC', 'SHM'], 'b': ['CollNet', 'NVLS'], 'c': ['NVLS']}
    assert info['nvls_channels'] == 16
    assert info['channels'] == 32
    assert info['net_plugin']['loaded'] is True
    assert info['net_plugin']['name'] == 'NCCL RDMA Plugin v8'
    assert info['ib_devices_by_host'] == {'c': ['mlx5_0:1/RoCE', 'mlx5_1:1:0/IB']}
    assert info['nccl_version'] is None
    assert info['ranks'] == []
