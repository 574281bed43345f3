# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Who supervises a job, and how the supervision moves when its node is lost.

The supervisor holds a lease in the job's folder (records.LEASE: its node, its epoch, a beat renewed every BEAT
seconds). Every other node's runner watches the beat on its own clock (the nodes' clocks are never compared): when it
has not moved for train_supervisor_silence, the next node of the world takes the supervision, epoch + 1. Each node
waits its turn (its place among the others, STAGGER seconds apart, so that the next live one goes first) and claims the
epoch with a file that only one node can create (O_EXCL: atomic on a local file system and on NFS v3 and v4). The
first node's supervisor holds epoch 1 without a claim.

Every request a supervisor writes carries its epoch. An epoch is over once the next one is claimed: a runner ignores a
request of an epoch that is over, and a supervisor whose epoch is over steps down without writing again. So a first
node that comes back (its supervisor's last requests still in the folder, or its supervisor still running behind a cut
link) cannot act on the job: the new supervisor decides alone."""

from __future__ import annotations

import os
import time
from typing import Any, Callable

from . import records

# Seconds between two renewals of the lease by its holder.
BEAT = 2.0
# Seconds between two nodes' turns to take the supervision: the next node of the world first, then the one after it.
STAGGER = 5.0


def lease(job: records.Job) -> dict:
    """The lease as the job's folder holds it ({} before the first supervisor wrote it)."""
    return job.of_this_run(records.LEASE) or {}


def holder(job: records.Job, found: dict) -> str:
    """The node that holds the supervision as a lease says: the first node's until its supervisor has written one."""
    return str(found.get("holder") or job.nodes[0])


def claim_path(job: records.Job, epoch: int) -> str:
    return job.path("%s%s-%d" % (records.CLAIM_PREFIX, job.run_id, epoch))


def over(job: records.Job, epoch: int) -> bool:
    """Whether the supervision of this epoch is over: a node has claimed the next one."""
    return os.path.exists(claim_path(job, epoch + 1))


def current(job: records.Job) -> int:
    """The epoch of the supervision now: the highest one claimed (1, the first node's, where none was)."""
    epoch = 1
    while over(job, epoch):
        epoch += 1
    return epoch


def _create(path: str, node: str) -> None:
    try:
        handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return  # another node's claim: its name is in the file
    with os.fdopen(handle, "w") as out:
        out.write(node + "\n")


def claim(job: records.Job, epoch: int) -> bool:
    """This node's claim of the epoch: True where its file is this node's (created now, or before by this node)."""
    path = claim_path(job, epoch)
    try:
        job.as_user(_create, path, job.node)
        with open(path) as handle:
            return handle.read().strip() == job.node
    except OSError:
        return False  # the folder not writable a moment: the next look claims again, or another node has


def order(job: records.Job, view: dict, holder: str | None) -> list[str]:
    """The nodes that may take the supervision, in their turns: the current attempt's (the first start's world, then each
    restart's), then the spares standing by; the holder left out."""
    spares: list[str] = view["spares"] if "spares" in view else job.spares
    nodes = list(view.get("nodes") or job.starters) + list(spares or [])
    return [n for n in dict.fromkeys(nodes) if n != holder]


class Watch:
    """A runner's watch on the lease: the beat last read, and when (this node's clock) it was first read so."""

    def __init__(self, job: records.Job, clock: Callable[[], float] = time.monotonic):
        self.job, self.clock = job, clock
        self.key: tuple = ()
        self.since = clock()
        self.claimed = 1  # the highest epoch claimed, as last looked

    def look(self) -> dict:
        """The lease; its silence counted anew when it moved, or when an epoch was claimed (its holder is starting)."""
        found, self.claimed = lease(self.job), current(self.job)
        key = (found.get("epoch"), found.get("beat"), found.get("holder"), found.get("released"), self.claimed)
        if key != self.key:
            self.key, self.since = key, self.clock()
        return found

    def silent(self) -> float:
        """Seconds since the lease last moved."""
        return self.clock() - self.since

    def turn(self, found: dict, view: dict) -> float | None:
        """Seconds of the holder's silence after which this node takes the supervision: train_supervisor_silence (none
        where the holder released it), then STAGGER for each node before this one; None where it is not among them."""
        nodes = order(self.job, view, holder(self.job, found))
        if self.job.node not in nodes:
            return None
        wait = 0.0 if found.get("released") else float(self.job.conf.supervisor_silence)
        return wait + STAGGER * nodes.index(self.job.node)

    def due(self, found: dict, view: dict) -> bool:
        """Whether it is this node's turn to take the supervision (never once the job's supervision has ended)."""
        turn = self.turn(found, view)
        return not view.get("ended") and turn is not None and self.silent() >= turn

    def abandoned(self, found: dict, view: dict) -> bool:
        """Whether no node took the supervision in every node's turn and a silence more: no restart can come."""
        nodes = order(self.job, view, holder(self.job, found))
        return self.silent() > 2 * float(self.job.conf.supervisor_silence) + STAGGER * len(nodes)


def renewal(job: records.Job, epoch: int, beat: int, **more: Any) -> bool:
    """The holder's beat written, where its epoch is not over; False where it is (the holder steps down)."""
    if over(job, epoch):
        return False
    job.write(records.LEASE, dict(more, run_id=job.run_id, holder=job.node, epoch=epoch, beat=beat))
    return True
