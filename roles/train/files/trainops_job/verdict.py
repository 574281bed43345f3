# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A stall's verdict across nodes, from every node's diagnosis: which ranks wait where, and which rank or node the
others wait for (stopped, exited, missing, cut off, silent, or elsewhere than the rest). A rank inside a collective that
a stopped, exited or missing rank belongs to waits too: it is listed where it waits, not blamed."""

from __future__ import annotations

from typing import Any, Iterable

# Seconds every node has to answer a stall with its diagnosis (the supervisor waits that long).
DIAGNOSIS_WAIT = 30
# Where a rank waits, named by the innermost frame in these modules (the collective called, or DDP's backward). DDP's
# own module holds its forward too, which computes: perf counts a frame there as a wait only while the rank sleeps.
COLLECTIVE_FILES = ("torch/distributed/", "deepspeed/comm/")
DDP_FILE = "torch/nn/parallel/distributed.py"
BACKWARD_FILES = ("torch/autograd/", "torch/_tensor.py")
_WAIT_FILES = COLLECTIVE_FILES + (DDP_FILE,)
_UNKNOWN = "an unknown place"


def _ranges(numbers: Iterable[int]) -> str:
    """[0, 1, 2, 4, 5] -> "0-2, 4-5"."""
    out: list[list[int]] = []
    for number in sorted(numbers):
        if out and number == out[-1][1] + 1:
            out[-1][1] = number
        else:
            out.append([number, number])
    return ", ".join(str(a) if a == b else "%d-%d" % (a, b) for a, b in out)


def frames_of(stack: list | None) -> list:
    """The main thread's frames, innermost first, from py-spy's JSON dump (a list of threads)."""
    threads = stack or []
    main = next((t for t in threads if t.get("thread_name") == "MainThread"), threads[0] if threads else None)
    return (main or {}).get("frames") or []


def where(stack: list | None) -> str | None:
    """Where a rank's main thread is, from py-spy's JSON (a list of threads, innermost frame first): the collective
    it waits in, DDP's backward (whose gradient all-reduce Gloo and NCCL run under it), else its innermost frame."""
    frames = frames_of(stack)
    if not frames:
        return None
    for frame in frames:
        name: str = frame.get("name", "?")
        filename: str = frame.get("filename", "")
        if any(part in filename for part in _WAIT_FILES) and not name.startswith("_"):
            return name
    for frame in frames:
        if any(part in frame.get("filename", "") for part in BACKWARD_FILES) and frame.get("name") == "backward":
            return "backward (DDP's gradient all-reduce)"
    inner = frames[0]
    return "%s (%s:%s)" % (inner.get("name", "?"), inner.get("short_filename") or inner.get("filename", "?"), inner.get("line", "?"))


def _collective(proc: dict) -> dict | None:
    return ((proc.get("flight_recorder") or {}).get("collective")) or None


def _open(proc: dict) -> dict | None:
    found = _collective(proc)
    return found if found and found["state"] != "completed" else None


def communicating(proc: dict) -> bool:
    """Whether a rank is inside a collective: an NCCL one its flight recorder holds open, or a frame of one."""
    return bool(_open(proc)) or any(any(part in f.get("filename", "") for part in _WAIT_FILES + BACKWARD_FILES)
                                    for f in frames_of(proc.get("stack")))


def place(proc: dict) -> str:
    """Where a rank waits: the oldest NCCL collective its flight recorder holds open, else where its Python stack is,
    else what the kernel shows of it. NCCL's collectives run on the GPU's stream, so the Python line that waits is any
    later one that needs the GPU (a .item(), a copy): ranks waiting in one all_reduce show different lines."""
    found = _open(proc)
    if found:
        return "NCCL %s #%s" % (found["op"], found["seq"])
    seen = where(proc.get("stack"))
    if seen:
        return seen
    kernel = proc.get("kernel") or {}
    shown = " ".join(part for part in (kernel.get("syscall"), kernel.get("wchan") and "(%s)" % kernel["wchan"]) if part)
    return "%s (no stack: %s%s)" % (_UNKNOWN, proc.get("stack_error") or "?", "; the kernel shows it in " + shown if shown else "")


def _open_since(procs: list) -> str:
    """ " (enqueued 17 s ago, not completed)" for ranks waiting in an NCCL collective, the longest wait; else ""."""
    ages = [c["age_seconds"] for c in map(_open, procs) if c and c.get("age_seconds") is not None]
    return " (enqueued %d s ago, not completed)" % max(ages) if ages else ""


def behind(ranks: dict) -> dict:
    """{rank: why} for ranks whose flight recorder shows them short of the NCCL collective that others of the same
    process group wait in: they started #N, this one's newest is before it (a rank stuck outside any collective)."""
    open_seq: dict[Any, int] = {}
    for proc in ranks.values():
        found = _open(proc)
        if found and found["seq"] is not None:
            open_seq[found["group"]] = max(open_seq.get(found["group"], found["seq"]), found["seq"])
    out = {}
    for rank, proc in ranks.items():
        found = _collective(proc)
        if found and found["seq"] is not None and found["seq"] < open_seq.get(found["group"], found["seq"]):
            out[rank] = "its newest NCCL collective is %s #%s (%s), the others wait in #%s" % (
                found["op"], found["seq"], found["state"], open_seq[found["group"]])
    return out


def cut_off(diagnoses: dict, nodes: list) -> list:
    """Nodes that no answering peer reaches on the training network (a node's link gone): [{rank: None, node, why}]."""
    answered = {n: d for n, d in diagnoses.items() if d is not None}
    out = []
    for node in nodes:
        others = [n for n in answered if n != node]
        missed = [n for n in others if node in (answered[n].get("unreached") or {})]
        if others and len(missed) == len(others):
            why = (answered[missed[0]].get("unreached") or {})[node]
            out.append({"rank": None, "node": node, "why": "is cut off from the training network (%s cannot reach it: %s)"
                        % (", ".join(missed), why)})
    return out


def _unreadable(diagnoses: dict, ranks: dict) -> str | None:
    """Where stacks could not be read for want of ptrace, what to grant there."""
    nodes = sorted({p["node"] for p in ranks.values() if p.get("stack") is None and (diagnoses[p["node"]].get("access") or {}).get("grant")})
    if not nodes:
        return None
    return "stacks unreadable on %s: %s" % (", ".join(nodes), diagnoses[nodes[0]]["access"]["grant"])


def verdict(step: int | None, diagnoses: dict, nodes: list) -> dict:
    """The stall's verdict across nodes.

    diagnoses: {node: that node's diagnosis, or None when it did not answer}. Returns {text, culprits: [{rank, node,
    why}], waiting: {where: [rank]}, silent: [node]}.
    """
    ranks: dict[int, dict] = {}
    silent, world = [n for n in nodes if diagnoses.get(n) is None], 0
    for node in nodes:
        for proc in (diagnoses.get(node) or {}).get("processes", []):
            if proc.get("rank") is not None:
                ranks[proc["rank"]] = dict(proc, node=node)
                world = max(world, proc.get("world_size") or 0)
    waiting: dict[str, list[int]] = {}
    culprits = cut_off(diagnoses, nodes)
    for rank, proc in sorted(ranks.items()):
        if proc.get("state", "").startswith(("T", "t")):
            culprits.append({"rank": rank, "node": proc["node"], "why": "is stopped"})
        elif proc.get("state", "").startswith(("Z", "X")):
            culprits.append({"rank": rank, "node": proc["node"], "why": "has exited"})
        else:
            waiting.setdefault(place(proc), []).append(rank)
    missing = [r for r in range(world) if r not in ranks]
    # A rank that cannot take part holds every collective of its group open: the others wait, wherever each is.
    held = bool(culprits or silent or missing)
    # The place most ranks are in is where the healthy ones wait; a rank anywhere else is the odd one out.
    common = max(waiting, key=lambda w: (len(waiting[w]), not w.startswith(_UNKNOWN)), default=None)
    late = behind(ranks)
    # Nor is a rank whose place is unknown (no stack: ptrace denied there) named for being elsewhere.
    for other in [w for w in waiting if w != common and not w.startswith(_UNKNOWN)
                  and not (held and all(communicating(ranks[r]) for r in waiting[w]))]:
        for rank in waiting.pop(other):
            why = "is elsewhere: in %s" % other
            culprits.append({"rank": rank, "node": ranks[rank]["node"], "why": why + "; " + late[rank] if rank in late else why})
    for node in silent:
        culprits.append({"rank": None, "node": node, "why": "stopped answering (no diagnosis within %d s)" % DIAGNOSIS_WAIT})
    if missing and not silent:
        culprits.append({"rank": None, "node": None, "why": "rank %s has no process on any node" % _ranges(missing)})
    parts = []
    for culprit in culprits:
        who = ("rank %d (%s)" % (culprit["rank"], culprit["node"])) if culprit["rank"] is not None else culprit["node"] or ""
        parts.append(("%s %s" % (who, culprit["why"])).strip())
    for at, members in sorted(waiting.items(), key=lambda item: min(item[1])):
        parts.append("%s %s wait%s in %s%s" % ("ranks" if len(members) > 1 else "rank", _ranges(members), "" if len(members) > 1 else "s",
                                               at, _open_since([ranks[r] for r in members])))
    if not culprits:
        parts.append("no odd one out: every rank waits in the same place" if ranks else "no rank of the job was found on any node")
    advice = _unreadable({n: d for n, d in diagnoses.items() if d}, ranks)
    text = "stalled at step %s: %s%s" % (step, "; ".join(parts), " (%s)" % advice if advice else "")
    return {"text": text, "culprits": culprits, "waiting": waiting, "silent": silent}
