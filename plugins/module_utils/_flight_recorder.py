# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""NCCL's flight recorder (torch >= 2.2): a rank's last collectives, dumped on NCCL's watchdog timeout or when asked
through the rank's pipe (torch >= 2.3), read back as plain data and summarised: where the rank waits, and with
TORCH_NCCL_ENABLE_TIMING what its collectives took.

Node side: the job runner's stall diagnosis and its sampler (roles/train/files/trainops_job links this file); standard
library only.
"""

from __future__ import annotations

import os
import pickle
import re
import time
from typing import Any, Callable

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

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError("%s.%s in a flight-recorder dump: only plain data is read" % (module, name))


def load_dump(path: str) -> dict[str, Any]:
    """A flight-recorder dump as plain data (see _PlainData)."""
    with open(path, "rb") as handle:
        dump: dict[str, Any] = _PlainData(handle).load()
        return dump


def flight_paths(pid: int, env: dict[str, str], rank: int, proc: str = "/proc") -> tuple[str | None, str | None]:
    """(pipe, dump) of a rank, from its own environment, seen through its root (inside its image too); None for
    either where the job did not set it."""
    def seen(path: str | None) -> str | None:
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
    dump = load_dump(path)
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


def flight_recorder(asked: dict[int, tuple[str, float | None, str | None]], wait: float = FLIGHT_WAIT,
                    sleep: Callable[[float], object] = time.sleep, clock: Callable[[], float] = time.time) -> dict[int, dict[str, Any]]:
    """Each asked rank's dump once it is newer than when it was asked (at most wait seconds), else the one a timeout
    left, else why there is none. asked: {rank: (dump path, its mtime before, why not asked or None)}."""
    deadline = clock() + wait
    out: dict[int, dict[str, Any]] = {}
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


# Bytes of an element of each dtype as the flight recorder names it (c10's ScalarType names).
_DTYPE_BYTES = {"Double": 8, "Float": 4, "Half": 2, "BFloat16": 2, "Long": 8, "Int": 4, "Short": 2, "Char": 1, "Byte": 1,
                "Bool": 1, "ComplexFloat": 8, "ComplexDouble": 16, "Float8_e4m3fn": 1, "Float8_e5m2": 1,
                "Float8_e4m3fnuz": 1, "Float8_e5m2fnuz": 1, "UInt16": 2, "UInt32": 4, "UInt64": 8}
# nccl-tests' busbw: the bytes each rank moves over its slowest link, from the collective's size (its larger buffer:
# an all-gather's output, a reduce-scatter's input) and the group's size n.
_BUS_FACTOR: dict[str, Callable[[int], float]]
_BUS_FACTOR = {"all_reduce": lambda n: 2.0 * (n - 1) / n, "allreduce_coalesced": lambda n: 2.0 * (n - 1) / n,
               "all_gather": lambda n: (n - 1.0) / n, "_allgather_base": lambda n: (n - 1.0) / n,
               "all_gather_into_tensor_coalesced": lambda n: (n - 1.0) / n, "reduce_scatter": lambda n: (n - 1.0) / n,
               "_reduce_scatter_base": lambda n: (n - 1.0) / n, "reduce_scatter_tensor_coalesced": lambda n: (n - 1.0) / n,
               "all_to_all": lambda n: (n - 1.0) / n, "alltoall_base": lambda n: (n - 1.0) / n,
               "broadcast": lambda n: 1.0, "reduce": lambda n: 1.0, "send": lambda n: 1.0, "recv": lambda n: 1.0}
# Sizes kept per rank in the summary: the ones that took the most time.
TOP_SIZES = 3


def _bytes(sizes: list, dtypes: list) -> int:
    total = 0
    for shape, dtype in zip(sizes or [], dtypes or []):
        count = 1
        for dim in shape:
            count *= dim
        total += count * _DTYPE_BYTES.get(dtype, 0)
    return total


def _group_size(dump: dict, entry: dict) -> int | None:
    """The number of ranks in an entry's process group, from the dump's pg_config ("ranks": "[0, 1, 2]")."""
    name = (entry.get("process_group") or ("",))[0]
    ranks = str(((dump.get("pg_config") or {}).get(name) or {}).get("ranks") or "")
    return ranks.count(",") + 1 if ranks.strip("[] ") else None


def collective_times(dump: dict, after: int = -1) -> dict:
    """What NCCL's collectives took in a rank's flight-recorder dump (torch >= 2.3 with TORCH_NCCL_ENABLE_TIMING=1: each
    completed entry's duration_ms, from CUDA events around its kernel), over the entries after record `after`:
    {last (the newest record read), calls, ms (their sum), sizes: [{op, bytes (a call's), calls, ms (the median
    call's), busbw_gbps (nccl-tests' busbw of the median call), group}] (the TOP_SIZES sizes that took the most time),
    lost (records after `after` the ring buffer no longer holds), span_s (from the first call read to the last's end)}.
    A call's time runs from its kernel's start to its end on this rank: it includes the wait for the other ranks to
    arrive, so the rank the others wait for shows the shortest calls, and the job's network is nearest the fastest
    rank's busbw."""
    timed = [e for e in dump.get("entries") or [] if e.get("record_id", -1) > after and e.get("duration_ms") is not None
             and e.get("state") == "completed"]
    last = max([after] + [e.get("record_id", -1) for e in dump.get("entries") or [] if e.get("duration_ms") is not None])
    groups: dict[tuple[str, int, int | None], list[float]] = {}
    for entry in timed:
        op = str(entry.get("profiling_name", "?")).rsplit(":", maxsplit=1)[-1]
        size = max(_bytes(entry.get("input_sizes"), entry.get("input_dtypes")),
                   _bytes(entry.get("output_sizes"), entry.get("output_dtypes")))
        groups.setdefault((op, size, _group_size(dump, entry)), []).append(float(entry["duration_ms"]))
    sizes: list[dict[str, Any]] = []
    for (op, size, ranks), times in groups.items():
        times.sort()
        median = times[len(times) // 2]
        factor = _BUS_FACTOR.get(op)
        busbw = size / (median / 1e3) / 1e9 * factor(ranks) if factor and ranks and ranks > 1 and median > 0 else None
        sizes.append({"op": op, "bytes": size, "calls": len(times), "ms": round(median, 3), "total_ms": sum(times),
                      "busbw_gbps": round(busbw, 4) if busbw is not None else None, "group": ranks})
    sizes.sort(key=lambda found: -found["total_ms"])
    for found in sizes:
        found["total_ms"] = round(found["total_ms"], 1)
    held = [e.get("record_id", -1) for e in dump.get("entries") or []]
    lost = max(0, min(held) - after - 1) if held and min(held) > after else 0
    # A call's end: when the watchdog found it completed (the GPU may run behind the calls' creation), else its creation
    # and duration.
    starts = [(e["time_created_ns"], e.get("time_discovered_completed_ns") or e["time_created_ns"] + e["duration_ms"] * 1e6)
              for e in timed if e.get("time_created_ns")]
    span = (max(end for dummy, end in starts) - min(start for start, dummy in starts)) / 1e9 if starts else None
    return {"last": last, "calls": len(timed), "ms": round(sum(sum(t) for t in groups.values()), 1), "sizes": sizes[:TOP_SIZES],
            "lost": lost, "span_s": round(span, 3) if span is not None else None}
