# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""This node's GPUs before and after an attempt of the job: a failure that came with a GPU fault (an Xid that takes the
GPU out of service, or new uncorrected ECC errors) leaves the node out of the restart. And the kernel's log, where the
runner finds the OOM kills of an attempt (_oom). Read as root (the runner): the
kernel log needs it where kernel.dmesg_restrict is set. A node without nvidia-smi has no GPU to judge."""

from __future__ import annotations

import shutil
import subprocess

from . import gpu

TIMEOUT = 20


def _run(argv: list) -> str | None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def kernel_log() -> str:
    """The kernel's log as dmesg (else journalctl -k) gives it; empty where neither answers."""
    return _run(["dmesg"]) or _run(["journalctl", "-k", "-b", "--no-pager", "-q"]) or ""


def snapshot() -> dict | None:
    """{xids: the Xid events in the kernel log now, ecc: {GPU index: uncorrected volatile ECC errors}}; None without
    GPUs."""
    if not shutil.which("nvidia-smi"):
        return None
    log = kernel_log()
    query = _run(["nvidia-smi", "--query-gpu=index,ecc.errors.uncorrected.volatile.total", "--format=csv"])
    return {"xids": gpu.parse_xid(log), "ecc": ecc_counts(query)}


def ecc_counts(query_csv: str | None) -> dict:
    """{GPU index: uncorrected volatile ECC errors} from nvidia-smi's query; GPUs without ECC (N/A) left out."""
    rows = gpu.parse_query_csv(query_csv or "")
    return {row["index"]: int(row["ecc.errors.uncorrected.volatile.total"] or 0) for row in rows
            if (row.get("ecc.errors.uncorrected.volatile.total") or "").isdigit()}


def faults(before: dict | None, after: dict | None) -> list:
    """What went wrong with this node's GPUs between two snapshots: ["Xid 79 on PCI:0000:3b:00 (GPU has fallen off the
    bus.)", "GPU 2: 4 new uncorrected ECC errors"]. The Xid events after the last one seen before are new; all of them
    when that one is gone (the kernel's ring buffer went round)."""
    if not before or not after:
        return []
    events, last = after["xids"], (before["xids"] or [None])[-1]
    seen = max((i for i, event in enumerate(events) if event == last), default=-1) if last else -1
    found = ["Xid %d on PCI:%s (%s)" % (e["xid"], e["pci"], e["message"]) for e in events[seen + 1:] if e["xid"] in gpu.OUT_OF_SERVICE_XIDS]
    found += ["GPU %s: %d new uncorrected ECC errors" % (index, count - before["ecc"].get(index, 0))
              for index, count in sorted(after["ecc"].items()) if count > before["ecc"].get(index, count)]
    return found
