# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import os

import pytest

from ansible_collections.trainops.cluster.plugins.module_utils import gpu
from ansible_collections.trainops.cluster.plugins.plugin_utils.nccl_tests.bandwidth import link_limit_gbps
from helpers.nccl_fixtures import H200_NVLINK, ROOT


# ---------------------------------------------------------------- link_limit_gbps

def test_limit_single_gpu():
    assert link_limit_gbps(H200_NVLINK, {}, 'gpu')['limit_gbps'] is None


def test_limit_nvlink_h200():
    limit = link_limit_gbps(H200_NVLINK, None, 'node')
    assert limit['limit_gbps'] == pytest.approx(478.1)
    assert limit['kind'] == 'NVLink'
    assert '18 links x 26.562 GB/s' in limit['basis']
    computed = link_limit_gbps({'nvlink': {'links_per_gpu': 18, 'link_speed_gbps': 26.562}}, None, 'node')
    assert computed['limit_gbps'] == pytest.approx(478.1)


def test_limit_pcie_and_unknown_node():
    limit = link_limit_gbps({'nvlink': None, 'pcie': {'gen': 5, 'width': 16}}, None, 'node')
    assert limit['limit_gbps'] == pytest.approx(63.0)
    assert limit['kind'] == 'PCIe'
    assert link_limit_gbps({'nvlink': {'links_per_gpu': 0, 'link_speed_gbps': None}}, None, 'node')['limit_gbps'] is None
    assert link_limit_gbps(None, None, 'node') == {'limit_gbps': None, 'basis': 'no NVLink or PCIe link facts for this node', 'kind': None}


def test_limit_pcie_from_gathered_facts_of_a_pcie_node():
    """4x L40S without NVLink (variant fixture): the limit comes from the PCIe link gpu_facts reads from the XML."""
    pcie_node = os.path.join(ROOT, 'tests', 'fixtures', 'gpu', 'variants', 'l40sx4-pcie')
    with open(os.path.join(pcie_node, 'nvidia-smi-q.xml')) as xml, open(os.path.join(pcie_node, 'nvlink-s.txt')) as nvlink:
        facts = gpu.gather(smi_xml=xml.read(), nvlink=nvlink.read())
    limit = link_limit_gbps(facts, None, 'node')
    assert (limit['limit_gbps'], limit['kind']) == (63.0, 'PCIe')


def test_limit_infiniband_counts_active_ports_only():
    ports = [{'device': 'mlx5_%d' % index, 'port': 1, 'state': 'ACTIVE', 'rate_gbps': 400.0, 'link_layer': 'InfiniBand'}
             for index in range(8)]
    ports.append({'device': 'mlx5_8', 'port': 1, 'state': 'DOWN', 'rate_gbps': 400.0, 'link_layer': 'InfiniBand'})
    ports.append({'device': 'mlx5_9', 'port': 1, 'state': '4: ACTIVE', 'rate_gbps': None, 'link_layer': 'InfiniBand'})
    limit = link_limit_gbps(H200_NVLINK, {'infiniband': ports}, 'multi_node')
    assert limit['limit_gbps'] == pytest.approx(400.0)
    assert limit['kind'] == 'InfiniBand'
    assert limit['basis'].startswith('8 active InfiniBand ports (mlx5_0:1 400 Gb/s')
    assert limit['basis'].endswith('= 3200 Gb/s = 400.0 GB/s')


def test_limit_roce_and_ethernet():
    roce = [{'device': 'mlx5_0', 'port': 1, 'state': '4: ACTIVE', 'rate_gbps': 200.0, 'link_layer': 'Ethernet'}]
    limit = link_limit_gbps({}, {'infiniband': roce}, 'multi_node')
    assert (limit['limit_gbps'], limit['kind']) == (25.0, 'RoCE')
    nics = [{'name': 'lo', 'state': 'UNKNOWN', 'speed_mbps': 100000}, {'name': 'eth0', 'state': 'UP', 'speed_mbps': 25000},
            {'name': 'eth1', 'state': 'DOWN', 'speed_mbps': 100000}, {'name': 'eth2', 'state': 'UP', 'speed_mbps': -1}]
    limit = link_limit_gbps({}, {'infiniband': [], 'interfaces': nics}, 'multi_node')
    assert limit['limit_gbps'] == pytest.approx(3.1)
    assert limit['kind'] == 'Ethernet'
    assert limit['basis'].startswith('Ethernet eth0 at 25000 Mb/s')
    assert link_limit_gbps({}, {}, 'multi_node')['limit_gbps'] is None


def test_limit_bad_scope():
    with pytest.raises(ValueError):
        link_limit_gbps({}, {}, 'rack')
