# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""MemAvailable read from a real /proc/meminfo (tests/fixtures/meminfo: the 24 GiB Debian 12 machine the suite runs on)."""

from pathlib import Path

from ansible_collections.trainops.cluster.plugins.module_utils import meminfo

FIXTURE = Path(__file__).resolve().parents[3] / "fixtures" / "meminfo" / "debian12-24gib.txt"


def test_memavailable_in_bytes():
    text = FIXTURE.read_text()
    kb = int(next(line.split()[1] for line in text.splitlines() if line.startswith("MemAvailable:")))
    assert meminfo.available(text) == kb * 1024 and 0 < kb * 1024 < 25 * 2 ** 30


def test_a_kernel_without_it_and_no_text():
    text = "\n".join(line for line in FIXTURE.read_text().splitlines() if not line.startswith("MemAvailable:"))
    assert meminfo.available(text) is None and meminfo.available("") is None
