# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The job's output, as the training user: every byte to the node's log as it comes (tqdm's carriage returns
included), and each new training step it names (_progress) to the node's progress record, at most once a second,
with what NCCL said it found and used (its NCCL_DEBUG=INFO lines: the network, the transports between nodes)."""

from __future__ import annotations

import os
import re
import select
import sys
import time
from typing import Callable, TextIO

from . import records
from ._nccl_debug import parse_nccl_debug
from ._progress import Progress
from .torchrun import launcher_failed

_LINE_ENDS = re.compile(r"[\r\n]")
# NCCL's lines kept for its summary: a communicator's set-up logs tens a rank; a job that logs NCCL's every call
# (NCCL_DEBUG_SUBSYS=ALL) is not kept whole.
NCCL_LINES = 4000
_NCCL_KEYS = ("nccl_version", "networks", "transports", "socket_interfaces", "ib_devices", "ib_no_device", "nnodes")


def nccl_summary(lines: list) -> dict:
    """What this node's ranks' NCCL found and used (_nccl_debug.parse_nccl_debug): {nccl_version, networks, transports
    (those that carried data: NET/IB, NET/Socket, P2P/..., SHM), socket_interfaces, ib_devices, ib_no_device, nnodes,
    net_plugin (the name of the one loaded, or None), warnings (the last three NCCL WARN lines)}."""
    parsed = parse_nccl_debug("\n".join(lines))
    return dict({key: parsed[key] for key in _NCCL_KEYS}, net_plugin=parsed["net_plugin"]["name"], warnings=parsed["warnings"][-3:])


def tee(job: records.Job, source: int, log: TextIO = sys.stderr, clock: Callable[[], float] = time.time, attempt: int = 0) -> int:
    """Until source ends. The output never waits on the progress record: a failed write is retried with the next step.
    The record names the attempt and when its output began (attempt_at): the points after that are the attempt's."""
    path = job.node_path("progress")
    progress = Progress(job.node, job.run_id, job.conf.progress_pattern, clock=clock,
                        record=job.of_this_run(path))  # a restart of this start: its steps so far stay
    progress.record.update(attempt=attempt, attempt_at=round(clock(), 3))
    pending, written, partial, said = False, 0.0, "", 0
    nccl: list[str] = []
    with open(job.node_path("log"), "ab", buffering=0) as out:
        while True:
            ready = select.select([source], [], [], 1.0)[0]
            chunk = os.read(source, 65536) if ready else None
            if chunk:
                out.write(chunk)
                segments = _LINE_ENDS.split(partial + chunk.decode("utf-8", "replace"))
                partial = segments.pop()[-4096:]
                for segment in segments:
                    pending = progress.segment(segment) or pending
                    failed = launcher_failed(segment) if "xit" in segment else None
                    if failed is not None and (progress.record.get("ranks_failed") or {}).get("attempt") != attempt:
                        # The launcher said a rank of this node failed: the runner ends a launcher that lingers after it.
                        progress.record["ranks_failed"], pending = {"attempt": attempt, "exitcode": failed, "at": round(clock(), 3)}, True
                    if "NCCL " in segment and len(nccl) < NCCL_LINES:
                        nccl.append(segment)
                        pending = True
                # A bar is repainted behind a carriage return, its line ended only by the next repaint.
                pending = (partial and progress.peek(partial)) or pending
            if pending and (chunk == b"" or time.monotonic() - written >= 1.0):
                if len(nccl) > said:
                    progress.record["nccl"], said = nccl_summary(nccl), len(nccl)
                try:
                    records.write_json(path, progress.record)
                    pending, written = False, time.monotonic()
                except OSError as exc:
                    print("trainops-job: cannot write %s: %s" % (path, exc), file=log)
            if chunk == b"":
                return 0
