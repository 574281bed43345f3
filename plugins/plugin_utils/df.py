# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""POSIX df output (df -P -k): the size and free space of the file system that holds a path."""

from __future__ import annotations

from typing import Any

NOTHING: dict[str, Any] = {"total_bytes": None, "available_bytes": None, "mount": None}


def usage(text: object) -> dict[str, Any]:
    """The last data line of `df -P -k PATH` as {total_bytes, available_bytes, mount}; None values when there is none.

    A data line is "Filesystem 1024-blocks Used Available Capacity Mounted-on" with numbers in the middle; the
    header and anything else printed around it (an image's banner) do not have them. The mount point may hold spaces.
    """
    found = dict(NOTHING)
    for line in str(text or "").splitlines():
        fields = line.split()
        if len(fields) >= 6 and all(field.isdigit() for field in fields[1:4]):
            found = {"total_bytes": int(fields[1]) * 1024, "available_bytes": int(fields[3]) * 1024, "mount": " ".join(fields[5:])}
    return found
