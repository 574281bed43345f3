# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The words a job's supervisor writes and the controller reads: the events of the job record (what the supervisor saw
and did), the states of its view (watch.json), what train_action=watch ends on, and why a node's part was stopped.

Node side: the job runner links this file (roles/train/files/trainops_job/_job_events.py): its supervisor writes these
names; the controller's status (plugins/plugin_utils/jobs.py), the report page and its plots read them from here. Each
is a str: it is written to JSON as its word and compares equal to the word read back. Standard library only.
"""

from __future__ import annotations

from enum import Enum


class Word(str, Enum):
    """A word that is also a str: "%s" and format() give the word itself, not the member's name, on every Python."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class Event(Word):
    """An event of the job record (its "event"), in the order a job may meet them."""

    STALL = "stall"
    DIAGNOSIS = "diagnosis"
    SLOW = "slow"
    # The supervisor's node went silent and another node took the supervision (succession: its epoch, from whom).
    SUPERVISION_MOVED = "supervision moved"
    FAILURE = "failure"
    RESTART = "restart"
    LEFT_OUT = "left out"
    SPARE_JOINED = "spare joined"
    SPARE_UNFIT = "spare unfit"
    TOO_FEW_NODES = "too few nodes"
    # The newest checkpoint converted to DeepSpeed's universal one for a restart at another world size (convert.py).
    CHECKPOINT_CONVERTED = "checkpoint converted"
    CHECKPOINT_UNFIT = "checkpoint unfit"
    RESTART_LIMIT = "restart limit"
    CRASH_LOOP = "crash loop"
    SCALE = "scale"
    SCALED = "scaled"
    STOP = "stop"


class Watch(Word):
    """The supervisor's view of the job (watch.json's "state")."""

    WAITING = "waiting for the first step"
    PROGRESSING = "progressing"
    STALLED = "stalled"


class WatchEnd(Word):
    """What train_action=watch ended on: every node's part ended for good, the supervisor said stalled, or its time ran
    out with the job still watched."""

    ENDED = "ended"
    STALLED = "stalled"
    WATCHING = "watching"


class StopReason(Word):
    """Why a node's part was stopped (its exit record's stopped_by), where not by another node's failure (then its name):
    a user's stop, the supervisor's after a stall, every size of a scaling run measured, a restart that went on without
    it (it did not answer the supervisor's probe, or its GPU failed), a spare's standby that ended with the job's
    supervision, no restart having brought it in."""

    USER = "train_action=stop"
    STALL = "train_on_stall=stop"
    SCALED = "train_action=scale: measured"
    LEFT_OUT = "left out of a restart"
    NOT_NEEDED = "not needed: the job's supervision ended"


# The reasons a setting gave (the page says "stopped by train_action=stop"); the others are said as they are.
BY_SETTING = (StopReason.USER, StopReason.STALL, StopReason.SCALED)
