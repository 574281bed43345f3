# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Build stamps: what a build was made for, one "key: value" line per dependency (source, nccl, cuda, mpi)."""

from __future__ import annotations


def _lines(stamp: object) -> list[list[str]]:
    return [line.split(": ", 1) for line in str(stamp or "").splitlines() if ": " in line]


def differences(built: object, needed: object) -> list[str]:
    """The dependencies whose line differs, as "mpi built for A, this node has B", in stamp order.

    Empty when the two stamps do not have the same keys in the same order (an older stamp format, or no stamp): the
    caller then shows both stamps whole.
    """
    was, now = _lines(built), _lines(needed)
    if [key for key, _value in was] != [key for key, _value in now]:
        return []
    return ["%s built for %s, this node has %s" % (key, old, new) for (key, old), (_key, new) in zip(was, now) if old != new]
