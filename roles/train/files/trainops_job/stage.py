# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The job's data and model staged on this node's local disk (train_stage): many ranks reading one dataset from shared
storage make it crawl (the field report's third trap); a copy on each node's own disk does not.

One manifest (every file's size and sha256) is made once, on the first node, from the files on shared storage, while
every node stages (so that its read overlaps the copies): a file whose size and mtime are those of the last manifest keeps
its sha256 (a second start reads nothing to hash it again). Each node checks free space first, copies a file its stage
lacks (or holds at another size) by the kernel's copy, hashes every local file and checks it against the manifest once
the manifest is there: a kept copy with other bytes is copied again, a copy whose bytes are not the manifest's is
refused, a file of the stage that the manifest does not hold is removed. A few threads copy and hash
different files at once. So a second start copies nothing, and a changed or damaged local copy is copied
again. The node's result (bytes copied and kept, seconds, MB/s) goes to its record NODE.stage.json, which its report
carries. The stage belongs to the training user, and a stop removes it (train_stage_keep keeps it)."""

from __future__ import annotations

import concurrent.futures
import hashlib
import os
import shutil
import threading
import time
from typing import Any, Callable

from . import records

# Bytes read at a time to hash: large reads cost fewer calls, and hashlib leaves the interpreter's lock for them, so that
# WORKERS threads copy and hash files at once. Both chosen, not yet measured on a machine of many cores:
# tests/device/bin/device-stage measures others (STAGE_CHUNK_MB, STAGE_THREADS).
CHUNK = 8 << 20
WORKERS = 4
# Bytes left free on the stage's file system besides the copies (logs, the image's layers, a trainer's caches).
RESERVE = 256 << 20


class StageError(Exception):
    """What makes a stage impossible, in the words the playbook shows (the node is added by the caller)."""


def sha256(path: str) -> str:
    digest, buffer = hashlib.sha256(), memoryview(bytearray(CHUNK))
    with open(path, "rb", buffering=0) as handle:
        while count := handle.readinto(buffer):
            digest.update(buffer[:count])
    return digest.hexdigest()


def _each(work: Callable[[str], str], names: list[str]) -> dict[str, str]:
    """{name: work(name)}, WORKERS files at a time (threads: the kernel's copy, the reads and sha256 leave the
    interpreter's lock; one file after another left the cores idle while the disk read and the disk idle while a core
    hashed). On an error, the work not yet begun is dropped."""
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=WORKERS)
    try:
        return dict(zip(names, pool.map(work, names)))
    finally:
        pool.shutdown(cancel_futures=True)


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
    found = {name: (path, os.stat(path)) for name, path in sources(paths)}
    digests, fresh = {}, {}
    for name, (path, seen) in found.items():
        last = known.get(name) or {}
        if (last.get("source"), last.get("size"), last.get("mtime_ns")) == (path, seen.st_size, seen.st_mtime_ns):
            digests[name] = last["sha256"]
        else:
            fresh[name] = path
    digests.update(_each(lambda name: sha256(fresh[name]), list(fresh)))
    files = {name: {"source": path, "size": seen.st_size, "mtime_ns": seen.st_mtime_ns, "sha256": digests[name]}
             for name, (path, seen) in found.items()}
    return {"files": files, "bytes": sum(f["size"] for f in files.values()), "hashed": sum(found[n][1].st_size for n in fresh)}


def _free(path: str) -> int:
    """Bytes free for an unprivileged user on the file system that holds path (or would: its nearest existing parent)."""
    while not os.path.exists(path):
        path = os.path.dirname(path)
    seen = os.statvfs(path)
    return seen.f_bavail * seen.f_frsize


def listing(paths: list[str]) -> dict[str, tuple[str, int]]:
    """{name in the stage: (path on shared storage, size)} of every file under the paths."""
    return {name: (path, os.path.getsize(path)) for name, path in sources(paths)}


def stage(listed: dict[str, tuple[str, int]], folder: str, manifest_of: Callable[[], dict], owner: tuple[int, int] | None = None,
          free: Callable[[str], int] = _free, clock: Callable[[], float] = time.monotonic) -> dict:
    """The listed files in folder, checked against the manifest (manifest_of: made on the first node at the same time, so
    that its read of shared storage overlaps the copies): a local copy of the listed size is kept where its sha256 is the
    manifest's, else copied (again); what folder holds beside them is removed. owner: (uid, gid) the stage is given to (the
    training user's). Returns {dir, files, bytes, copied, copied_files, kept, damaged, removed, seconds, mb_per_s};
    StageError where the copies cannot fit or a file changed on shared storage while it was staged."""
    started = clock()
    local = {name: os.path.join(folder, name) for name in listed}
    copy = [n for n in sorted(listed) if not (os.path.isfile(local[n]) and os.path.getsize(local[n]) == listed[n][1])]
    damaged = [n for n in copy if os.path.exists(local[n])]
    needed = sum(listed[n][1] for n in copy)
    room = free(folder)
    if needed and needed + RESERVE > room:
        raise StageError("the stage needs %s in %s and %s is free there (%s kept for the rest)" % (
            _size(needed), folder, _size(room), _size(RESERVE)))
    # Copied or kept, each hashed as this disk holds it (a damaged copy is found so), largest first so that the threads
    # end together.
    hashes = _each(lambda name: _copy_to(listed[name][0], local[name], folder, owner) if name in copy else sha256(local[name]),
                   sorted(local, key=lambda name: -listed[name][1]))
    files = manifest_of()["files"]
    if set(files) != set(listed):
        raise StageError("the files under train_stage changed while they were staged (%d listed here, %d in the manifest): "
                         "start again once they are written" % (len(listed), len(files)))
    for name, meta in sorted(files.items()):
        if hashes[name] == meta["sha256"]:
            continue
        if name not in copy:  # a local copy of the right size and other bytes: damaged, copied again
            copy.append(name)
            damaged.append(name)
            needed += meta["size"]
            if _copy_to(listed[name][0], local[name], folder, owner) == meta["sha256"]:
                continue
        os.remove(local[name])
        raise StageError("%s changed on shared storage while it was staged (its sha256 is not the manifest's): start again "
                         "once it is written" % listed[name][0])
    removed = _prune(folder, set(files))
    seconds = clock() - started
    return {"dir": folder, "files": len(files), "bytes": sum(f["size"] for f in files.values()), "copied": needed,
            "copied_files": len(copy), "kept": sum(files[n]["size"] for n in files if n not in copy), "damaged": sorted(damaged),
            "removed": removed, "seconds": round(seconds, 2), "mb_per_s": round(needed / 1e6 / seconds, 1) if needed and seconds > 0 else None}


def _copy_to(source: str, dest: str, folder: str, owner: tuple[int, int] | None) -> str:
    """One file copied into the stage (its folders made, all given to owner), through a temporary name (a copy cut short
    is never taken for a whole one); the sha256 of the copy as this node's disk holds it, which the caller checks
    against the manifest. The kernel copies (shutil: copy_file_range, sendfile), then the copy is read back from the
    page cache to hash it: 1 GiB to three nodes of one 2-core machine, 1.32-1.45x a parallel rsync; a one-pass Python
    loop (read, hash, write each chunk) took 1.86-2.02x there, a Python loop without threads 3.2 s a GiB."""
    _makedirs(folder, os.path.dirname(dest), owner)
    tmp = dest + ".trainops-part"
    shutil.copyfile(source, tmp)
    digest = sha256(tmp)
    os.replace(tmp, dest)
    if owner:
        os.chown(dest, *owner)
    return digest


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


# --- the node program's action ------------------------------------------------------------------------------------

def make_manifest(job: records.Job) -> None:
    """The first node's manifest of the stage, written to the job's folder (made here: a job's first start has no folder
    before prepare); what makes it impossible written there instead, so that no node waits for it in vain."""
    paths = list((job.conf.stage or {}).get("paths") or [])
    try:
        found: dict[str, Any] = manifest(paths, job.read(records.STAGE_MANIFEST))
    except (StageError, OSError) as exc:
        found = {"error": "%s: %s" % (job.node, exc)}
    job.makedirs(job.dir)
    job.write(records.STAGE_MANIFEST, dict(found, run_id=job.run_id))


def wait_manifest(job: records.Job, seconds: float, sleep: Callable[[float], object] = time.sleep) -> dict:
    """This start's manifest once the first node has written it; StageError with its error, or after seconds."""
    deadline = time.monotonic() + seconds
    while True:
        found = job.of_this_run(records.STAGE_MANIFEST)
        if found and "error" in found:
            raise StageError("the first node could not make the stage's manifest: %s" % found["error"])
        if found:
            return found
        if time.monotonic() > deadline:
            raise StageError("no manifest from %s within %d s (train_stage_timeout)" % (job.nodes[0], seconds))
        sleep(0.2)


def stage_here(job: records.Job) -> dict:
    """trainops-job stage: this node's stage against this start's manifest, its result in NODE.stage.json. On the first
    node the manifest is made beside the copies (a thread: sha256 and the kernel's copy leave the interpreter's lock)."""
    plan = job.conf.stage or {}
    maker = threading.Thread(target=make_manifest, args=(job,)) if job.first else None
    if maker:
        maker.start()
    try:
        listed = listing(list(plan.get("paths") or []))
        result: dict[str, Any] = stage(listed, str(plan["dir"]), lambda: wait_manifest(job, float(plan.get("timeout") or 3600)),
                                       (job.user.pw_uid, job.user.pw_gid))
    finally:
        if maker:
            maker.join()
    result.update(run_id=job.run_id, node=job.node)
    job.write(job.node_path("stage"), result)
    return result
