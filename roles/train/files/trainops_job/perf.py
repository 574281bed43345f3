# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Where each rank's time goes, sampled while the job runs (judge.py names the straggler and the class from it).

The runner (root: it reads the ranks' /proc, inside the image too) samples every rank of this node once a second in
the loop that watches its command (no thread of its own: the runner forks to write as the training user): the state of
its main thread, busy (R: computing, or held back by the node's CPU quota or a full run queue) or waiting (S, D: for a
collective, its data, a file), and its CPU time; every STACK_EVERY seconds also where its main thread is (py-spy's
dump of its Python stack, where the node has py-spy and root may read the rank: otherwise not judged). Each WINDOW
seconds it writes the shares to NODE.perf.json. The supervisor compares the nodes (judge.py): in a data-parallel step every rank
waits for the slowest at the gradients' all-reduce, so the straggler's ranks are busy nearly all the time while the
others' mostly wait for it. A rank's busy share times the step's time is its compute per step: the ratio of the shares
is how much longer it computes. Where no node holds the others back, the stacks class the bottleneck: ranks waiting
for their data (input-bound), saving checkpoints, or waiting in collectives (communication-bound).

A GPU rank waits for its kernels spinning in the CUDA call (torch.cuda.synchronize: state R, 100 % of a core on the
GPU machine's H100), so its busy share says nothing of its compute, and a rank waiting for NCCL may spin as well: the
straggler is named for ranks that compute on the CPU; the stack classes hold for both.
"""

from __future__ import annotations

import os
import pickle
import re
import statistics
import time
from typing import Any, Callable

from . import _perf_classes as classes
from ._flight_recorder import FLIGHT_WAIT, ask_dump, collective_times, flight_paths, load_dump, mtime
from ._infiniband import read_infiniband
from ._gpu_load import Window as GpuWindow
from .processes import read
from .verdict import BACKWARD_FILES, COLLECTIVE_FILES, DDP_FILE, frames_of

WINDOW = 10.0
# Seconds between two looks at a rank's Python stack: py-spy's dump took 7 ms (median) on the GPU machine and cost a
# GPU-bound step no measurable time (tests/device/bin/device-perf). Every look, so that a window's shares rest on ten
# looks: at one every 2 s, a node's share moved in steps of 20-25 % and a checkpoint-bound job's third node read 25 %.
STACK_EVERY = 1.0
STACK_TIMEOUT = 2.0
# Where a rank's main thread is, from its stack (innermost frame first): the places of the classes' table
# (_perf_classes.PLACES: checkpoint I/O, its data), a collective (the stall verdict's files; DDP's gradient all-reduce
# runs under backward: a rank waiting there waits for it), else compute (state R) or other (sleeping, or waiting
# elsewhere).
_BACKWARD_FILES = BACKWARD_FILES + (DDP_FILE,)
# Windows kept in each node's perf record as its history (15 min at one a 10 s window): what status and the page show of
# each node over time.
HISTORY = 90
# Seconds between two dumps asked of a rank's flight recorder for its collectives' times (train_collective_timing): one
# a window. Neither the timing nor a dump every 10 s moved a step on the GPU machine (tests/device/bin/
# device-collective-timing: 24.31 steps/s without, 24.31 with timing, 24.35 with the dumps).
TIMING_EVERY = WINDOW
# The variables of a rank that name its flight recorder's pipe and dump file (flight_paths).
_TIMING_VARS_B = (b"TORCH_NCCL_DEBUG_INFO_PIPE_FILE=", b"TORCH_FR_DUMP_TEMP_FILE=", b"TORCH_NCCL_DEBUG_INFO_TEMP_FILE=")
# Where installed code lives (py-spy's filenames): the standard library, packages, frozen modules ("<frozen ...>").
_LIBRARY_PARTS = ("/site-packages/", "/dist-packages/", "/lib/python3", "<")
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def stat(pid: int, proc: str = "/proc") -> tuple | None:
    """(state letter, CPU seconds) of a process's main thread, from /proc/PID/stat; None once it has ended."""
    text = read("%s/%d/stat" % (proc, pid))
    if not text or ")" not in text:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return fields[0], (int(fields[11]) + int(fields[12])) / float(_TICKS)


def interface_of(variables: list) -> str | None:
    """The interface a rank's collectives use, from its environment (NCCL_SOCKET_IFNAME, else GLOO_SOCKET_IFNAME; the
    first of a list; None for NCCL's exclusion ("^docker") or prefix ("=eth") forms, which name no one interface)."""
    for name in (b"NCCL_SOCKET_IFNAME=", b"GLOO_SOCKET_IFNAME="):
        value = next((v[len(name):].decode("utf-8", "replace") for v in variables if v.startswith(name)), "")
        first = value.split(",")[0].strip()
        if first and first[0] not in "^=":
            return first
    return None


def net_bytes(pid: int, interface: str, proc: str = "/proc") -> tuple | None:
    """(received, sent) bytes of `interface` in pid's network namespace (/proc/PID/net/dev), or None."""
    for line in (read("%s/%d/net/dev" % (proc, pid)) or "").splitlines():
        name, colon, counters = line.partition(":")
        fields = counters.split()
        if colon and name.strip() == interface and len(fields) > 8:
            return int(fields[0]), int(fields[8])
    return None


def rdma_ports(sysfs: str = "/sys") -> list:
    """This node's active RDMA ports ([{device, port, link_layer, rate_gbps}]: InfiniBand or RoCE): the node's report
    lists them (NCCL's choice of network is held against them) and rdma_bytes reads their counters."""
    return [{key: port[key] for key in ("device", "port", "link_layer", "rate_gbps")}
            for port in read_infiniband(sysfs) if port["state"] == "ACTIVE"]


def rdma_bytes(sysfs: str = "/sys") -> tuple | None:
    """(received, sent) bytes of this node's active RDMA ports (InfiniBand, RoCE), from their port counters
    (port_rcv_data and port_xmit_data count 4-octet words); None without an active port. NCCL over InfiniBand moves its
    bytes there, off the training interface's counters."""
    total, found = [0, 0], False
    for port in rdma_ports(sysfs):
        base = "%s/class/infiniband/%s/ports/%s/counters/" % (sysfs, port["device"], port["port"])
        words = [read(base + name) for name in ("port_rcv_data", "port_xmit_data")]
        if None in words:
            continue
        found = True
        for i, text in enumerate(words):
            total[i] += 4 * int((text or "").strip() or 0)
    return tuple(total) if found else None


def socket_inodes(pid: int, proc: str = "/proc") -> set:
    """The inodes of a process's sockets (its /proc/PID/fd links "socket:[N]")."""
    base = "%s/%d/fd" % (proc, pid)
    inodes: set[str] = set()
    try:
        names = os.listdir(base)
    except OSError:
        return inodes
    for name in names:
        try:
            target = os.readlink("%s/%s" % (base, name))
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def send_queue(pid: int, inodes: set, proc: str = "/proc", tables: tuple = ("tcp", "tcp6")) -> tuple:
    """(bytes in the send queues (written, not yet acknowledged by the peer) of the TCP sockets among `inodes`, or None
    where no table could be read; the tables that held one of them), from /proc/PID/net/tcp and tcp6 (pid's network
    namespace). Reading a table walks the kernel's whole TCP hash (3.5 ms each on this project's VM, whatever its few
    rows): the caller reads again only the tables that held the ranks' sockets."""
    total, read_any, held = 0, False, []
    for table in tables:
        text = read("%s/%d/net/%s" % (proc, pid, table))
        read_any = read_any or text is not None
        for line in (text or "").splitlines()[1:]:
            fields = line.split()
            if len(fields) > 9 and fields[9] in inodes:
                total += int(fields[4].partition(":")[0], 16)
                if table not in held:
                    held.append(table)
    return (total if read_any else None), tuple(held)


def _in(files: list, parts: tuple) -> bool:
    return any(part in name for name in files for part in parts)


def declared(frames: list, functions: tuple) -> bool:
    """Whether a frame is one of the job's own input functions (train_input_functions: "get_batch", or
    "train.py:get_batch" for that file's alone)."""
    for frame in frames:
        name, short = frame.get("name") or "", os.path.basename(frame.get("filename") or "")
        if any(wanted in (name, "%s:%s" % (short, name)) for wanted in functions):
            return True
    return False


def place(stack: list | None, state: str, inputs: tuple = ()) -> str:
    """Where a rank's main thread is (compute, collective, input, checkpoint, other, or stopped: state T), from py-spy's
    dump and its state at that moment; `inputs`: the job's own input functions (train_input_functions), input too."""
    if state in ("T", "t"):
        # Stopped by a signal or a debugger (py-spy's dump does not stop it): wherever its stack is, it waits for nothing
        # and the others wait for it (the stall's diagnosis names it). Molecule train's stopped rank, caught in DDP's
        # backward, read as a collective and made the job communication-bound.
        return "stopped"
    frames = frames_of(stack)
    files = [frame.get("filename") or "" for frame in frames]
    for row in classes.PLACES:
        # re caches the compiled patterns: the table is read at every look, so a row added is a place at once.
        if _in(files, row.files) or (row.functions and any(re.search(row.functions, frame.get("name") or "") for frame in frames)):
            return row.place
    if inputs and declared(frames, inputs):
        return classes.INPUT.place
    if _in(files, COLLECTIVE_FILES) or (state != "R" and _in(files, _BACKWARD_FILES)):
        return classes.COMMUNICATION.place
    return "compute" if state == "R" else "other"


def own_frame(stack: list | None) -> str | None:
    """The frame a rank waits in, as "train.py:get_batch:42": the innermost of the job's own code (not the standard
    library's, not an installed package's: the user's loop that called them), else the innermost; None without one."""
    frames = frames_of(stack)
    own = [f for f in frames if not any(part in (f.get("filename") or "<") for part in _LIBRARY_PARTS)]
    frame = (own or frames or [None])[0]
    if frame is None:
        return None
    short = frame.get("short_filename") or os.path.basename(frame.get("filename") or "?")
    return "%s:%s:%s" % (short, frame.get("name") or "?", frame.get("line") or "?")


class Sampler:
    """This node's ranks of one run: their busy shares and CPU use over each window, and where their stacks were."""

    def __init__(self, run_id: str, node: str, proc: str = "/proc", clock: Callable[[], float] = time.time,
                 stack: Callable[[int], tuple] | None = None, gpus: Callable[[], list | None] | None = None, sysfs: str = "/sys",
                 inputs: tuple = ()):
        """stack: pid -> (py-spy's JSON dump of the process, or None, and why not), as diagnosis.stack_of; None where the
        node has no py-spy. gpus: () -> every GPU's load now (_gpu_load.Reader), or None where the node has no GPU.
        inputs: the job's own input functions (train_input_functions)."""
        self.proc, self.clock, self.stack, self.stacked, self.gpus, self.sysfs = proc, clock, stack, 0.0, gpus, sysfs
        self.inputs = tuple(inputs)
        self.marker, self.node = ("TRAINOPS_RUN_ID=%s" % run_id).encode(), ("TRAINOPS_NODE=%s" % node).encode()
        self.known: dict[int, int | None] = {}  # pid: its global rank, or None for a process that is no rank of the run
        self.ranks: dict[int, int] = {}  # every pid seen as a rank of the attempt, gone or not: an OOM kill's rank
        self.interface: str | None = None  # the training interface the ranks' collectives use (launch.env's NCCL/GLOO_SOCKET_IFNAME)
        self.first = True  # the attempt's first window: its start (imports, the rendezvous, a checkpoint's load) in it
        self.tables: tuple = ()  # the /proc/net tables that held the ranks' TCP sockets (send_queue)
        self.history: list[dict] = []  # the attempt's windows in brief (history_point), the last HISTORY
        self.timing: dict[int, dict[str, Any]] = {}  # rank: its flight recorder's pipe and dump, the last record read, and an ask under way
        self.timed: dict[int, dict[str, Any]] = {}  # rank: the collectives' times of its last dump read (collective_times, seconds spanned, at)
        self.reset()

    def reset(self) -> None:
        self.since = self.clock()
        self.samples: dict[int, int] = {}
        self.busy: dict[int, int] = {}
        self.cpu: dict[int, tuple] = {}
        self.places: dict[int, dict[str, int]] = {}
        self.waits: dict[int, dict[str, int]] = {}  # rank: the frames its looks "other" waited in (own_frame), counted
        self.unread: str | None = None
        self.net: tuple | None = None  # (rx bytes, tx bytes, time) of the interface at the window's first look, then at its last
        self.rdma: tuple | None = None  # the same of the node's active RDMA ports
        self.queued = (0, 0)  # bytes in the ranks' TCP send queues, summed over the looks; the looks
        self.gpu_window = GpuWindow()  # the node's GPUs at each look while its ranks run

    def due(self) -> bool:
        """Whether the window is over (and held a sample)."""
        return bool(self.samples) and self.clock() - self.since >= WINDOW

    def rank_of(self, pid: int) -> int | None:
        if pid not in self.known:
            variables = (read("%s/%d/environ" % (self.proc, pid), "rb") or b"").split(b"\0")
            rank = next((v[5:] for v in variables if v.startswith(b"RANK=")), None)
            ours = self.marker in variables and self.node in variables and any(v.startswith(b"LOCAL_RANK=") for v in variables)
            found = self.known[pid] = int(rank) if ours and rank and rank.isdigit() else None
            if found is not None:
                self.ranks[pid] = found
            if found is not None and self.interface is None:
                self.interface = interface_of(variables)
            if found is not None and b"TORCH_NCCL_ENABLE_TIMING=1" in variables:
                env = dict(v.decode("utf-8", "replace").split("=", 1) for v in variables if v.startswith(_TIMING_VARS_B))
                pipe, dump = flight_paths(pid, env, found, self.proc)
                if pipe and dump:
                    self.timing[found] = {"pipe": pipe, "dump": dump, "last": -1, "asked": None, "since": self.clock()}
        return self.known[pid]

    def sample(self) -> None:
        """One look at every rank of the run on this node (and at their stacks, once in STACK_EVERY seconds)."""
        pids = [int(entry) for entry in os.listdir(self.proc) if entry.isdigit()]
        alive = set(pids)
        self.known = {pid: rank for pid, rank in self.known.items() if pid in alive}
        looks = self.clock() - self.stacked >= STACK_EVERY
        if looks:
            self.stacked = self.clock()
        stacks = looks and self.stack is not None
        ours = None  # a rank's pid: the training interface's counters are read in its network namespace
        inodes: set[str] = set()  # the ranks' sockets, at a look: what they wait to send
        for pid in pids:
            rank = self.rank_of(pid)
            seen = stat(pid, self.proc) if rank is not None else None
            if rank is None or seen is None:
                continue
            self.samples[rank] = self.samples.get(rank, 0) + 1
            self.busy[rank] = self.busy.get(rank, 0) + (seen[0] == "R")
            now = self.clock()
            # (CPU seconds, time) at the window's first sample of the rank, then at its last.
            self.cpu[rank] = self.cpu.get(rank, (seen[1], now))[:2] + (seen[1], now)
            if stacks:
                self._look(rank, pid)
            if looks:
                inodes |= socket_inodes(pid, self.proc)
            ours = ours or pid
        queued = None
        if ours and looks:
            queued, held = send_queue(ours, inodes, self.proc, self.tables or ("tcp", "tcp6"))
            self.tables = self.tables or held  # once found, only the tables (IPv4, IPv6) that hold the ranks' sockets
        if queued is not None:
            self.queued = (self.queued[0] + queued, self.queued[1] + 1)
        loads = self.gpus() if ours and looks and self.gpus else None
        if loads:
            self.gpu_window.add(loads)
        counted = net_bytes(ours, self.interface, self.proc) if ours and self.interface else None
        if counted:
            now = self.clock()
            self.net = (self.net or counted + (now,))[:3] + counted + (now,)
        counted = rdma_bytes(self.sysfs) if ours and looks else None
        if counted:
            now = self.clock()
            self.rdma = (self.rdma or counted + (now,))[:3] + counted + (now,)
        if looks:
            self._time_collectives({rank for rank in self.known.values() if rank is not None})

    def _time_collectives(self, alive: set) -> None:
        """Asks each rank's flight recorder for a dump once in TIMING_EVERY seconds (through its pipe: the rank goes on),
        and reads the times of the collectives it completed since the last dump read once the dump is written."""
        now = self.clock()
        for rank, state in self.timing.items():
            if rank not in alive:
                continue
            if state["asked"] is None:
                if now - state["since"] >= TIMING_EVERY and not ask_dump(state["pipe"]):
                    state["asked"] = (mtime(state["dump"]), now)
                continue
            before, at = state["asked"]
            if mtime(state["dump"]) in (None, before):
                state["asked"] = None if now - at > FLIGHT_WAIT else state["asked"]  # not answered: asked again later
                continue
            try:
                times = collective_times(load_dump(state["dump"]), state["last"])
            except (OSError, EOFError, ValueError, TypeError, AttributeError, KeyError, pickle.UnpicklingError):
                # Read while the rank still writes it (torch writes the file in place): read again at the next look.
                state["asked"] = None if now - at > FLIGHT_WAIT else state["asked"]
                continue
            state.update(asked=None, last=times["last"])
            # Where the ring buffer (train_flight_recorder_entries) dropped calls since the last dump, the share is
            # taken over the calls it still held.
            seconds = times["span_s"] if times["lost"] and times["span_s"] else now - state["since"]
            self.timed[rank] = dict(times, seconds=round(seconds, 1), at=round(now, 3))
            state["since"] = now

    def _look(self, rank: int, pid: int) -> None:
        if self.stack is None:  # sample looks only where the node has py-spy
            return
        stack, why = self.stack(pid)
        seen = stat(pid, self.proc) if stack else None  # its state as the dump ended (py-spy does not stop it)
        self.unread = why if stack is None else self.unread
        if seen:
            places = self.places.setdefault(rank, {})
            where = place(stack, seen[0], self.inputs)
            places[where] = places.get(where, 0) + 1
            frame = own_frame(stack) if where == "other" else None
            if frame:
                waits = self.waits.setdefault(rank, {})
                waits[frame] = waits.get(frame, 0) + 1

    def window(self) -> dict:
        """{at, seconds, ranks: {rank: {busy (share of samples), cpu (CPU seconds a second), places (stack looks in each
        place, where read), waits (the looks "other" by the frame they waited in, own_frame)}}, first (the attempt's
        first window), stacks_unread (why a look at a stack failed in the window, where one did), net ({interface,
        rx_mbps, tx_mbps}: MB/s on the training interface, in the ranks' network namespace: the node's, or the image's
        with host networking), queued_kb (KiB waiting in the ranks' TCP send queues, the mean of the looks: a node whose
        link out is slower than its peers' holds its sends), rdma ({interface, rx_mbps, tx_mbps} of the node's active
        RDMA ports, rdma_bytes, where it has one), gpus (each GPU's utilization, SM clock, power and clock event reasons
        over the looks, _gpu_load.Window), collectives ({rank: _flight_recorder.collective_times of the rank's last dump
        read, in this window or the one before, with seconds (the time since the rank's dump before), at (when it was
        read) and share (the share of that time in NCCL's collectives)}, where the job times them), history (this window
        and the attempt's earlier ones in brief, history_point, the last HISTORY)}; a new window begins."""
        now = self.clock()
        ranks: dict[str, dict[str, Any]] = {}
        for rank, count in sorted(self.samples.items()):
            cpu = self.cpu[rank]
            ranks[str(rank)] = {"busy": round(self.busy[rank] / count, 3),
                                "cpu": round((cpu[2] - cpu[0]) / (cpu[3] - cpu[1]), 3) if cpu[3] > cpu[1] else None}
            if rank in self.places:
                ranks[str(rank)]["places"] = self.places[rank]
            if rank in self.waits:
                ranks[str(rank)]["waits"] = self.waits[rank]
        out = {"at": round(now, 3), "seconds": round(now - self.since, 1), "ranks": ranks, "first": self.first}
        for key, seen, interface in (("net", self.net, self.interface), ("rdma", self.rdma, "RDMA ports")):
            if seen and seen[5] > seen[2]:
                seconds = seen[5] - seen[2]
                out[key] = {"interface": interface, "rx_mbps": round((seen[3] - seen[0]) / seconds / 1e6, 3),
                            "tx_mbps": round((seen[4] - seen[1]) / seconds / 1e6, 3)}
        if self.queued[1]:
            out["queued_kb"] = round(self.queued[0] / self.queued[1] / 1024.0, 1)
        gpus = self.gpu_window.figures()
        if gpus:
            out["gpus"] = gpus
        # A dump read in the window before stands for this one too: the reads and the windows do not end together.
        timed = {rank: times for rank, times in self.timed.items() if now - times["at"] <= WINDOW + TIMING_EVERY}
        if timed:
            out["collectives"] = {str(rank): dict(times, share=round(min(1.0, times["ms"] / 1e3 / times["seconds"]), 3)
                                                  if times["seconds"] > 0 else None)
                                  for rank, times in sorted(timed.items())}
        self.history = (self.history + [history_point(out)])[-HISTORY:]
        out["history"] = self.history
        self.first = False
        if self.unread:
            out["stacks_unread"] = self.unread
        self.reset()
        return out


def history_point(window: dict) -> dict:
    """A window in brief, for the node's history: {at, busy (the ranks' mean busy share), wait (their stack looks' share in
    a collective, where read), gpu (the GPUs' mean utilization %, where read), tx (MB/s out on the training interface)}."""
    ranks = list(window["ranks"].values())
    counts: dict[str, int] = {}
    for rank in ranks:
        for where, count in (rank.get("places") or {}).items():
            counts[where] = counts.get(where, 0) + count
    looks = sum(counts.values())
    utils = [gpu["util"] for gpu in window.get("gpus") or [] if gpu.get("util") is not None]
    return {"at": window["at"], "busy": round(statistics.mean(r["busy"] for r in ranks), 3) if ranks else None,
            "wait": round(counts.get("collective", 0) / float(looks), 3) if looks else None,
            "gpu": round(statistics.mean(utils), 1) if utils else None, "tx": (window.get("net") or {}).get("tx_mbps")}
