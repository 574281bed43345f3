# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Where each rank's time goes, sampled while the job runs, and the straggler named from it.

The runner (root: it reads the ranks' /proc, inside the image too) samples every rank of this node once a second in
the loop that watches its command (no thread of its own: the runner forks to write as the training user): the state of
its main thread, busy (R: computing, or held back by the node's CPU quota or a full run queue) or waiting (S, D: for a
collective, its data, a file), and its CPU time; every STACK_EVERY seconds also where its main thread is (py-spy's
dump of its Python stack, where the node has py-spy and root may read the rank: otherwise not judged). Each WINDOW
seconds it writes the shares to NODE.perf.json. The supervisor compares the nodes: in a data-parallel step every rank
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
from typing import Any, Callable, NamedTuple

from . import _perf_classes as classes
from ._flight_recorder import FLIGHT_WAIT, ask_dump, collective_times, flight_paths, load_dump, mtime
from ._gpu_load import HW_REASONS, SW_REASONS
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
# A straggler: its ranks busy at least BUSY of the time, the other nodes' (their median) at least GAP less.
BUSY = 0.75
GAP = 0.3
# Where a rank's main thread is, from its stack (innermost frame first): the places of the classes' table
# (_perf_classes.PLACES: checkpoint I/O, its data), a collective (the stall verdict's files; DDP's gradient all-reduce
# runs under backward: a rank waiting there waits for it), else compute (state R) or other (sleeping, or waiting
# elsewhere).
_BACKWARD_FILES = BACKWARD_FILES + (DDP_FILE,)
# A window of fewer stack looks than MIN_LOOKS is not judged (a class is named at its row's bound).
MIN_LOOKS = 4
# Windows kept in each node's perf record as its history (15 min at one a 10 s window): what status and the page show of
# each node over time.
HISTORY = 90
# A communication-bound job's slow link: the node whose ranks' sends wait in their sockets, at least QUEUED_KB on
# average and QUEUED_RATIO times the other nodes' (their median). In a ring all-reduce every node sends as much; the
# node whose link out is slow holds its bytes (molecule train: 3-4 MiB behind a 40 Mbit/s tbf, the others' near 0).
QUEUED_KB = 256
QUEUED_RATIO = 4
# A GPU straggler: a busy GPU (utilization at least GPU_BUSY %, idle in under half the looks) whose SM clock, as a share
# of its maximum, is GPU_CLOCK_GAP below the median of the job's other busy GPUs, or whose clocks the hardware holds back
# (HW_REASONS) in at least half the looks: every data-parallel step waits for the slowest GPU. A power cap holds every
# GPU of a busy job alike (the H100 at 1335-1361 of 1980 MHz, the H200's burn-in 1425-1500, "SW Power Cap"), so the
# clocks are compared with the peers', not with their maximum.
GPU_BUSY = 50
GPU_CLOCK_GAP = 0.15
_REASON_TEXT = dict(HW_REASONS, **SW_REASONS)
# Seconds between two dumps asked of a rank's flight recorder for its collectives' times (train_collective_timing): one
# a window. Neither the timing nor a dump every 10 s moved a step on the GPU machine (tests/device/bin/
# device-collective-timing: 24.31 steps/s without, 24.31 with timing, 24.35 with the dumps).
TIMING_EVERY = WINDOW
# A straggler from NCCL's own times: the node whose ranks spend the least of their time in collectives while the other
# nodes' (their median) spend at least NCCL_WAIT and GAP more: a collective's time on a rank includes its wait for the
# last rank to arrive, so the ranks the others wait for show the shortest.
NCCL_WAIT = 0.4
# The variables of a rank that name its flight recorder's pipe and dump file (flight_paths).
_TIMING_VARS_B = (b"TORCH_NCCL_DEBUG_INFO_PIPE_FILE=", b"TORCH_FR_DUMP_TEMP_FILE=", b"TORCH_NCCL_DEBUG_INFO_TEMP_FILE=")
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


def place(stack: list | None, state: str) -> str:
    """Where a rank's main thread is (compute, collective, input, checkpoint, other, or stopped: state T), from py-spy's
    dump and its state at that moment."""
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
    if _in(files, COLLECTIVE_FILES) or (state != "R" and _in(files, _BACKWARD_FILES)):
        return classes.COMMUNICATION.place
    return "compute" if state == "R" else "other"


class Sampler:
    """This node's ranks of one run: their busy shares and CPU use over each window, and where their stacks were."""

    def __init__(self, run_id: str, node: str, proc: str = "/proc", clock: Callable[[], float] = time.time,
                 stack: Callable[[int], tuple] | None = None, gpus: Callable[[], list | None] | None = None, sysfs: str = "/sys"):
        """stack: pid -> (py-spy's JSON dump of the process, or None, and why not), as diagnosis.stack_of; None where the
        node has no py-spy. gpus: () -> every GPU's load now (_gpu_load.Reader), or None where the node has no GPU."""
        self.proc, self.clock, self.stack, self.stacked, self.gpus, self.sysfs = proc, clock, stack, 0.0, gpus, sysfs
        self.marker, self.node = ("TRAINOPS_RUN_ID=%s" % run_id).encode(), ("TRAINOPS_NODE=%s" % node).encode()
        self.known: dict[int, int | None] = {}  # pid: its global rank, or None for a process that is no rank of the run
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
            where = place(stack, seen[0])
            places[where] = places.get(where, 0) + 1

    def window(self) -> dict:
        """{at, seconds, ranks: {rank: {busy (share of samples), cpu (CPU seconds a second), places (stack looks in each
        place, where read)}}, first (the attempt's first window), stacks_unread (why a look at a stack failed in the
        window, where one did), net ({interface, rx_mbps, tx_mbps}: MB/s on the training interface, in the ranks'
        network namespace: the node's, or the image's with host networking), queued_kb (KiB waiting in the ranks' TCP send
        queues, the mean of the looks: a node whose link out is slower than its peers' holds its sends), rdma ({interface,
        rx_mbps, tx_mbps} of the node's active RDMA ports, rdma_bytes, where it has one), gpus (each GPU's
        utilization, SM clock, power and clock event reasons over the looks, _gpu_load.Window), collectives ({rank:
        _flight_recorder.collective_times of the rank's last dump read, in this window or the one before, with seconds
        (the time since the rank's dump before), at (when it was read) and share (the share of that time in NCCL's
        collectives)}, where the job times them), history (this window and the attempt's earlier ones in brief,
        history_point, the last HISTORY)}; a new window begins."""
        now = self.clock()
        ranks: dict[str, dict[str, Any]] = {}
        for rank, count in sorted(self.samples.items()):
            cpu = self.cpu[rank]
            ranks[str(rank)] = {"busy": round(self.busy[rank] / count, 3),
                                "cpu": round((cpu[2] - cpu[0]) / (cpu[3] - cpu[1]), 3) if cpu[3] > cpu[1] else None}
            if rank in self.places:
                ranks[str(rank)]["places"] = self.places[rank]
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


def _current(perfs: dict, now: float, attempt: int) -> dict:
    """{node: its ranks' figures}, from every node's last window of this attempt (no older than three windows; not its
    first, which holds the attempt's start)."""
    current = {}
    for node, perf in perfs.items():
        ranks = list(((perf or {}).get("ranks") or {}).values())
        if ranks and perf.get("attempt", 0) == attempt and now - perf.get("at", 0) <= 3 * WINDOW and not perf.get("first"):
            current[node] = ranks
    return current


def straggler(perfs: dict, now: float, attempt: int) -> dict | None:
    """The node the others wait for, from every node's last window of this attempt (no older than three windows):
    {node, busy, others, ratio, text}, or None. A node's share is the mean of its ranks'."""
    shares = {node: statistics.mean(r["busy"] for r in ranks) for node, ranks in _current(perfs, now, attempt).items()}
    if len(shares) < 2:
        return None
    node = max(shares, key=lambda n: shares[n])
    others = statistics.median(v for n, v in shares.items() if n != node)
    if shares[node] < BUSY or others > shares[node] - GAP:
        return None
    ratio = shares[node] / others if others > 0 else None
    # A share cannot pass 100 %: a straggler busy all the time may compute longer still than the ratio says.
    longer = "%s%.1fx" % ("at least " if shares[node] >= 0.95 else "", ratio) if ratio else None
    text = "%s: %s's ranks are busy %d %% of the time, the other nodes' %d %% (they wait for it)%s" % (
        classes.STRAGGLER.name, node, round(100 * shares[node]), round(100 * others), "; it computes %s longer per step" % longer if longer else "")
    return {"node": node, "busy": round(shares[node], 3), "others": round(others, 3), "ratio": round(ratio, 2) if ratio else None,
            "text": text}


def _held(gpu: dict) -> list:
    """The reasons holding a GPU's clocks back in at least half the looks, as nvidia-smi -q names them."""
    return [_REASON_TEXT[r] for r, share in sorted((gpu.get("reasons") or {}).items()) if r in _REASON_TEXT and share >= 0.5]


def _clock_share(gpu: dict) -> float | None:
    """A GPU's SM clock as a share of its maximum (comparable across models), or None where either is unknown."""
    return gpu["sm_mhz"] / float(gpu["sm_max_mhz"]) if gpu.get("sm_mhz") and gpu.get("sm_max_mhz") else None


def gpu_straggler(perfs: dict, now: float, attempt: int) -> dict | None:
    """The GPUs the others wait for, from every node's last window of this attempt: {node (of the slowest), gpus
    ([node, index, MHz]), others (the other busy GPUs' median share of their maximum clock), text}, or None."""
    busy = [(node, gpu) for node in _current(perfs, now, attempt) for gpu in perfs[node].get("gpus") or []
            if (gpu.get("util") or 0) >= GPU_BUSY and (gpu.get("reasons") or {}).get("gpu_idle", 0) < 0.5 and _clock_share(gpu)]

    def clock(gpu: dict) -> float:
        return _clock_share(gpu) or 0.0  # a busy GPU's is known (the filter above)

    slow = []
    for at, (node, gpu) in enumerate(busy):
        peers = [clock(peer) for i, (dummy, peer) in enumerate(busy) if i != at]
        held = any(r in HW_REASONS and share >= 0.5 for r, share in (gpu.get("reasons") or {}).items())
        if held or (peers and clock(gpu) < (1 - GPU_CLOCK_GAP) * statistics.median(peers)):
            slow.append((node, gpu))
    if not slow:
        return None
    node = min(slow, key=lambda found: clock(found[1]))[0]
    rest = [clock(g) for n, g in busy if (n, g) not in slow]
    others = round(statistics.median(rest), 3) if rest else None
    named = ", ".join("%s's GPU %d at %d MHz of %d (%d %%%s)" % (
        n, g["index"], round(g["sm_mhz"]), g["sm_max_mhz"], round(100 * clock(g)),
        "; " + ", ".join(_held(g)) if _held(g) else "") for n, g in slow)
    text = ("%s: %s; %s; every data-parallel step waits for the slowest GPU: check its cooling and power "
            "(nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER); a GPU that stays slow: ask the provider to replace it" % (
                classes.STRAGGLER.name, named, "the job's other busy GPUs at %d %% of their maximum clock (median of %d)" % (round(100 * others), len(rest))
                if others is not None else "its clocks held back"))
    return {"node": node, "gpus": [[n, g["index"], g["sm_mhz"]] for n, g in slow], "others": others, "text": text}


def _gpus_busy(perfs: dict, nodes: list) -> str:
    """"; GPUs busy 23-31 %": the utilization of the nodes' GPUs, where their windows hold it (under 30 %: the GPUs
    wait for their data or the network, the field guides' first sign)."""
    utils = [gpu["util"] for node in nodes for gpu in perfs[node].get("gpus") or [] if gpu.get("util") is not None]
    if not utils:
        return ""
    low, high = round(min(utils)), round(max(utils))
    return "; GPUs busy %s %%" % ("%d-%d" % (low, high) if low != high else low)


def shares(perfs: dict, now: float, attempt: int) -> dict | None:
    """{node: {place: share of its ranks' stack looks}} for the nodes whose stacks were read; None until every node of
    the attempt (perfs' keys) has a current window with at least MIN_LOOKS looks, or none (its stacks not read): the
    first windows of an attempt end apart, and the rendezvous is in them."""
    current = _current(perfs, now, attempt)
    if len(current) < len(perfs):
        return None
    out = {}
    for node, ranks in current.items():
        counts: dict[str, int] = {}
        for rank in ranks:
            for where, count in (rank.get("places") or {}).items():
                counts[where] = counts.get(where, 0) + count
        looks = sum(counts.values())
        if 0 < looks < MIN_LOOKS:
            return None
        if looks:
            out[node] = {where: round(count / float(looks), 3) for where, count in counts.items()}
    return out


def judged(perfs: dict, now: float, attempt: int) -> bool:
    """Whether bottleneck's None means that nothing held the job back: every node of the attempt has a current window
    (not its first) holding enough stack looks (without stacks only the busy shares, which on GPUs say nothing, are
    read), and no node's ranks wait in collectives for another's (bottleneck leaves that to the stall's diagnosis). On
    GPUs, also NCCL's own times on every node (train_collective_timing): a GPU rank spins in CUDA's calls whether it
    computes or waits for NCCL, so its stack reads "compute" either way (every look of every rank on the GPU machine): a
    GPU job of more than one rank is not judged without them."""
    places = shares(perfs, now, attempt)
    if not perfs or places is None or len(places) < len(perfs):
        return False
    waiting = _bound(classes.COMMUNICATION, places, len(perfs))
    if waiting and waiting["node"] is not None:
        return False
    current = _current(perfs, now, attempt)
    # A job on GPU hosts whose GPUs stay idle (Gloo) is judged as a CPU job.
    busy = any(gpu.get("util") for node in current for gpu in perfs[node].get("gpus") or [])
    if busy and sum(len(ranks) for ranks in current.values()) > 1:
        return len(_nccl_shares(perfs, list(current))) == len(current)
    return True


def _bound(kind: classes.PerfClass, places: dict, nodes: int, said: str = "", source: str = "") -> dict | None:
    """The class `kind` where some node's share of its place reaches its bound: that node (the largest share) named, or
    every node where each of the attempt's `nodes` reaches it (`said` goes before the advice; `source`, where the shares
    come from if not the stacks, after the figures)."""
    by_node = {node: figures.get(kind.place, 0.0) for node, figures in places.items()}
    bound = kind.bound if kind.bound is not None else 1.0
    if not by_node or max(by_node.values()) < bound:
        return None
    node = max(by_node, key=lambda n: by_node[n])
    name, doing, advice = kind.name, kind.doing, kind.advice
    every = len(by_node) == nodes > 1 and min(by_node.values()) >= bound
    low, high = round(100 * min(by_node.values())), round(100 * by_node[node])
    share = "%d-%d %%" % (low, high) if every and low != high else "%d %%" % high
    figures = ", ".join("%s %d %%" % (n, round(100 * by_node[n])) for n in sorted(by_node))
    who = "every node's ranks" if every else "%s's ranks" % node
    text = "%s: %s %s %s of the time (%s%s)%s; %s" % (name, who, doing, share, figures, source and "; " + source, said, advice)
    return {"kind": name, "node": None if every else node, "share": by_node[node], "shares": by_node, "text": text}


def _slow_link(queued: dict) -> dict | None:
    """{node, queued, text (what the verdict says of it)} of the node whose ranks' sends queue up against the others' (queued:
    {node: KiB}), or None."""
    if len(queued) < 2:
        return None
    node = max(queued, key=lambda n: queued[n])
    others = statistics.median(v for n, v in queued.items() if n != node)
    if queued[node] < QUEUED_KB or queued[node] < QUEUED_RATIO * others:
        return None
    text = ("; %s's ranks' sends queue up (%d KiB waiting on average, the other nodes' %d KiB): its link out is slower than "
            "its peers' (or its next peer's link in); check its training interface (its speed: ethtool; a rate limit: tc "
            "qdisc show; its switch port)" % (node, round(queued[node]), round(others)))
    return {"node": node, "queued": queued, "text": text}


def _nccl_shares(perfs: dict, nodes: list) -> dict:
    """{node: its ranks' mean share of the time in NCCL's collectives}, for the nodes whose windows hold their flight
    recorders' times (train_collective_timing)."""
    out = {}
    for node in nodes:
        found = [times["share"] for times in (perfs[node].get("collectives") or {}).values() if times.get("share") is not None]
        if found:
            out[node] = round(statistics.mean(found), 3)
    return out


def nccl_busbw(perfs: dict, nodes: list) -> dict | None:
    """The busbw NCCL's collectives reached on these nodes: of the collective and size that took the most time over
    all their ranks, the fastest rank's ({op, bytes, ms, busbw_gbps, node, rank}; the others' calls include their wait
    for it); None without timings."""
    totals: dict[tuple, float] = {}
    best: dict[tuple, dict] = {}
    for node in nodes:
        for rank, times in sorted((perfs[node].get("collectives") or {}).items()):
            for size in times.get("sizes") or []:
                key = (size["op"], size["bytes"])
                totals[key] = totals.get(key, 0.0) + size["total_ms"]
                if size.get("busbw_gbps") is not None and (key not in best or size["busbw_gbps"] > best[key]["busbw_gbps"]):
                    best[key] = dict(size, node=node, rank=int(rank))
    timed = [key for key in totals if key in best]
    return best[max(timed, key=lambda key: totals[key])] if timed else None


def size_text(count: int) -> str:
    """1536 -> "1.5 KiB", 67125248 -> "64 MiB": a collective's size as nccl-tests' users read it."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= scale:
            return "%.3g %s" % (count / float(scale), unit)
    return "%d B" % count


def nccl_text(found: dict | None) -> str:
    """"; NCCL's all_reduce of 64 MiB: 39.9 ms a call, 1.68 GB/s busbw (node1's rank 0, the fastest)", or ""."""
    if not found:
        return ""
    return "; NCCL's %s of %s: %.3g ms a call, %.3g GB/s busbw (%s's rank %d, the fastest)" % (
        found["op"], size_text(found["bytes"]), found["ms"], found["busbw_gbps"], found["node"], found["rank"])


def nccl_straggler(perfs: dict, now: float, attempt: int) -> dict | None:
    """The node the others wait for, from NCCL's own times (train_collective_timing): its ranks spend the least of their
    time in collectives, the other nodes' at least NCCL_WAIT and GAP more; {node, share, others, text}, or None. It
    names a GPU job's straggler, whose ranks' busy shares say nothing (they spin in CUDA's calls)."""
    shares = _nccl_shares(perfs, list(_current(perfs, now, attempt)))
    if len(shares) < 2:
        return None
    node = min(shares, key=lambda n: shares[n])
    others = statistics.median(v for n, v in shares.items() if n != node)
    if others < NCCL_WAIT or others - shares[node] < GAP:
        return None
    text = ("%s: %s's ranks spend %d %% of the time in NCCL's collectives, the other nodes' %d %%: they wait there "
            "for it (each call's time, NCCL's flight recorder); look at what %s does between collectives (its GPUs' clocks, "
            "its data, its CPU)" % (classes.STRAGGLER.name, node, round(100 * shares[node]), round(100 * others), node))
    return {"node": node, "share": shares[node], "others": others, "shares": shares, "text": text}


class _Look(NamedTuple):
    """What bottleneck's judges read: every node's windows, the time and attempt they are judged for, each node's share
    of every place in its ranks' stacks (perf.shares; {} without stacks) and the nodes' current windows (perf._current)."""

    perfs: dict
    now: float
    attempt: int
    places: dict
    current: dict


def _place_everywhere(kind: classes.PerfClass, look: _Look) -> dict | None:
    """A place's class on every node (EVERY): the GPUs' utilization said too."""
    found = _bound(kind, look.places, len(look.perfs))
    if not found or found["node"] is not None:
        return None
    return dict(found, text=found["text"] + _gpus_busy(look.perfs, list(look.current)))


def _place_on_one(kind: classes.PerfClass, look: _Look) -> dict | None:
    """A place's class on one node (ONE; the every-node rules came first): its GPUs idle while it waits, said."""
    found = _bound(kind, look.places, len(look.perfs))
    return dict(found, text=found["text"] + _gpus_busy(look.perfs, list(look.current))) if found else None


def _busy_straggler(kind: classes.PerfClass, look: _Look) -> dict | None:
    """The straggler by the ranks' busy shares (BUSY); where its ranks are mostly in a place (the data loader, a
    checkpoint), said too."""
    lag = straggler(look.perfs, look.now, look.attempt)
    if not lag:
        return None
    where = look.places.get(lag["node"]) or {}
    row = max(classes.PLACES, key=lambda r: where.get(r.place, 0.0))
    if row.bound is not None and where.get(row.place, 0.0) >= row.bound:
        lag["text"] += "; %d %% of its ranks' time is in %s" % (round(100 * where[row.place]), row.in_place)
    return dict(lag, kind=kind.name)


def _gpu_straggler(kind: classes.PerfClass, look: _Look) -> dict | None:
    """A GPU slower than its peers (GPU_CLOCKS)."""
    found = gpu_straggler(look.perfs, look.now, look.attempt)
    return dict(found, kind=kind.name) if found else None


def _nccl_straggler(kind: classes.PerfClass, look: _Look) -> dict | None:
    """The node whose ranks spend the least of their time in NCCL's collectives (NCCL_TIMES)."""
    found = nccl_straggler(look.perfs, look.now, look.attempt)
    return dict(found, kind=kind.name) if found else None


def _network(kind: classes.PerfClass, look: _Look) -> dict | None:
    """Every node's ranks wait in collectives (NETWORK): their stacks, else NCCL's own times, with the node whose link
    is slow where one holds its sends (perf._slow_link), what the training interface carries and the busbw NCCL's
    collectives reached."""
    perfs, current = look.perfs, look.current
    link = _slow_link({n: perfs[n]["queued_kb"] for n in current if perfs[n].get("queued_kb") is not None}) or {}
    # Without the stacks' class, NCCL's own times (every node's ranks in collectives, as the stacks would say it).
    timed = {node: {kind.place: share} for node, share in _nccl_shares(perfs, list(current)).items()}
    bound = (_bound(kind, look.places, len(perfs), link.get("text", ""))
             or _bound(kind, timed, len(perfs), link.get("text", ""), "NCCL's flight recorder"))
    if not bound or bound["node"] is not None:
        # Some nodes' ranks wait in the collective and another's do not: they wait for that node (stopped, or stuck
        # elsewhere: the stall's diagnosis names it), not for the network, which every rank would wait for.
        return None
    if link:
        bound.update(node=link["node"], queued=link["queued"])
    for key, what in (("net", "the training interface carries"), ("rdma", "the RDMA ports carry")):
        nets = {n: perfs[n][key] for n in current if perfs[n].get(key)}
        if nets:
            # What the job gets of the network (status holds it against the ladder's busbw on these nodes).
            bound["text"] += "; %s %s" % (what, ", ".join("%s %.1f MB/s out, %.1f in (%s)" % (
                n, net["tx_mbps"], net["rx_mbps"], net["interface"]) for n, net in sorted(nets.items())))
            bound[key] = nets
    busbw = nccl_busbw(perfs, list(current))
    if busbw:
        bound.update(nccl=busbw, text=bound["text"] + nccl_text(busbw))
    bound["text"] += _gpus_busy(perfs, list(current))
    return bound


# Each rule's scope (_perf_classes.RULES) and the judge of it.
_JUDGES: dict[str, Callable[[classes.PerfClass, _Look], dict | None]] = {
    classes.EVERY: _place_everywhere, classes.ONE: _place_on_one, classes.BUSY: _busy_straggler,
    classes.GPU_CLOCKS: _gpu_straggler, classes.NCCL_TIMES: _nccl_straggler, classes.NETWORK: _network}


def bottleneck(perfs: dict, now: float, attempt: int) -> dict | None:
    """What holds the job back while it runs: {kind, node (None for every node), ..., text}, or None when nothing does or
    nothing could be judged (where stacks are read: not before every node's window holds them, perf.shares). The
    classes' rules (_perf_classes.RULES) are tried in their order, each by the judge of its scope; the first that holds
    is said."""
    places = shares(perfs, now, attempt)
    if places is None and any(rank.get("places") for ranks in _current(perfs, now, attempt).values() for rank in ranks):
        return None  # stacks are read, but not yet in every node's window: judged with them, at the next windows
    look = _Look(perfs, now, attempt, places or {}, _current(perfs, now, attempt))
    for rule in classes.RULES:
        found = _JUDGES[rule.scope](rule.kind, look)
        if found:
            return found
    return None
