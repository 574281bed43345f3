# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The recorded and derived nccl-tests, NCCL and CPU-rung outputs the all-reduce parser and verdict tests read."""

from __future__ import annotations

import os

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..'))
REAL = os.path.join(ROOT, 'tests', 'fixtures', 'gpu', 'h200x2')
VARIANTS = os.path.join(ROOT, 'tests', 'fixtures', 'nccl_tests')
NODES = os.path.join(ROOT, 'tests', 'fixtures', 'gpu', 'h200x2-nodes')

H200_NVLINK = {'nvlink': {'links_per_gpu': 18, 'link_speed_gbps': 26.562, 'bandwidth_gbps_per_gpu': 478.116}}


def real(name):
    with open(os.path.join(REAL, name)) as f:
        return f.read()


def variant(name):
    with open(os.path.join(VARIANTS, name)) as f:
        return f.read()


def last_row(result):
    return result['rows'][-1]
