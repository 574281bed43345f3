# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Parse the ``NCCL_DEBUG=INFO`` log into what NCCL found and used.

Version, hosts, the transports that carried data (per host), networks, socket and IB interfaces, the net plugin,
WARN lines and the ranks of the largest communicator, following NCCL 2.28 (src/debug.cc and the transports).

Node side: shipped to the nodes inside the modules that import it (allreduce_run, torchrun_run), and with the job
runner (roles/train/files/trainops_job links this file).
"""

from __future__ import annotations

import re
from typing import Any

from .mpi_output import _lines

# "host:pid:tid [cudaDev] NCCL INFO msg" and "host:pid:tid [cudaDev] file.cc:123 NCCL WARN msg"; NCCL puts a
# "[date time] " stamp in front of WARN lines by default.
_NCCL_LINE_RE = re.compile(
    r'(?:^|\s)(?P<host>[^\s:\[\]]+):(?P<pid>\d+):\d+ \[\d+\] (?:\S+:\d+ (?:\([^)]*\) )?)?NCCL (?P<level>INFO|WARN) (?P<msg>.*)$')
_NCCL_VERSION_RE = re.compile(r'NCCL version (\d+\.\d+\.\d+)(?:\+cuda(\S+))?')
_VIA_RE = re.compile(r'^(?:Channel|CollNet) \d+(?:/\d+)? : .* via (?:(?P<net>NET|COLLNET)/(?P<name>.+?)/\d+|(?P<other>\S+))')
_COLL_CHANNELS_RE = re.compile(r'^(\d+) coll channels, (\d+) collnet channels, (\d+) nvls channels')
_RING_RE = re.compile(r'^Channel \d+/(\d+) :(?:\s+\d+)+\s*$')
_INDEXED_ITEM_RE = re.compile(r'\[\d+\]([^\s;]+)')
_COMM_INIT_RE = re.compile(r'^ncclCommInitRank\w* comm (\S+) rank (\d+) nranks (\d+) cudaDev (\d+)(?: nvmlDev \d+)? busId (\S+)'
                           r'(?: commId (\S+))?')
_NNODES_RE = re.compile(r'^comm \S+ rank \d+ nRanks \d+ nNodes (\d+)')
_LOADED_PLUGIN_RE = re.compile(r'Loaded net plugin (.+?)(?: \(v\d+\))?\s*$')


def _transport_name(via: re.Match[str]) -> str:
    """'via' part of a connection line -> 'NET/IB', 'NET/Socket', 'P2P/CUMEM', 'P2P/direct', 'SHM', 'CollNet'."""
    if via.group('net'):
        return 'CollNet' if via.group('net') == 'COLLNET' else 'NET/' + via.group('name')
    parts = via.group('other').split('/')
    if parts[0] == 'P2P' and len(parts) > 1:
        return 'P2P/' + parts[1]
    return parts[0]


def parse_nccl_debug(text: str | None) -> dict[str, Any]:
    """NCCL_DEBUG=INFO log (alone, or mixed into any output, tagged by mpirun or not) -> what NCCL found and used.

    Returns {nccl_version ("2.28.9"), nccl_cuda ("13.0"), hosts (sorted), transports (sorted distinct: from the
    connection lines "Channel .. via X" / "CollNet .. via COLLNET", e.g. P2P/CUMEM, P2P/IPC, P2P/direct, SHM,
    NET/IB, NET/Socket, CollNet; plus NVLS when NVLS channels were set up), transports_by_host {host: [...]},
    networks (the "Using network X" choices), channels (coll channels, else ring count), nvls_channels,
    socket_interfaces ["eth0:10.0.0.5<0>"], bootstrap_interfaces, ib_devices ["mlx5_0:1/IB"], ib_devices_by_host,
    ib_no_device (some rank logged "NET/IB : No device found."), ib_no_device_hosts, net_plugin {loaded (True,
    False, or None when never mentioned), name, messages}, warnings (NCCL WARN lines), ranks [{rank, host, pid,
    cuda_dev, bus_id}] of the largest communicator, nranks, nnodes}.

    "Using network Socket" alone does not mean traffic went over sockets: a single-node run chooses a network too.
    Only the connection lines say which transport carried data.
    """
    info: dict[str, Any] = {
        'nccl_version': None, 'nccl_cuda': None, 'hosts': set(), 'transports': set(), 'transports_by_host': {},
        'networks': [], 'channels': None, 'nvls_channels': None, 'socket_interfaces': [], 'bootstrap_interfaces': [],
        'ib_devices': [], 'ib_devices_by_host': {}, 'ib_no_device': False, 'ib_no_device_hosts': set(),
        'net_plugin': {'loaded': None, 'name': None, 'messages': []}, 'warnings': [], 'ranks': [], 'nranks': None,
        'nnodes': None,
    }
    rings = None
    comms: dict[str, dict[int, dict[str, Any]]] = {}
    for line in _lines(text):
        version = _NCCL_VERSION_RE.search(line)
        if version and info['nccl_version'] is None:
            info['nccl_version'], info['nccl_cuda'] = version.group(1), version.group(2)
        match = _NCCL_LINE_RE.search(line)
        if not match:
            continue
        host, msg = match.group('host'), match.group('msg').strip()
        info['hosts'].add(host)
        if match.group('level') == 'WARN':
            info['warnings'].append(line.strip())
            continue
        ring = _RING_RE.match(msg)
        if ring:
            rings = max(rings or 0, int(ring.group(1)))
            continue
        via = _VIA_RE.match(msg)
        if via:
            name = _transport_name(via)
            info['transports'].add(name)
            info['transports_by_host'].setdefault(host, set()).add(name)
            continue
        _parse_nccl_info(host, int(match.group('pid')), msg, info, comms)
    if rings is not None and info['channels'] is None:
        info['channels'] = rings
    if comms:
        ranks = max(comms.values(), key=len)
        info['ranks'] = [ranks[rank] for rank in sorted(ranks)]
    return _finish_debug(info)


def _append_new(items: list[str], values: list[str]) -> None:
    for value in values:
        if value not in items:
            items.append(value)


def _parse_nccl_info(host: str, pid: int, msg: str, info: dict[str, Any], comms: dict[str, dict[int, dict[str, Any]]]) -> None:
    channels = _COLL_CHANNELS_RE.match(msg)
    comm_init = _COMM_INIT_RE.match(msg)
    nnodes = _NNODES_RE.match(msg)
    if channels:
        info['channels'] = max(info['channels'] or 0, int(channels.group(1)))
        info['nvls_channels'] = max(info['nvls_channels'] or 0, int(channels.group(3)))
        if int(channels.group(3)) > 0:
            info['transports'].add('NVLS')
            info['transports_by_host'].setdefault(host, set()).add('NVLS')
    elif comm_init:
        info['nranks'] = max(info['nranks'] or 0, int(comm_init.group(3)))
        key = comm_init.group(6) or comm_init.group(3)
        comms.setdefault(key, {})[int(comm_init.group(2))] = {
            'rank': int(comm_init.group(2)), 'host': host, 'pid': pid, 'cuda_dev': int(comm_init.group(4)),
            'bus_id': comm_init.group(5)}
    elif nnodes:
        info['nnodes'] = max(info['nnodes'] or 0, int(nnodes.group(1)))
    elif msg.startswith('Connected NVLS'):
        info['transports'].add('NVLS')
        info['transports_by_host'].setdefault(host, set()).add('NVLS')
    elif msg.startswith('NET/Socket') and ': Using' in msg:
        _append_new(info['socket_interfaces'], _INDEXED_ITEM_RE.findall(msg.split(': Using', 1)[1]))
    elif msg.startswith('NET/IB') and ': Using' in msg:
        devices = _INDEXED_ITEM_RE.findall(msg.split(': Using', 1)[1].split(';', 1)[0])
        if devices:
            _append_new(info['ib_devices'], devices)
            _append_new(info['ib_devices_by_host'].setdefault(host, []), devices)
    elif msg.startswith('NET/IB') and 'No device found' in msg:
        info['ib_no_device'] = True
        info['ib_no_device_hosts'].add(host)
    elif msg.startswith('NET/Plugin'):
        plugin = info['net_plugin']
        _append_new(plugin['messages'], [msg])
        loaded = _LOADED_PLUGIN_RE.search(msg)
        if loaded:
            plugin.update(loaded=True, name=loaded.group(1))
        elif plugin['loaded'] is None:
            plugin['loaded'] = False
    elif msg.startswith('Using network '):
        _append_new(info['networks'], [msg[len('Using network '):]])
    elif re.match(r'^Bootstrap ?: Using', msg):
        _append_new(info['bootstrap_interfaces'], msg.split('Using', 1)[1].split())


def _finish_debug(info: dict[str, Any]) -> dict[str, Any]:
    info['hosts'] = sorted(info['hosts'])
    info['transports'] = sorted(info['transports'])
    info['transports_by_host'] = {host: sorted(names) for host, names in sorted(info['transports_by_host'].items())}
    info['ib_no_device_hosts'] = sorted(info['ib_no_device_hosts'])
    return info
