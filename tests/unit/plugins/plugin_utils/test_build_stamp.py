# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

from ansible_collections.trainops.cluster.plugins.plugin_utils.build_stamp import differences

BUILT = "source: archive 1f2e\nnccl: /usr/lib/libnccl.so.2 1000\ncuda: /usr/local/cuda 12.4\nmpi: /usr/lib/openmpi 4.1.4\n"


def test_the_lines_that_differ_are_named_in_stamp_order():
    needed = BUILT.replace("4.1.4", "4.1.6").replace("12.4", "12.6")
    assert differences(BUILT, needed) == ["cuda built for /usr/local/cuda 12.4, this node has /usr/local/cuda 12.6",
                                          "mpi built for /usr/lib/openmpi 4.1.4, this node has /usr/lib/openmpi 4.1.6"]
    assert differences(BUILT, BUILT) == []


def test_stamps_of_another_shape_give_nothing_to_compare():
    assert differences("source: archive 1f2e\n", BUILT) == []
    assert differences(None, BUILT) == []
