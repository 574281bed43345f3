# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A node's RDMA ports read from sysfs (<root>/class/infiniband), and the sysfs values they are made of.

Node side: imported by comm.py and comm_discovery.py (shipped inside the modules comm_facts, allreduce_run and
image_facts), and linked into the job runner (roles/train/files/trainops_job: its RDMA ports, counted while a job runs):
a file of its own so that the runner ships this reader, not the whole of comm.py's parsers.
"""

from __future__ import annotations

import os
import re
from typing import Any


def parse_rate_gbps(text: str | None) -> float | None:
    """sysfs IB port rate '400 Gb/sec (4X NDR)' -> 400.0, '2.5 Gb/sec (1X SDR)' -> 2.5."""
    m = re.match(r'\s*(\d+(?:\.\d+)?)\s*Gb/sec', text or '')
    return float(m.group(1)) if m else None


def sysfs_value(path: str) -> str | None:
    """'4: ACTIVE' -> 'ACTIVE'; sysfs state files prefix the name with its numeric code."""
    try:
        with open(path) as f:
            value = f.read().strip()
    except (IOError, OSError):
        return None
    return value.split(':', 1)[1].strip() if re.match(r'^\d+:', value) else (value or None)


def natural_key(name: str) -> list[int | str]:
    return [int(p) if p.isdigit() else p for p in re.split(r'(\d+)', name)]


def read_infiniband(sysfs_root: str = '/sys') -> list[dict[str, Any]]:
    """Ports of every RDMA device under <sysfs_root>/class/infiniband ->
    [{device, port, state, phys_state, rate_gbps, link_layer}] sorted by device then port; [] when there are none."""
    base = os.path.join(sysfs_root, 'class', 'infiniband')
    try:
        devices = sorted(os.listdir(base), key=natural_key)
    except (IOError, OSError):
        return []
    ports = []
    for device in devices:
        ports_dir = os.path.join(base, device, 'ports')
        try:
            port_names = sorted(os.listdir(ports_dir), key=natural_key)
        except (IOError, OSError):
            continue
        for port in port_names:
            pdir = os.path.join(ports_dir, port)
            rate = sysfs_value(os.path.join(pdir, 'rate'))
            ports.append({
                'device': device,
                'port': int(port) if port.isdigit() else port,
                'state': sysfs_value(os.path.join(pdir, 'state')),
                'phys_state': sysfs_value(os.path.join(pdir, 'phys_state')),
                'rate_gbps': parse_rate_gbps(rate),
                'link_layer': sysfs_value(os.path.join(pdir, 'link_layer')),
            })
    return ports
