# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A running job's checkpoints as its own files tell them (the first node's report: each save's bytes and its files'
first and last write, the free space where they go): how much of the time the saves take, with the interval that would
take SHARE_ADVISED; when the storage is full at this rate; and a node whose log says "No space left on device"."""

from __future__ import annotations

import math
import re
import statistics
from typing import Any

# A save's share of the time worth a word, and the share the advice aims at.
SHARE_SAID = 0.1
SHARE_ADVISED = 0.05
# The storage's end is said when it comes within this many hours at the saves' rate.
FULL_SAID_HOURS = 24
# Python's "OSError: [Errno 28] No space left on device: '/mnt/shared/ckpt/checkpoint-40/optimizer.pt'", torch's
# "RuntimeError: [enforce fail at inline_container.cc:595] . unexpected pos 64 vs 0 ... No space left on device".
_NO_SPACE_RE = re.compile(r"No space left on device(?::\s*'([^']+)')?")


def _size(count: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6)):
        if count >= scale:
            return "%.3g %s" % (count / scale, unit)
    return "%d bytes" % count


def saves(found: dict[str, Any] | None) -> dict[str, Any]:
    """{saves (how many), seconds (a measured save's mean time: its files' first to last write), interval (mean seconds
    from one save's start to the next's), share (seconds over interval), every (steps between saves), bytes (a save's
    mean), free, full_minutes, said: [lines]} of the first node's report's checkpoints; Nones where not measured (one
    save, or single-file saves whose one write has no length)."""
    found = found or {}
    done = found.get("saves") or []
    out: dict[str, Any] = {"saves": len(done), "seconds": None, "interval": None, "share": None, "every": None,
                           "bytes": round(statistics.mean(s["bytes"] for s in done)) if done else None, "free": found.get("free"),
                           "full_minutes": None, "said": []}
    if len(done) < 2:
        return out
    measured = [s["last"] - s["first"] for s in done if s["last"] > s["first"]]
    gaps = [b["first"] - a["first"] for a, b in zip(done, done[1:]) if b["first"] > a["first"]]
    steps = [b["step"] - a["step"] for a, b in zip(done, done[1:]) if b["step"] > a["step"]]
    interval = round(statistics.mean(gaps), 1) if gaps else 0.0
    every = int(statistics.median(steps)) if steps else 0
    out.update(interval=interval or None, every=every or None)
    if measured and interval:
        seconds = round(statistics.mean(measured), 1)
        share = round(min(1.0, seconds / interval), 3)
        out.update(seconds=seconds, share=share)
        if share >= SHARE_SAID and every:
            out["said"].append("checkpoints: saves take %d %% of the time (%.3g s each, one every %.3g s): every %d steps would take "
                               "%d %%, or save asynchronously" % (round(100 * share), seconds, interval,
                                                                  int(math.ceil(every * share / SHARE_ADVISED)), round(100 * SHARE_ADVISED)))
    free, size = out["free"], out["bytes"] or 0
    if free is not None and size and interval:
        minutes = free / (size / interval) / 60.0
        out["full_minutes"] = round(minutes, 1)
        if minutes <= 60 * FULL_SAID_HOURS:
            out["said"].append("checkpoints: %s is full in about %s at this rate (%s free, a save of %s every %.3g s), unless "
                               "older saves are removed (save_total_limit)" % (
                                   found.get("dir"), "%d min" % round(minutes) if minutes < 120 else "%.3g h" % (minutes / 60.0),
                                   _size(free), _size(size), interval))
    return out


def no_space(logs: dict[str, list[str]]) -> list[str]:
    """A finding for each node whose log says "No space left on device", with the path where its line names one."""
    found = []
    for node, lines in logs.items():
        hits = [match for match in (_NO_SPACE_RE.search(line) for line in lines or []) if match]
        if hits:
            path = next((m.group(1) for m in reversed(hits) if m.group(1)), None)
            found.append("%s: No space left on device%s (its log): free space there, or keep fewer checkpoints "
                         "(save_total_limit), before a restart" % (node, " writing %s" % path if path else ""))
    return found
