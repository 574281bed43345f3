# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Bisect a slow all-nodes rung: which node, or which link between two nodes, makes it slow.

The ladder's pairs rung passed before the all-nodes rung ran, so every node reached its threshold with one peer; what
the all-nodes rung adds is the links between the pairs (NCCL's ring crosses the nodes in rank order) and every node at
once. The bisection replays its own decisions from what has run so far (the pairs, the all-nodes run, its own rounds),
so each round is planned from the verdicts alone:

1. halves: the nodes still suspected split in two in rank order, both halves run at once; a half that fails is
   suspected next (of two that fail, the slower against its threshold). A half of one node crosses no link and is
   not run; a half the ladder ran already (a pair) is not run again.
2. the joins: where neither half fails, the slowness lies across them, so the pairs that join them as the ring
   does (the last of one with the first of the other, both ways round) run.
3. pairs: a failing pair's nodes each run with a node that passed elsewhere; the node that fails with a sound peer
   is named, and where both pass with other peers, the link between the two is.

Every round is one wave of disjoint runs: at most ceil(log2 N) rounds where the halves' runs find the fault, a
round more where a join shares a node with the other (three nodes).
"""

from __future__ import annotations

import math

from ansible_collections.trainops.cluster.plugins.plugin_utils.nccl_tests import ladder

# The rungs whose runs across nodes tell the bisection what passed: the ladder's own and its earlier rounds.
_ACROSS = ("pairs", "all", "bisect")


def _all_run(verdicts: list) -> dict | None:
    runs = next((v.get("runs") for v in verdicts or [] if v.get("rung") == "all"), None)
    return runs[0] if runs else None


def _slow(run: dict | None) -> bool:
    """A run that measured a busbw under its threshold: what a bisection can place. One that timed out after such a
    figure was slow, not stuck (a stuck rank's run measures its sizes at full speed until it stops, or nothing); a
    crash measures nothing."""
    return bool(run and run.get("busbw_gbps") is not None and run.get("threshold_gbps") and run["busbw_gbps"] < run["threshold_gbps"])


def rounds(nodes: list, verdicts: list) -> int:
    """How many rounds to allow: 0 unless the all-nodes run of 3 nodes or more was slow (_slow), else
    ceil(log2 N) + 1 (the bound; the walk ends sooner)."""
    if len(nodes) < 3 or not _slow(_all_run(verdicts)):
        return 0
    return int(math.ceil(math.log(len(nodes), 2))) + 1


def _known(verdicts: list) -> dict:
    """{frozenset of hosts: the run's entry} of every judged run across nodes so far, the latest of each set."""
    known = {}
    for verdict in verdicts or []:
        if verdict.get("rung") not in _ACROSS:
            continue
        for run in verdict.get("runs") or []:
            if len(run.get("hosts") or []) > 1 and run.get("passed") is not None:
                known[frozenset(run["hosts"])] = run
    return known


def _share(run: dict) -> float:
    return run["busbw_gbps"] / run["threshold_gbps"] if _slow(run) else 1.0


def _pair_needs(pair: list, known: dict, nodes: list) -> tuple:
    """-> (runs still needed: each node of a failing pair with a node that passed elsewhere, {node: the runs that tell
    of it, [] where no sound node was free}) for a failing pair."""
    sound = [h for hosts, run in known.items() if run["passed"] for h in hosts]
    needs: list[list[str]] = []
    found: dict[str, list] = {}
    for node in pair:
        # A run without the pair's other node: one that passed clears this node, a pair that failed with a sound
        # peer accuses it (a larger run that failed accuses nobody in particular).
        tried = [(hosts, run) for hosts, run in known.items() if node in hosts and not hosts & set(pair) - {node}
                 and (run["passed"] or len(hosts) == 2 and any(h in sound for h in hosts - {node}))]
        if tried:
            found[node] = tried
            continue
        refs = [h for h in nodes if h in sound and h not in pair and all(h not in need for need in needs)]
        if refs:
            needs.append([node, refs[0]] if nodes.index(node) < nodes.index(refs[0]) else [refs[0], node])
        else:
            found[node] = []
    return needs, found


def _walk(nodes: list, known: dict) -> tuple:
    """Replay the bisection over what ran: -> ("run", [host lists]) for the next round, or ("found", what it found)."""
    suspects, notes = list(nodes), []
    while len(suspects) > 2:
        half = (len(suspects) + 1) // 2
        a, b = suspects[:half], suspects[half:]
        runnable = [h for h in (a, b) if len(h) > 1]
        missing = [h for h in runnable if frozenset(h) not in known]
        if missing:
            return "run", missing
        failed = [h for h in runnable if not known[frozenset(h)]["passed"]]
        if len(failed) == 2:
            notes.append("both halves failed (%s; %s): followed the slower" % tuple(_run_text(known[frozenset(h)]) for h in failed))
        if failed:
            suspects = min(failed, key=lambda h: _share(known[frozenset(h)]))
            continue
        # Two distinct pairs (a has 2 nodes or more); with a half of one node they share it, and run in two waves.
        joins = [[a[-1], b[0]], [b[-1], a[0]]]
        missing = [j for j in joins if frozenset(j) not in known]
        if missing:
            return "run", _disjoint(missing)
        failing = [j for j in joins if not known[frozenset(j)]["passed"]]
        if not failing:
            return "found", {"kind": "whole", "halves": [a, b], "joins": joins, "notes": notes}
        suspects = min(failing, key=lambda j: _share(known[frozenset(j)]))
        suspects = sorted(suspects, key=nodes.index)
    # Here a pair that ran and failed: a half of two, or a join (rounds() starts the walk from 3 nodes or more).
    pair = suspects
    needs, found = _pair_needs(pair, known, nodes)
    if needs:
        return "run", _disjoint(needs)
    return "found", {"kind": "pair", "pair": pair, "with": found, "notes": notes}


def _disjoint(runs: list) -> list:
    """The runs of one wave: none shares a node with one before it (the rest wait for the next round)."""
    wave: list = []
    used: set[str] = set()
    for hosts in runs:
        if not used & set(hosts):
            wave.append(hosts)
            used |= set(hosts)
    return wave


def next_round(nodes: list, verdicts: list, gpus: dict, settings: dict, number: int) -> dict:
    """The bisection's round `number` (from 1) as a ladder step (rung "bisect"), planned from the verdicts so far;
    a step with no runs once the walk has found what it can (skipped says so)."""
    nodes = list(nodes)
    what, found = _walk(nodes, _known(verdicts))
    if what != "run":
        return dict(ladder._skip("bisect", "the bisection has its answer"), wave=number)
    return ladder._step("bisect", [ladder._run(sorted(hosts, key=nodes.index), gpus, settings, "bisect") for hosts in found], number)


def _run_text(run: dict) -> str:
    if run.get("busbw_gbps") is None:
        return "%s: %s" % ("+".join(run["hosts"]), "; ".join(run.get("reasons") or ["failed"]))
    threshold = " (threshold %.3g)" % run["threshold_gbps"] if run.get("threshold_gbps") else ""
    return "%s %.3g GB/s%s" % ("+".join(run["hosts"]), run["busbw_gbps"], threshold)


def _pair_text(found: dict, known: dict) -> tuple:
    pair = found["pair"]
    slow = _run_text(known[frozenset(pair)])
    fails = {node: [run for _hosts, run in tried if not run["passed"]] for node, tried in found["with"].items()}
    passes = {node: [run for _hosts, run in tried if run["passed"]] for node, tried in found["with"].items()}
    bad = [node for node in pair if fails.get(node) and not passes.get(node)]
    if len(bad) == 1:
        node = bad[0]
        return [node], "%s is slow with every peer: %s; %s: its network (NIC, cable, switch port or its settings)" % (
            node, slow, "; ".join(_run_text(run) for run in fails[node]))
    if len(bad) == 2:
        return list(pair), "%s and %s are each slow with other peers too: %s; %s" % (
            pair[0], pair[1], slow, "; ".join(_run_text(run) for node in pair for run in fails[node]))
    untried = [node for node in pair if not found["with"].get(node)]
    if untried:
        return list(pair), "the pair %s: no node that passed elsewhere was free to tell which of the two it is" % slow
    return list(pair), "the link between %s and %s: %s, while %s pass: a cable, switch port or route between the two" % (
        pair[0], pair[1], slow, "; ".join(_run_text(run) for node in pair for run in passes[node][:1]))


def found_verdict(nodes: list, verdicts: list) -> dict:
    """What the bisection found, as a verdict after its rounds (rung "bisect"): one entry naming the node or the pair
    of nodes (a link) in `hosts`, in words in `reasons`; passed False, as the all-nodes rung it explains."""
    nodes = list(nodes)
    known = _known(verdicts)
    what, found = _walk(nodes, known)
    rounds_run = len([v for v in verdicts if v.get("rung") == "bisect" and v.get("runs")])
    notes = []
    if what == "run":
        hosts, text = list(nodes), "not found within %d rounds (the next would run %s)" % (rounds_run, ", ".join("+".join(h) for h in found))
    elif found["kind"] == "pair":
        notes = found["notes"]
        hosts, text = _pair_text(found, known)
    else:
        notes = found["notes"]
        halves = " and ".join("+".join(h) for h in found["halves"])
        joins = "; ".join(_run_text(known[frozenset(j)]) for j in found["joins"])
        hosts, text = list(nodes), "no one node or link: %s pass apart%s, and all %d nodes together are slow: the fabric's capacity " \
            "(an oversubscribed switch) or a setting every node shares" % (halves, ", so do the pairs joining them (%s)" % joins if joins else "", len(nodes))
    reason = "bisected in %d round%s: %s" % (rounds_run, "" if rounds_run == 1 else "s", "; ".join(notes + [text]))
    run = ladder._check_run(hosts, [reason], False)
    return {"rung": "bisect", "label": ladder.LABELS["bisect"] + ": found", "wave": None, "skipped": None, "passed": False,
            "verdict": "FAIL", "runs": [run]}
