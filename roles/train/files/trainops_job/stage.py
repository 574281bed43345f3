# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The job's data and model staged on this node's local disk (train_stage): many ranks reading one dataset from shared
storage make it crawl (the field report's third trap); a copy on each node's own disk does not.

One manifest (every file's size and sha256) is made once, on the first node, from the files on shared storage: a file
whose size and mtime are those of the last manifest keeps its sha256 (a second start reads nothing to hash it again).
Every node then stages against it at once: free space checked first, each file already there kept where its size and
sha256 are the manifest's, else copied (hashed as it is written) and checked; a file of the stage directory that the
manifest does not hold is removed. So a second start copies nothing, and a changed or damaged local copy is copied
again. The node's result (bytes copied and kept, seconds, MB/s) goes to its record NODE.stage.json, which its report
carries. The stage belongs to the training user, and a stop removes it (train_stage_keep keeps it)."""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from typing import Any, Callable

from . import records

CHUNK = 4 << 20
# Bytes left free on the stage's file system besides the copies (logs, the image's layers, a trainer's caches).
RESERVE = 256 << 20


class StageError(Exception):
    """What makes a stage impossible, in the words the playbook shows (the node is added by the caller)."""


def sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def sources(paths: list[str]) -> list[tuple[str, str]]:
    """[(name in the stage, path on shared storage)] of every file under the paths, in order: a file is staged under
    its own name, a directory's files under the directory's name."""
    tops = [os.path.basename(os.path.normpath(path)) for path in paths]
    doubled = sorted({name for name in tops if tops.count(name) > 1})
    if doubled:
        raise StageError("train_stage holds two paths of the same name (%s): give them different names" % ", ".join(doubled))
    out = []
    for path in paths:
        path = os.path.normpath(path)
        if os.path.isfile(path):
            out.append((os.path.basename(path), path))
        elif os.path.isdir(path):
            base = os.path.basename(path)
            for folder, dirs, files in os.walk(path):
                dirs.sort()
                for name in sorted(files):
                    full = os.path.join(folder, name)
                    out.append((os.path.join(base, os.path.relpath(full, path)), full))
        else:
            raise StageError("train_stage path %s does not exist" % path)
    return out


def manifest(paths: list[str], previous: dict | None = None) -> dict:
    """{files: {name: {source, size, mtime_ns, sha256}}, bytes}: the stage's files as shared storage holds them. A file
    whose source, size and mtime are the previous manifest's keeps its sha256 (hashed: the bytes read to hash)."""
    known = (previous or {}).get("files") or {}
    files, hashed = {}, 0
    for name, path in sources(paths):
        seen = os.stat(path)
        last = known.get(name) or {}
        if (last.get("source"), last.get("size"), last.get("mtime_ns")) == (path, seen.st_size, seen.st_mtime_ns):
            digest = last["sha256"]
        else:
            digest, hashed = sha256(path), hashed + seen.st_size
        files[name] = {"source": path, "size": seen.st_size, "mtime_ns": seen.st_mtime_ns, "sha256": digest}
    return {"files": files, "bytes": sum(f["size"] for f in files.values()), "hashed": hashed}


def _copy(source: str, dest: str) -> str:
    """source to dest (through a temporary name: a copy cut short is never taken for a whole one); the sha256 of the bytes
    written."""
    digest, tmp = hashlib.sha256(), dest + ".trainops-part"
    with open(source, "rb") as src, open(tmp, "wb") as out:
        for chunk in iter(lambda: src.read(CHUNK), b""):
            digest.update(chunk)
            out.write(chunk)
    os.replace(tmp, dest)
    return digest.hexdigest()


def _free(path: str) -> int:
    """Bytes free for an unprivileged user on the file system that holds path (or would: its nearest existing parent)."""
    while not os.path.exists(path):
        path = os.path.dirname(path)
    seen = os.statvfs(path)
    return seen.f_bavail * seen.f_frsize


def stage(wanted: dict, folder: str, owner: tuple[int, int] | None = None, free: Callable[[str], int] = _free,
          clock: Callable[[], float] = time.monotonic) -> dict:
    """The manifest's files in folder: kept where there and whole, else copied and checked; what folder holds beside them
    removed. owner: (uid, gid) the stage is given to (the training user's). Returns {dir, files, bytes, copied,
    copied_files, kept, damaged, removed, seconds, mb_per_s}; StageError where the copies cannot fit or a copy differs."""
    started = clock()
    files = wanted.get("files") or {}
    keep, copy, damaged = [], [], []
    for name, meta in sorted(files.items()):
        local = os.path.join(folder, name)
        if os.path.isfile(local) and os.path.getsize(local) == meta["size"] and sha256(local) == meta["sha256"]:
            keep.append(name)
            continue
        copy.append(name)
        if os.path.exists(local):
            damaged.append(name)
    needed = sum(files[n]["size"] for n in copy)
    room = free(folder)
    if needed and needed + RESERVE > room:
        raise StageError("the stage needs %s in %s and %s is free there (%s kept for the rest)" % (
            _size(needed), folder, _size(room), _size(RESERVE)))
    for name in copy:
        local = os.path.join(folder, name)
        _makedirs(folder, os.path.dirname(local), owner)
        if _copy(files[name]["source"], local) != files[name]["sha256"]:
            os.remove(local)
            raise StageError("%s changed on shared storage while it was staged (its sha256 is not the manifest's): start "
                             "again once it is written" % files[name]["source"])
        if owner:
            os.chown(local, *owner)
    removed = _prune(folder, set(files))
    seconds = clock() - started
    return {"dir": folder, "files": len(files), "bytes": sum(f["size"] for f in files.values()), "copied": needed,
            "copied_files": len(copy), "kept": sum(files[n]["size"] for n in keep), "damaged": damaged, "removed": removed,
            "seconds": round(seconds, 2), "mb_per_s": round(needed / 1e6 / seconds, 1) if needed and seconds > 0 else None}


def _makedirs(top: str, path: str, owner: tuple[int, int] | None) -> None:
    """path and its parents up to top (included), each given to owner as it is made."""
    made = []
    while not os.path.isdir(path):
        made.append(path)
        if path == top or os.path.dirname(path) == path:
            break
        path = os.path.dirname(path)
    for folder in reversed(made):
        os.makedirs(folder, exist_ok=True)
        if owner:
            os.chown(folder, *owner)


def _prune(folder: str, names: set[str]) -> list[str]:
    """The files of folder that the manifest does not hold (an earlier stage's, a copy cut short) removed."""
    removed = []
    for top, dirs, found in os.walk(folder):
        dirs.sort()
        for name in sorted(found):
            path = os.path.join(top, name)
            if os.path.relpath(path, folder) not in names:
                os.remove(path)
                removed.append(os.path.relpath(path, folder))
    return removed


def _size(count: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return "%.0f %s" % (count, unit) if unit == "B" else "%.1f %s" % (count, unit)
        count /= 1024
    return "%.1f TiB" % count  # pragma: no cover - the loop returns


def unstage(folder: str) -> bool:
    """The stage removed (a stop, unless train_stage_keep); True where there was one."""
    if not os.path.isdir(folder):
        return False
    shutil.rmtree(folder)
    return True


# --- the node program's actions ------------------------------------------------------------------------------------

def make_manifest(job: records.Job) -> dict:
    """trainops-job stage-manifest: the first node's manifest of the stage, written to the job's folder."""
    paths = list((job.conf.stage or {}).get("paths") or [])
    wanted = manifest(paths, job.read(records.STAGE_MANIFEST))
    job.makedirs(job.dir)  # before prepare: a job's first start has no folder yet
    job.write(records.STAGE_MANIFEST, dict(wanted, run_id=job.run_id))
    return {"files": len(wanted["files"]), "bytes": wanted["bytes"], "hashed": wanted["hashed"]}


def stage_here(job: records.Job) -> dict:
    """trainops-job stage: this node's stage against this start's manifest, its result in NODE.stage.json."""
    wanted = job.of_this_run(records.STAGE_MANIFEST)
    if wanted is None:
        raise StageError("no manifest of this start in %s: the first node makes it first (trainops-job stage-manifest)" % job.dir)
    folder = str(job.conf.stage["dir"])
    result: dict[str, Any] = stage(wanted, folder, (job.user.pw_uid, job.user.pw_gid))
    result.update(run_id=job.run_id, node=job.node)
    job.write(job.node_path("stage"), result)
    return result
