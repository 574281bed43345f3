# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The supervisor's view of one start of a job (watch.json), as one typed record: what it counts across its runs
(restarts, stalls, requests), the attempt running and its nodes, what it judged last, and the words status reads
(state, stall_seconds, slow, note). The supervisor keeps it and writes it whole after every look; a runner adds `ended`
when it has ended, status reads it as the first node's report carries it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from . import typed


@dataclass
class View:
    """One start's view. The counts go on over a restart of the supervisor (its runner's command restarted)."""

    run_id: str
    # The current attempt's nodes (the first start's world, then each restart's) and the spares still standing by.
    nodes: list[str]
    spares: list[str]
    # When this start was first watched, and the newest complete checkpoint's step then (None: none).
    since: float
    checkpoint: int | None = None
    restarts: int = 0
    stalls: int = 0
    # The control requests made (each restart's is its attempt's number) and the attempt running now.
    requests: int = 0
    attempt: int = 0
    # Restarts since the newest checkpoint moved (the crash-loop guard counts them).
    without_progress: int = 0
    restarted_at: float | None = None
    # When a failure of the current attempt was first seen, and the attempt whose failure was decided.
    failed_at: float | None = None
    decided: int | None = None
    # The last window's judgement: what held the job back (judge.bottleneck) and since when judged windows have not
    # found it (supervisor.SLOW_CLEARED_AFTER), whether every node's window could be judged, was sampled at all, and
    # the ranks every node's runner counted.
    slow: dict[str, Any] | None = None
    slow_unseen_since: float | None = None
    judged: bool = False
    sampled: bool = False
    ranks: int | None = None
    # train_action=scale: the size being measured, the sizes measured, and whether every size was.
    measured: dict[str, Any] | None = None
    scale: list[dict[str, Any]] = field(default_factory=list)
    scaled: bool = False
    # What status reads: the state (_job_events.Watch), the stall time, the last step's time, the last look, a note
    # (progress unknown); and the runner's word once it has ended.
    state: str | None = None
    stall_seconds: float | None = None
    last_step_at: float | None = None
    checked: float | None = None
    note: str | None = None
    ended: bool = False
    # Who supervises (succession): the node of the supervisor that wrote this view, and its epoch.
    holder: str | None = None
    epoch: int = 1

    @classmethod
    def read(cls, data: Any, where: str = "the supervisor's view") -> View:
        """The view of a decoded watch.json; ValueError naming the key for one unknown, missing or of another type."""
        return cls(**typed.checked(cls, data, where, unknown="written by another version of trainops-job"))

    def as_dict(self) -> dict[str, Any]:
        """The view as watch.json holds it."""
        return dataclasses.asdict(self)
