# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

from ansible_collections.trainops.cluster.plugins.plugin_utils.df import usage

SHM_64M = """Filesystem     1024-blocks  Used Available Capacity Mounted on
shm                  65536     0     65536       0% /dev/shm
"""


def test_a_data_line_gives_bytes_and_the_mount():
    assert usage(SHM_64M) == {"total_bytes": 67108864, "available_bytes": 67108864, "mount": "/dev/shm"}
    nfs = "Filesystem 1024-blocks Used Available Capacity Mounted on\n10.96.0.11:/srv/shared 102400 2048 100352 2% /mnt/shared data\n"
    assert usage(nfs)["available_bytes"] == 100352 * 1024 and usage(nfs)["mount"] == "/mnt/shared data"


def test_a_banner_or_no_output_gives_nothing():
    assert usage("== NVIDIA PyTorch ==\n" + SHM_64M)["total_bytes"] == 67108864
    assert usage("") == {"total_bytes": None, "available_bytes": None, "mount": None}
    assert usage(None)["available_bytes"] is None
    assert usage("df: /mnt/shared: No such file or directory\n")["available_bytes"] is None
