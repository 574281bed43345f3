# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The world size of a run limited to a replaced node: the others' counts from their launch.env."""

import base64

from ansible_collections.trainops.cluster.plugins.filter.launch import launch_world_size


def env(nproc):
    return base64.b64encode(("NNODES=3\nNPROC_PER_NODE=%d\n" % nproc).encode()).decode()


def test_every_node_in_the_run():
    assert launch_world_size(["a", "b", "c"], {"a": 8, "b": "8", "c": 8}, {"results": []}) == 24


def test_a_limited_run_reads_the_others():
    outside = {"results": [{"item": "a", "content": env(8)}, {"item": "b", "content": env(4)}]}
    assert launch_world_size(["a", "b", "c"], {"a": None, "b": None, "c": 8}, outside) == 20
