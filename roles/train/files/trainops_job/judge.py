# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What holds a running job back, judged by the supervisor from every node's windows (perf.Sampler writes them): the
straggler (the ranks' busy shares, the GPUs' clocks, NCCL's own times), the classes of the ranks' stacks tried in the
table's order (_perf_classes.RULES), and whether the windows could be judged at all. perf.py samples; this judges."""

from __future__ import annotations

import statistics
from typing import Callable, NamedTuple

from . import _perf_classes as classes
from ._gpu_load import HW_REASONS, SW_REASONS
from .perf import WINDOW

# A straggler: its ranks busy at least BUSY of the time, the other nodes' (their median) at least GAP less.
BUSY = 0.75
GAP = 0.3
# A window of fewer stack looks than MIN_LOOKS is not judged (a class is named at its row's bound).
MIN_LOOKS = 4
# A communication-bound job's slow link: the node whose ranks' sends wait in their sockets, at least classes.QUEUED_KB
# on average and QUEUED_RATIO times the other nodes' (their median). In a ring all-reduce every node sends as much; the
# node whose link out is slow holds its bytes (molecule train: 3-4 MiB behind a 40 Mbit/s tbf, the others' near 0).
QUEUED_RATIO = 4
# A GPU straggler: a busy GPU (utilization at least GPU_BUSY %, idle in under half the looks) whose SM clock, as a share
# of its maximum, is GPU_CLOCK_GAP below the median of the job's other busy GPUs, or whose clocks the hardware holds back
# (HW_REASONS) in at least half the looks: every data-parallel step waits for the slowest GPU. A power cap holds every
# GPU of a busy job alike (the H100 at 1335-1361 of 1980 MHz, the H200's burn-in 1425-1500, "SW Power Cap"), so the
# clocks are compared with the peers', not with their maximum.
GPU_BUSY = 50
GPU_CLOCK_GAP = 0.15
_REASON_TEXT = dict(HW_REASONS, **SW_REASONS)
# A straggler from NCCL's own times: the node whose ranks spend the least of their time in collectives while the other
# nodes' (their median) spend at least NCCL_WAIT and GAP more: a collective's time on a rank includes its wait for the
# last rank to arrive, so the ranks the others wait for show the shortest.
NCCL_WAIT = 0.4


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


def _gpu_utils(perfs: dict, nodes: list) -> list:
    """The utilization of the nodes' GPUs over their windows, where the windows hold it."""
    return [gpu["util"] for node in nodes for gpu in perfs[node].get("gpus") or [] if gpu.get("util") is not None]


def _gpus_busy(perfs: dict, nodes: list) -> str:
    """"; GPUs busy 23-31 %": the utilization of the nodes' GPUs, where their windows hold it (under 30 %: the GPUs
    wait for their data or the network, the field guides' first sign)."""
    utils = _gpu_utils(perfs, nodes)
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
    if queued[node] < classes.QUEUED_KB or queued[node] < QUEUED_RATIO * others:
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
    of every place in its ranks' stacks (shares(); {} without stacks) and the nodes' current windows (_current())."""

    perfs: dict
    now: float
    attempt: int
    places: dict
    current: dict


def _gpus_in_use(perfs: dict, nodes: list) -> bool:
    """Whether the nodes' GPUs are busy (their median utilization over the window at least GPU_BUSY)."""
    utils = _gpu_utils(perfs, nodes)
    return bool(utils) and statistics.median(utils) >= GPU_BUSY


def waited_in(current: dict, nodes: list) -> dict | None:
    """The frame the nodes' ranks waited in most outside every known place (perf.own_frame, counted in each window's
    waits): {frame ("train.py:get_batch:42"), looks (of it), of (every such look), text}, or None."""
    counts: dict[str, int] = {}
    for node in nodes:
        for rank in current.get(node) or []:
            for frame, count in (rank.get("waits") or {}).items():
                counts[frame] = counts.get(frame, 0) + count
    if not counts:
        return None
    frame = max(sorted(counts), key=lambda f: counts[f])
    where, line = frame.rsplit(":", 1)
    text = "; they wait in %s (line %s: %d of %d such looks)" % (where, line, counts[frame], sum(counts.values()))
    return {"frame": frame, "looks": counts[frame], "of": sum(counts.values()), "text": text}


def _said(kind: classes.PerfClass, look: _Look, found: dict) -> dict | None:
    """A place's class as said: the frame the ranks wait in for a wait outside the known places (before the advice,
    _bound's `said`), the GPUs' use. A wait outside the known places on nodes whose GPUs are busy is no class: a rank
    blocked on its own kernels (CUDA's blocking synchronization) sleeps under the job's code as one waiting for its
    data would."""
    if kind.place == classes.ELSEWHERE.place:
        named = list(look.current) if found["node"] is None else [found["node"]]
        if _gpus_in_use(look.perfs, named):
            return None
        frame = waited_in(look.current, named)
        if frame:
            found = dict(_bound(kind, look.places, len(look.perfs), frame["text"]) or found, frame=frame["frame"])
    return dict(found, text=found["text"] + _gpus_busy(look.perfs, list(look.current)))


def _place_everywhere(kind: classes.PerfClass, look: _Look) -> dict | None:
    """A place's class on every node (EVERY): the GPUs' utilization said too."""
    found = _bound(kind, look.places, len(look.perfs))
    if not found or found["node"] is not None:
        return None
    return _said(kind, look, found)


def _place_on_one(kind: classes.PerfClass, look: _Look) -> dict | None:
    """A place's class on one node (ONE; the every-node rules came first): its GPUs idle while it waits, said. A wait
    in the job's own code is one node's only where that node stands out (GAP over the others' median): every rank of
    a job that sleeps between steps has some, and one node a little above the rest is no node the others wait for
    (CI at 671d518: node1 60 %, node2 50 %, node3 30 % after a stall, named node1)."""
    found = _bound(kind, look.places, len(look.perfs))
    if found and kind.place == classes.ELSEWHERE.place:
        others = [share for node, share in found["shares"].items() if node != found["node"]]
        if others and found["share"] - statistics.median(others) < GAP:
            return None
    return _said(kind, look, found) if found else None


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
    is slow where one holds its sends (_slow_link), what the training interface carries and the busbw NCCL's
    collectives reached."""
    perfs, current = look.perfs, look.current
    queued = {n: perfs[n]["queued_kb"] for n in current if perfs[n].get("queued_kb") is not None}
    link = _slow_link(queued) or {}
    # Without the stacks' class, NCCL's own times (every node's ranks in collectives, as the stacks would say it).
    timed = {node: {kind.place: share} for node, share in _nccl_shares(perfs, list(current)).items()}
    bound = (_bound(kind, look.places, len(perfs), link.get("text", ""))
             or _bound(kind, timed, len(perfs), link.get("text", ""), "NCCL's flight recorder"))
    if not bound or bound["node"] is not None:
        # Some nodes' ranks wait in the collective and another's do not: they wait for that node (stopped, or stuck
        # elsewhere: the stall's diagnosis names it), not for the network, which every rank would wait for.
        return None
    if link:
        bound.update(node=link["node"])
    if queued:
        # Every node's, slow link or not: bytes that wait to be sent are what tells a network that holds the job back
        # from ranks that wait on each other (status: job_bandwidth.against_ladder).
        bound["queued"] = queued
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
    nothing could be judged (where stacks are read: not before every node's window holds them, shares()). The
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
