# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""NCCL's flight recorder (torch >= 2.2): a rank's last collectives, dumped on NCCL's watchdog timeout or when asked
through the rank's pipe (torch >= 2.3), read back as plain data and summarised (where the rank waits).

Node side: the job runner's stall diagnosis (roles/train/files/trainops_job links this file); standard library only.
"""

from __future__ import annotations

import os
import pickle
import re
import time

# NCCL's flight recorder (torch >= 2.3): a write to a rank's pipe (TORCH_NCCL_DEBUG_INFO_PIPE_FILE, then the rank,
# then .pipe) makes its watchdog thread dump the rank's last collectives to its dump file, and the rank goes on. The
# dump took 5 s on the H200 machine; a stopped rank's watchdog is stopped too and is not asked.
FLIGHT_WAIT = 15
_DUMP_VARS = ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
# A rank's files are read through its root (/proc/PID/root/...) and named as the rank sees them.
_PROC_ROOT_RE = re.compile(r"^/proc/\d+/root(?=/)")


class _PlainData(pickle.Unpickler):
    """A dump is a pickle of dicts, lists, strings and numbers, written by the job's user and read here as root:
    anything that would import or call code is refused."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError("%s.%s in a flight-recorder dump: only plain data is read" % (module, name))


def flight_paths(pid: int, env: dict, rank: int, proc: str = "/proc") -> tuple:
    """(pipe, dump) of a rank, from its own environment, seen through its root (inside its image too); None for
    either where the job did not set it."""
    def seen(path):
        return os.path.join(proc, str(pid), "root", path.lstrip("/")) if path else None
    pipe = env.get("TORCH_NCCL_DEBUG_INFO_PIPE_FILE")
    dump = next((env[name] for name in _DUMP_VARS if env.get(name)), None)
    return seen(pipe and "%s%d.pipe" % (pipe, rank)), seen(dump and "%s%d" % (dump, rank))


def ask_dump(pipe: str) -> str | None:
    """Asks a rank's watchdog for a dump: None when asked, else why not (no pipe: the job has no flight recorder,
    or its torch is older; no reader: the rank's process group is gone)."""
    try:
        handle = os.open(pipe, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as exc:
        return "not asked: %s" % (exc.strerror or str(exc)).lower()
    try:
        os.write(handle, b"1")
    finally:
        os.close(handle)
    return None


def mtime(path: str) -> float | None:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


def read_dump(path: str, now: float) -> dict:
    """A rank's flight-recorder dump, summarised: where it waits is its oldest collective not completed (scheduled or
    started), else its last one. {entries, pending, collective: {op, seq, state, group, age_seconds}, groups, nccl}."""
    with open(path, "rb") as handle:
        dump = _PlainData(handle).load()
    entries = dump.get("entries") or []
    pending = [e for e in entries if e.get("state") != "completed"]
    entry = pending[0] if pending else (entries[-1] if entries else None)
    collective = None
    if entry:
        group = entry.get("process_group") or ("", "")
        collective = {"op": str(entry.get("profiling_name", "?")).rsplit(":", maxsplit=1)[-1], "state": entry.get("state"),
                      "seq": entry.get("p2p_seq_id") if entry.get("is_p2p") else entry.get("collective_seq_id"),
                      "group": group[1] if len(group) > 1 else str(group),
                      "age_seconds": round(now - entry["time_created_ns"] / 1e9, 1) if entry.get("time_created_ns") else None}
    return {"entries": len(entries), "pending": len(pending), "collective": collective,
            "groups": dump.get("pg_status") or {}, "nccl": dump.get("comm_lib_version")}


def flight_recorder(asked: dict, wait: float = FLIGHT_WAIT, sleep=time.sleep, clock=time.time) -> dict:
    """Each asked rank's dump once it is newer than when it was asked (at most wait seconds), else the one a timeout
    left, else why there is none. asked: {rank: (dump path, its mtime before, why not asked or None)}."""
    deadline, out = clock() + wait, {}
    while True:
        waiting = [r for r, (dump, before, why) in asked.items() if not why and mtime(dump) in (None, before)]
        if not waiting or clock() >= deadline:
            break
        sleep(0.5)
    for rank, (dump, before, why) in sorted(asked.items()):
        fresh = not why and mtime(dump) not in (None, before)
        if mtime(dump) is None:
            out[rank] = {"error": why or "no dump within %d s" % wait}
            continue
        try:
            out[rank] = dict(read_dump(dump, clock()), fresh=fresh, file=_PROC_ROOT_RE.sub("", dump))
        except (OSError, EOFError, ValueError, TypeError, AttributeError, pickle.UnpicklingError) as exc:
            out[rank] = {"error": "unreadable dump: %s" % exc}
        if not fresh:
            out[rank]["why_not_fresh"] = why or "no new dump within %d s" % wait
    return out
