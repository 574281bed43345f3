# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A short read throughput check of shared storage: one node writes a test file, every node reads it at the same
moment with its own page cache for the file dropped first, and each figure is judged against a threshold.

Node side: shipped to the nodes inside the module storage_throughput. Every loop is bounded by a deadline; the clock
and the sleep are arguments so that the tests need no real waiting.
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import Any, Callable, Iterator

MIB = 2 ** 20
CHUNK = MIB


@contextlib.contextmanager
def as_ids(uid: int | None = None, gid: int | None = None) -> Iterator[None]:
    """File operations as uid/gid (effective ids, no supplementary groups), then back. Storage such as NFS with
    root_squash judges by these ids; the account itself need not exist. Without uid: as we are."""
    if uid is None:
        yield
        return
    euid, egid, groups = os.geteuid(), os.getegid(), os.getgroups()
    os.setgroups([])
    os.setegid(uid if gid is None else gid)
    os.seteuid(uid)
    try:
        yield
    finally:
        os.seteuid(euid)
        os.setegid(egid)
        os.setgroups(groups)


def drop_cache(fd: int) -> bool:
    """Ask the kernel to drop this file's cached pages on this node, so that a read comes from the storage; False where
    the platform has no posix_fadvise. Dirty pages are not dropped: the writer syncs before it asks."""
    if not hasattr(os, "posix_fadvise"):
        return False
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    return True


def mbps(size: float, seconds: float) -> float | None:
    """Decimal megabytes per second, one decimal; None when no time passed (nothing to divide by)."""
    return round(size / seconds / 1e6, 1) if seconds > 0 else None


def write_file(path: str, size_mib: float, timeout: float, clock: Callable[[], float] = time.monotonic) -> dict[str, Any]:
    """Write size_mib MiB of random data to path (replaced when there), synced and dropped from the cache.
    Random, not zeros: storage that compresses or skips zeros would read them back unrealistically fast.
    Stops at timeout seconds: {bytes, seconds, mbps, timed_out}."""
    start = clock()
    written = 0
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        while written < size_mib * MIB and clock() - start < timeout:
            written += os.write(fd, os.urandom(CHUNK))
        os.fsync(fd)
        drop_cache(fd)
    finally:
        os.close(fd)
    seconds = clock() - start
    return {"bytes": written, "seconds": round(seconds, 3), "mbps": mbps(written, seconds), "timed_out": written < size_mib * MIB}


def remove_file(path: str) -> bool:
    """Remove path; False when it was not there (a step run twice, or removed by hand)."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True


def wait_until(start_at: float | None, limit: float, now: Callable[[], float] = time.time,
               sleep: Callable[[float], object] = time.sleep) -> float:
    """Sleep until the wall-clock time start_at (every node the same), at most limit seconds: a node whose clock is
    far behind does not wait for ever. Returns how late this node begins (seconds after start_at, 0 when on time)."""
    if start_at is not None:
        sleep(min(max(start_at - now(), 0), limit))
        return round(max(now() - start_at, 0), 3)
    return 0.0


def read_file(path: str, timeout: float, clock: Callable[[], float] = time.monotonic,
              now: Callable[[], float] = time.time) -> dict[str, Any]:
    """Read path to its end, its cached pages on this node dropped first, stopping at timeout seconds:
    {bytes, seconds, mbps, timed_out, cache_dropped, started, ended} (started and ended: wall-clock times, to compare
    the nodes' reads)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        dropped = drop_cache(fd)
        started, start = now(), clock()
        read = 0
        timed_out = False
        while True:
            if clock() - start >= timeout:
                timed_out = True
                break
            data = os.read(fd, CHUNK)
            if not data:
                break
            read += len(data)
        seconds = clock() - start
    finally:
        os.close(fd)
    return {"bytes": read, "seconds": round(seconds, 3), "mbps": mbps(read, seconds), "timed_out": timed_out,
            "cache_dropped": dropped, "started": round(started, 3), "ended": round(started + seconds, 3)}


def summary(node: str, path: str, result: dict[str, Any]) -> str:
    """One line with the figure: 'node2: 812.5 MB/s reading 256 MiB of /mnt/shared/x in 0.33 s (0.1 s late)'."""
    late = result.get("late") or 0
    return "%s: %s MB/s reading %d MiB of %s in %.2f s%s%s" % (
        node, result["mbps"], result["bytes"] // MIB, path, result["seconds"],
        " (stopped at the time limit)" if result["timed_out"] else "",
        " (began %.1f s after the others)" % late if late >= 1 else "")


def _number(value: float) -> float:
    """200.0 as 200 (thresholds are usually whole), 12.5 as 12.5."""
    return int(value) if float(value).is_integer() else value


def verdict(node: str, path: str, result: dict[str, Any], min_mbps: float | None) -> str | None:
    """A warning naming the node and its figure when the read was slower than min_mbps or did not finish; None
    otherwise (and when no threshold is set). A warning, not a failure: training still works, its data loading
    waits on the storage."""
    if not min_mbps or (result["mbps"] is not None and result["mbps"] >= min_mbps and not result["timed_out"]):
        return None
    figure = "%s MB/s" % result["mbps"] if result["mbps"] is not None else "nothing read"
    ending = ", and did not finish within the time limit" if result["timed_out"] else ""
    return ("%s: shared storage %s read at %s with every node reading at once, below %s MB/s%s. Stage datasets on local "
            "disk (a node-local directory such as /local/data or the node's NVMe) before training; keep checkpoints on "
            "%s." % (node, os.path.dirname(path) or path, figure, _number(min_mbps), ending, os.path.dirname(path) or path))
