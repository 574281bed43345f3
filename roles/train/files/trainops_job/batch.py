# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The global batch across a restart on fewer nodes (train_keep_global_batch): the gradient accumulation of an attempt,
raised so that per-device batch x accumulation x ranks stays what the first start had. Every node runs as many ranks
(NPROC_PER_NODE) with the same per-device batch, so the ranks' ratio is the nodes'."""

from __future__ import annotations

from typing import Any


def accumulation(batch: dict[str, Any], world0: int, world: int) -> tuple[int, float]:
    """(the gradient accumulation of an attempt on `world` nodes, how much its global batch differs from the first
    start's on `world0`: 0.0 where it is kept, -0.083 for 8 % smaller). The first start's accumulation where the batch is
    not kept (train_keep_global_batch false) or the world is the first start's; else the nearest whole number to the
    first start's times world0 / world (at least 1)."""
    base = max(1, int(batch.get("accumulation") or 1))
    if not batch.get("keep") or world == world0 or world < 1:
        return base, 0.0
    steps = max(1, int(base * world0 / world + 0.5))
    return steps, round(steps * world / float(base * world0) - 1, 3)
