# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the stage (train_stage) did on each node, as the nodes' reports carry it (the node program's NODE.stage.json):
one line for status, each node's staged bytes and what it copied at what rate; where each path is read from (shared
storage, or the controller's copied there first); and what is wrong with train_stage and train_stage_dir. (The
LLaMA-Factory paths read from the stage: llamafactory.stage_overrides.)"""

from __future__ import annotations

import posixpath
from typing import Any


def _size(count: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= scale:
            return "%.3g %s" % (count / scale, unit)
    return "%d bytes" % count


def said(stages: dict[str, dict[str, Any] | None]) -> str | None:
    """"staged on every node's disk (/var/tmp/trainops-stage/job1), each file checked against one manifest (sha256):
    node1 1.07 GB (1.07 GB copied at 412 MB/s), node2 1.07 GB (kept: unchanged)"; None where nothing was staged."""
    found = {node: stage for node, stage in stages.items() if stage}
    if not found:
        return None
    parts = []
    for node, stage in sorted(found.items()):
        if stage.get("copied"):
            rate = " at %s/s" % _size(stage["mb_per_s"] * 1e6) if stage.get("mb_per_s") else ""
            damaged = "; %d damaged or changed, copied again" % len(stage["damaged"]) if stage.get("damaged") else ""
            parts.append("%s %s (%s copied%s%s)" % (node, _size(stage["bytes"]), _size(stage["copied"]), rate, damaged))
        else:
            parts.append("%s %s (kept: unchanged)" % (node, _size(stage["bytes"])))
    folders = sorted({str(stage.get("dir")) for stage in found.values()})
    return "staged on every node's disk (%s), each file checked against one manifest (sha256): %s" % (", ".join(folders), ", ".join(parts))


def sources(paths: list[Any], shared: str, folder: str) -> dict[str, list[str]]:
    """Where every node reads each path of train_stage: a path on shared storage as it is; any other is a path of the
    controller, copied first (once, with rsync) into folder, a folder on shared storage (the job's), under its own name.
    {controller: [the controller's paths to copy], paths: [every path as the nodes read it]}."""
    # Normalized: rsync would copy a folder given with a trailing slash as its files, not under its name.
    controller = [posixpath.normpath(p) for p in paths if isinstance(p, str) and p.startswith("/") and not _under(p, shared)]
    return {"controller": controller,
            "paths": [posixpath.join(folder, posixpath.basename(posixpath.normpath(p))) if isinstance(p, str) and posixpath.normpath(p)
                      in controller else str(p) for p in paths]}


def _under(path: str, directory: str) -> bool:
    return posixpath.normpath(path).startswith(directory.rstrip("/") + "/")


def refused(paths: list[Any], folder: str, shared: str, on_controller: list[str] | None = None) -> list[str]:
    """What is wrong with train_stage and train_stage_dir, in the words the playbook says: a path neither on shared storage
    (every node copies from there) nor on the controller (on_controller: the paths found there, copied to shared storage
    first), a folder not absolute or on shared storage (the copies go to each node's own disk)."""
    found = []
    found_there = {posixpath.normpath(p) for p in on_controller or []}
    outside = [str(p) for p in paths if not isinstance(p, str) or not p.startswith("/")
               or not (_under(p, shared) or posixpath.normpath(p) in found_there)]
    if outside:
        found.append("train_stage holds %s: give paths on shared storage (under %s) that every node reads, or on the controller"
                     % (", ".join(outside), shared))
    if not folder.startswith("/") or posixpath.normpath(folder) in ("/", posixpath.normpath(shared)) or _under(folder, shared):
        found.append("train_stage_dir is %s: give an absolute folder on each node's own disk, not on shared storage" % folder)
    return found
