# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""/proc/meminfo read: the memory a node can give a new process without swapping (MemAvailable, the kernel's own
estimate since Linux 3.14: free memory plus the page cache and reclaimable slab it could drop). Standard library only."""

from __future__ import annotations

import re

_AVAILABLE_RE = re.compile(r"^MemAvailable:\s+(\d+) kB$", re.M)


def available(text: str) -> int | None:
    """MemAvailable in bytes, or None where the text has none (no meminfo, a kernel before 3.14)."""
    found = _AVAILABLE_RE.search(text or "")
    return int(found.group(1)) * 1024 if found else None
