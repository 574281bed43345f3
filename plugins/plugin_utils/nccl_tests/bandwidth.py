# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The link limit a rung's busbw is measured against, from gathered GPU and comm facts.

NVLink, else PCIe (per-lane table) inside a node; active InfiniBand/RoCE ports, else the fastest Ethernet
interface, between nodes.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.trainops.cluster.plugins.module_utils.nccl_tests.perf_json import int_or_none

# The share of a link's limit that a rung's busbw must reach where the user sets no verify_min_fraction, by the link's
# kind (docs/verify.md's table, with its sources); any other link DEFAULT_FRACTION. NVLink: 2x H200 without NVLS
# reached 73 % here (docs/verify.md), Azure's node checks ask 90 % of it on 8 GPUs with NVLS (431 GB/s); 60 % passes
# both and fails a GPU whose links run at half. InfiniBand and RoCE: Google's cluster-health-scanner accepts 250 GB/s
# across two A3 Ultra nodes (8x 400 Gb/s, 400 GB/s): 62.5 %.
LINK_FRACTIONS = {"NVLink": 0.6, "InfiniBand": 0.6, "RoCE": 0.6, "InfiniBand+RoCE": 0.6}
DEFAULT_FRACTION = 0.5

# Per-lane, per-direction PCIe payload bandwidth in GB/s after line coding (8b/10b, 128b/130b, FLIT).
_PCIE_GBPS_PER_LANE = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}


def pcie_gbps(gen: object, width: object) -> float | None:
    """A PCIe link's bytes per second each way (GB/s) at generation `gen` and `width` lanes, or None where unknown."""
    generation, lanes = int_or_none(gen), int_or_none(width)
    per_lane = _PCIE_GBPS_PER_LANE.get(generation) if generation is not None else None
    return round(per_lane * lanes, 1) if per_lane is not None and lanes else None


def link_limit_gbps(gpu_facts: dict[str, Any] | None, comm_facts: dict[str, Any] | None, scope: str) -> dict[str, Any]:
    """Bandwidth a rung's busbw is measured against, in GB/s per direction like nccl-tests busbw.

    scope "gpu": one GPU, nothing crosses a link: limit None. scope "node": NVLink per GPU from
    gpu_facts['nvlink'] {links_per_gpu, link_speed_gbps, bandwidth_gbps_per_gpu} (GB/s, as nvidia-smi prints;
    bandwidth_gbps_per_gpu wins, else links x speed), else PCIe from gpu_facts['pcie'] {gen, width} (gpu.summarize_pcie:
    the slowest GPU's maximum link). scope
    "multi_node": the sum of ACTIVE InfiniBand/RoCE port rates (comm_facts['infiniband'] [{device, port, state,
    rate_gbps, link_layer}], Gb/s) / 8, else the fastest Ethernet interface that is up (comm_facts['interfaces']
    [{name, state, speed_mbps}]). Returns {limit_gbps (None when unknown), basis (human text), kind ("NVLink",
    "PCIe", "InfiniBand", "RoCE", "InfiniBand+RoCE", "Ethernet" or None)}. Raises ValueError on another scope.
    """
    gpu_facts = gpu_facts or {}
    comm_facts = comm_facts or {}
    if scope == 'gpu':
        return {'limit_gbps': None, 'basis': 'single GPU: no link between GPUs is exercised', 'kind': None}
    if scope == 'node':
        return _node_limit(gpu_facts)
    if scope == 'multi_node':
        return _network_limit(comm_facts)
    raise ValueError('scope must be gpu, node or multi_node, not %r' % (scope,))


def _node_limit(gpu_facts: dict[str, Any]) -> dict[str, Any]:
    nvlink = gpu_facts.get('nvlink') or {}
    links = nvlink.get('links_per_gpu') or 0
    speed = nvlink.get('link_speed_gbps') or 0
    total = nvlink.get('bandwidth_gbps_per_gpu') or links * speed
    if total > 0:
        detail = ' (%d links x %g GB/s)' % (links, speed) if links and speed else ''
        return {'limit_gbps': round(total, 1), 'basis': 'NVLink %.1f GB/s per GPU per direction%s' % (total, detail), 'kind': 'NVLink'}
    pcie = gpu_facts.get('pcie') or {}
    total = pcie_gbps(pcie.get('gen'), pcie.get('width'))
    if total:
        return {'limit_gbps': total, 'basis': 'PCIe Gen%d x%d: %.1f GB/s per direction (no NVLink)' % (
            int(pcie['gen']), int(pcie['width']), total), 'kind': 'PCIe'}
    return {'limit_gbps': None, 'basis': 'no NVLink or PCIe link facts for this node', 'kind': None}


def _network_limit(comm_facts: dict[str, Any]) -> dict[str, Any]:
    ports = [port for port in comm_facts.get('infiniband') or []
             if str(port.get('state') or '').rsplit(':', 1)[-1].strip().upper() == 'ACTIVE' and (port.get('rate_gbps') or 0) > 0]
    if ports:
        gbit = sum(port['rate_gbps'] for port in ports)
        kinds = sorted(set('RoCE' if str(port.get('link_layer')).lower() == 'ethernet' else 'InfiniBand' for port in ports))
        names = ', '.join('%s:%s %g Gb/s' % (port.get('device'), port.get('port'), port['rate_gbps']) for port in ports)
        return {'limit_gbps': round(gbit / 8.0, 1),
                'basis': '%d active %s port%s (%s) = %g Gb/s = %.1f GB/s' % (
                    len(ports), '/'.join(kinds), 's' if len(ports) > 1 else '', names, gbit, gbit / 8.0),
                'kind': '+'.join(kinds)}
    nics = [nic for nic in comm_facts.get('interfaces') or []
            if nic.get('name') != 'lo' and str(nic.get('state') or '').upper() == 'UP' and (nic.get('speed_mbps') or 0) > 0]
    if nics:
        fastest = max(nics, key=lambda nic: nic['speed_mbps'])
        total = fastest['speed_mbps'] / 8000.0
        return {'limit_gbps': round(total, 1),
                'basis': 'Ethernet %s at %d Mb/s = %.1f GB/s (no active InfiniBand/RoCE port)' % (fastest['name'], fastest['speed_mbps'], total),
                'kind': 'Ethernet'}
    return {'limit_gbps': None, 'basis': 'no active InfiniBand/RoCE port and no Ethernet speed known', 'kind': None}
