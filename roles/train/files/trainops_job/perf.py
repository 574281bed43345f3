# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Where each rank's time goes, sampled while the job runs, and the straggler named from it.

The runner (root: it reads the ranks' /proc, inside the image too) samples every rank of this node once a second in
the loop that watches its command (no thread of its own: the runner forks to write as the training user): the state of
its main thread, busy (R: computing, or held back by the node's CPU quota or a full run queue) or waiting (S, D: for a
collective, its data, a file), and its CPU time. Each WINDOW seconds it writes the shares to NODE.perf.json. The
supervisor compares the nodes: in a data-parallel step every rank waits for the slowest at the gradients' all-reduce,
so the straggler's ranks are busy nearly all the time while the others' mostly wait for it. A rank's busy share times
the step's time is its compute per step: the ratio of the shares is how much longer it computes.
"""

from __future__ import annotations

import os
import statistics
import time

from .processes import read

WINDOW = 10.0
# A straggler: its ranks busy at least BUSY of the time, the other nodes' (their median) at least GAP less.
BUSY = 0.75
GAP = 0.3
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def stat(pid: int, proc: str = "/proc") -> tuple | None:
    """(state letter, CPU seconds) of a process's main thread, from /proc/PID/stat; None once it has ended."""
    text = read("%s/%d/stat" % (proc, pid))
    if not text or ")" not in text:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return fields[0], (int(fields[11]) + int(fields[12])) / float(_TICKS)


class Sampler:
    """This node's ranks of one run: their busy shares and CPU use over each window."""

    def __init__(self, run_id: str, node: str, proc: str = "/proc", clock=time.time):
        self.proc, self.clock = proc, clock
        self.marker, self.node = ("TRAINOPS_RUN_ID=%s" % run_id).encode(), ("TRAINOPS_NODE=%s" % node).encode()
        self.known = {}  # pid: its global rank, or None for a process that is no rank of the run
        self.reset()

    def reset(self) -> None:
        self.since, self.samples, self.busy, self.cpu = self.clock(), {}, {}, {}

    def due(self) -> bool:
        """Whether the window is over (and held a sample)."""
        return bool(self.samples) and self.clock() - self.since >= WINDOW

    def rank_of(self, pid: int) -> int | None:
        if pid not in self.known:
            variables = (read("%s/%d/environ" % (self.proc, pid), "rb") or b"").split(b"\0")
            rank = next((v[5:] for v in variables if v.startswith(b"RANK=")), None)
            ours = self.marker in variables and self.node in variables and any(v.startswith(b"LOCAL_RANK=") for v in variables)
            self.known[pid] = int(rank) if ours and rank and rank.isdigit() else None
        return self.known[pid]

    def sample(self) -> None:
        """One look at every rank of the run on this node."""
        pids = [int(entry) for entry in os.listdir(self.proc) if entry.isdigit()]
        alive = set(pids)
        self.known = {pid: rank for pid, rank in self.known.items() if pid in alive}
        for pid in pids:
            rank = self.rank_of(pid)
            seen = stat(pid, self.proc) if rank is not None else None
            if seen is None:
                continue
            self.samples[rank] = self.samples.get(rank, 0) + 1
            self.busy[rank] = self.busy.get(rank, 0) + (seen[0] == "R")
            now = self.clock()
            # (CPU seconds, time) at the window's first sample of the rank, then at its last.
            self.cpu[rank] = self.cpu.get(rank, (seen[1], now))[:2] + (seen[1], now)

    def window(self) -> dict:
        """{at, seconds, ranks: {rank: {busy (share of samples), cpu (CPU seconds a second)}}}; a new window begins."""
        now = self.clock()
        ranks = {}
        for rank, count in sorted(self.samples.items()):
            cpu = self.cpu[rank]
            ranks[str(rank)] = {"busy": round(self.busy[rank] / count, 3),
                                "cpu": round((cpu[2] - cpu[0]) / (cpu[3] - cpu[1]), 3) if cpu[3] > cpu[1] else None}
        out = {"at": round(now, 3), "seconds": round(now - self.since, 1), "ranks": ranks}
        self.reset()
        return out


def straggler(perfs: dict, now: float, attempt: int) -> dict | None:
    """The node the others wait for, from every node's last window of this attempt (no older than three windows):
    {node, busy, others, ratio, text}, or None. A node's share is the mean of its ranks'."""
    shares = {}
    for node, perf in perfs.items():
        ranks = list(((perf or {}).get("ranks") or {}).values())
        if ranks and perf.get("attempt", 0) == attempt and now - perf.get("at", 0) <= 3 * WINDOW:
            shares[node] = statistics.mean(r["busy"] for r in ranks)
    if len(shares) < 2:
        return None
    node = max(shares, key=shares.get)
    others = statistics.median(v for n, v in shares.items() if n != node)
    if shares[node] < BUSY or others > shares[node] - GAP:
        return None
    ratio = shares[node] / others if others > 0 else None
    # A share cannot pass 100 %: a straggler busy all the time may compute longer still than the ratio says.
    longer = "%s%.1fx" % ("at least " if shares[node] >= 0.95 else "", ratio) if ratio else None
    text = "straggler: %s's ranks are busy %d %% of the time, the other nodes' %d %% (they wait for it)%s" % (
        node, round(100 * shares[node]), round(100 * others), "; it computes %s longer per step" % longer if longer else "")
    return {"node": node, "busy": round(shares[node], 3), "others": round(others, 3), "ratio": round(ratio, 2) if ratio else None,
            "text": text}
