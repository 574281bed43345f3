# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The bisection of a slow all-nodes rung on fake figures: a network whose ring all-reduce runs at its slowest link.

The ladder's plan gives the pairs and the all-nodes run; each run's busbw is the slowest link of its ring (the nodes
in rank order, the last back to the first), as NCCL's ring all-reduce over sockets or IB is.
"""
import json
import math
from pathlib import Path

import pytest

from ansible_collections.trainops.cluster.plugins.plugin_utils.nccl_tests import bisect, ladder

SETTINGS = {
    "all_reduce_perf": "/opt/nccl-tests/build/all_reduce_perf", "mpirun": "mpirun", "env_wrapper": "trainops-env",
    "min_bytes": 8, "max_bytes": "8G", "gpu_max_bytes": "128M", "iters": 20, "warmup": 5, "json_dir": None, "mca": {},
}
FAST, SLOW, THRESHOLD = 40.0, 9.0, 30.0


class Network:
    """Link speeds between nodes (GB/s busbw a ring over them reaches): FAST unless named slow, with every node at once
    slowed to `together` where given (an oversubscribed switch)."""

    def __init__(self, nodes, slow_links=(), slow_nodes=(), together=None):
        self.nodes, self.together = nodes, together
        self.slow = {frozenset(link) for link in slow_links}
        self.slow_nodes = set(slow_nodes)

    def link(self, a, b):
        return SLOW if frozenset((a, b)) in self.slow or {a, b} & self.slow_nodes else FAST

    def busbw(self, hosts):
        ring = list(hosts) + [hosts[0]]
        speed = min(self.link(a, b) for a, b in zip(ring, ring[1:]) if a != b)
        if self.together is not None and len(hosts) == len(self.nodes):
            speed = min(speed, self.together)
        return speed

    def verdict(self, step):
        """A judged step as judge_step returns it, figures from the network."""
        runs = []
        for run in step["runs"]:
            busbw = self.busbw(run["hosts"])
            passed = busbw >= THRESHOLD
            runs.append({"leader": run["leader"], "hosts": run["hosts"], "ranks": run["ranks"], "busbw_gbps": busbw,
                         "threshold_gbps": THRESHOLD, "passed": passed, "timed_out": False, "verdict": "PASS" if passed else "FAIL",
                         "reasons": [] if passed else ["busbw %.3g GB/s below %.3g GB/s" % (busbw, THRESHOLD)]})
        passed = all(run["passed"] for run in runs)
        return {"rung": step["rung"], "label": step["label"], "wave": step["wave"], "skipped": None, "passed": passed,
                "verdict": "PASS" if passed else "FAIL", "runs": runs}


def climb(network):
    """The ladder's pairs and all-nodes steps, stopping at the first that fails, then the bisection's rounds:
    -> (verdicts, the rounds' host lists, what was found)."""
    nodes = network.nodes
    gpus = dict.fromkeys(nodes, 8)
    verdicts = []
    for step in ladder.plan(nodes, gpus, SETTINGS):
        if step["rung"] not in ("pairs", "all") or step["skipped"]:
            continue
        verdicts.append(network.verdict(step))
        if not verdicts[-1]["passed"]:
            break
    rounds = []
    for number in range(1, bisect.rounds(nodes, verdicts) + 1):
        step = bisect.next_round(nodes, verdicts, gpus, SETTINGS, number)
        if not step["runs"]:
            assert step["skipped"]
            break
        hosts = [run["hosts"] for run in step["runs"]]
        flat = [h for run in hosts for h in run]
        assert len(flat) == len(set(flat)), "a round's runs share a node: %s" % hosts
        assert step["label"] == "all nodes, bisected (round %d)" % number
        rounds.append(hosts)
        verdicts.append(network.verdict(step))
    return verdicts, rounds, bisect.found_verdict(nodes, verdicts)


def names(count):
    return ["n%d" % i for i in range(1, count + 1)]


def test_four_nodes_a_slow_link_between_the_pairs():
    verdicts, rounds, found = climb(Network(names(4), slow_links=[("n2", "n3")]))
    assert [v["rung"] for v in verdicts] == ["pairs", "all", "bisect"]
    # The halves are the pairs that passed: only the joins run, at once.
    assert rounds == [[["n2", "n3"], ["n1", "n4"]]]
    run = found["runs"][0]
    assert (found["rung"], found["passed"], run["hosts"]) == ("bisect", False, ["n2", "n3"])
    assert run["reasons"] == ["bisected in 1 round: the link between n2 and n3: n2+n3 9 GB/s (threshold 30), while n1+n2 40 GB/s "
                              "(threshold 30); n3+n4 40 GB/s (threshold 30) pass: a cable, switch port or route between the two"]


@pytest.mark.parametrize("count", range(3, 17))
def test_every_ring_link_found_within_the_bound(count):
    """Each link the pairs rung does not cross, slowed alone, is named (both its nodes and no other) in at most
    ceil(log2 N) rounds (a round more with three nodes, whose joins share a node)."""
    nodes = names(count)
    ring = list(zip(nodes, nodes[1:] + nodes[:1]))
    paired = {frozenset(pair) for wave in ladder.pair_waves(nodes) for pair in wave}
    for link in ring:
        if frozenset(link) in paired:
            continue
        verdicts, rounds, found = climb(Network(nodes, slow_links=[link]))
        assert verdicts[-1]["rung"] == "bisect", link
        assert sorted(found["runs"][0]["hosts"]) == sorted(link), (link, found["runs"][0]["reasons"])
        assert "the link between" in found["runs"][0]["reasons"][0]
        assert len(rounds) <= max(1, math.ceil(math.log2(count))), (link, rounds)


def test_a_link_slowed_inside_a_half_is_followed_down():
    verdicts, rounds, found = climb(Network(names(8), slow_links=[("n6", "n7")]))
    # n5..n8 fails, then its joins (its halves were the pairs).
    assert rounds == [[["n1", "n2", "n3", "n4"], ["n5", "n6", "n7", "n8"]], [["n6", "n7"], ["n5", "n8"]]]
    assert found["runs"][0]["hosts"] == ["n6", "n7"]


def test_slow_only_all_together():
    verdicts, rounds, found = climb(Network(names(8), together=12.0))
    assert rounds == [[["n1", "n2", "n3", "n4"], ["n5", "n6", "n7", "n8"]], [["n4", "n5"], ["n1", "n8"]]]
    run = found["runs"][0]
    assert run["hosts"] == names(8)
    assert run["reasons"][0].startswith("bisected in 2 rounds: no one node or link: n1+n2+n3+n4 and n5+n6+n7+n8 pass apart, so do "
                                        "the pairs joining them (n4+n5 40 GB/s")
    assert "all 8 nodes together are slow" in run["reasons"][0]


def _run(hosts, busbw):
    return {"hosts": hosts, "busbw_gbps": busbw, "threshold_gbps": THRESHOLD, "passed": busbw >= THRESHOLD, "timed_out": False,
            "reasons": []}


def _step(rung, *runs):
    return {"rung": rung, "label": rung, "wave": None, "skipped": None, "passed": all(r["passed"] for r in runs), "runs": list(runs)}


def test_a_node_slow_with_a_sound_peer_is_named():
    # n2 passed with n1 in the pairs (one switch), fails with n3 and with n4, which pass with others.
    verdicts = [_step("pairs", _run(["n1", "n2"], 40.0), _run(["n3", "n4"], 40.0)), _step("all", _run(names(4), 9.0)),
                _step("bisect", _run(["n2", "n3"], 9.0), _run(["n1", "n4"], 40.0))]
    # The pair phase: n2's only clearing run is with n1; so the link it is, unless a pair with a sound peer fails too.
    assert bisect.found_verdict(names(4), verdicts)["runs"][0]["reasons"][0].startswith("bisected in 1 round: the link between n2 and n3")
    verdicts = [_step("pairs", _run(["n2", "n4"], 9.0)), _step("all", _run(names(4), 9.0)), _step("bisect", _run(["n1", "n2"], 9.0))]
    verdicts[0]["runs"].append(_run(["n1", "n3"], 40.0))
    verdicts.append(_step("bisect", _run(["n3", "n4"], 40.0)))
    found = bisect.found_verdict(names(4), verdicts)["runs"][0]
    assert found["hosts"] == ["n2"]
    assert found["reasons"][0] == ("bisected in 2 rounds: n2 is slow with every peer: n1+n2 9 GB/s (threshold 30); n2+n4 9 GB/s (threshold 30): "
                                   "its network (NIC, cable, switch port or its settings)")


def test_rounds_only_for_a_slow_all_nodes_run():
    slow = [_step("pairs", _run(["n1", "n2"], 40.0)), _step("all", _run(names(3), 9.0))]
    assert bisect.rounds(names(3), slow) == 3
    assert bisect.rounds(names(16), [_step("all", _run(names(16), 9.0))]) == 5
    # Two nodes: the all-nodes run is the pair; nothing to split.
    assert bisect.rounds(names(2), [_step("all", _run(names(2), 9.0))]) == 0
    assert bisect.rounds(names(3), [_step("all", _run(names(3), 40.0))]) == 0
    # A hang or a crash is named by its own reasons, not placed by bandwidth: a stuck rank's run measured its sizes at
    # full speed until it stopped, or nothing.
    for busbw in (40.0, None):
        hung = dict(_run(names(3), 40.0), busbw_gbps=busbw, timed_out=True, passed=False)
        assert bisect.rounds(names(3), [_step("all", hung)]) == 0
    # A run so slow that it timed out at its limit after a figure below its threshold was slow, not stuck.
    assert bisect.rounds(names(3), [_step("all", dict(_run(names(3), 0.1), timed_out=True))]) == 3
    crashed = dict(_run(names(3), 9.0), busbw_gbps=None, passed=False)
    assert bisect.rounds(names(3), [_step("all", crashed)]) == 0
    assert bisect.rounds(names(3), [_step("all", dict(_run(names(3), 9.0), threshold_gbps=None))]) == 0
    assert bisect.rounds(names(3), []) == 0


def test_a_round_runs_the_ladders_command_line():
    nodes = names(4)
    verdicts = [_step("pairs", _run(["n1", "n2"], 40.0), _run(["n3", "n4"], 40.0)), _step("all", _run(nodes, 9.0))]
    step = bisect.next_round(nodes, verdicts, dict.fromkeys(nodes, 8), SETTINGS, 1)
    assert (step["rung"], step["wave"], step["skipped"]) == ("bisect", 1, None)
    run = step["runs"][0]
    assert (run["leader"], run["hosts"], run["ranks"], run["kind"]) == ("n2", ["n2", "n3"], 16, "nccl_tests")
    assert run["argv"][:7] == ["mpirun", "--tag-output", "--bind-to", "none", "-np", "16", "-H"]
    assert run["argv"][7] == "n2:8,n3:8"
    # Once found, the next round has nothing to run and says so.
    verdicts.append(_step("bisect", _run(["n2", "n3"], 9.0), _run(["n1", "n4"], 40.0)))
    done = bisect.next_round(nodes, verdicts, dict.fromkeys(nodes, 8), SETTINGS, 2)
    assert (done["runs"], done["skipped"], done["wave"]) == ([], "the bisection has its answer", 2)


def test_the_rounds_verdicts_show_in_the_report_table():
    nodes = names(4)
    _verdicts, _rounds, found = climb(Network(nodes, slow_links=[("n2", "n3")]))
    rows = ladder.report_rows([found])
    assert rows[0][:2] == ["all nodes, bisected: found", "n2,n3"]
    assert rows[0][7] == "FAIL"


RECORDED = Path(__file__).parents[4] / "fixtures" / "gpu" / "h100x1-nodes-bisect" / "verify.json"


def test_the_gpu_machines_slowed_link():
    """verify.yml on four namespace nodes of one H100 with the gpu2-gpu3 link held to 2 Gbit/s: replayed from the
    recorded verdicts, the same round is planned and the same link named as there."""
    recorded = json.loads(RECORDED.read_text())
    nodes = ["gpu1", "gpu2", "gpu3", "gpu4"]
    ladder_only = [v for v in recorded if v["rung"] != "bisect"]
    assert bisect.rounds(nodes, ladder_only) == 3
    step = bisect.next_round(nodes, ladder_only, dict.fromkeys(nodes, 1), SETTINGS, 1)
    assert [run["hosts"] for run in step["runs"]] == [["gpu2", "gpu3"], ["gpu1", "gpu4"]]
    with_round = [v for v in recorded if v["label"] != "all nodes, bisected: found"]
    assert bisect.next_round(nodes, with_round, dict.fromkeys(nodes, 1), SETTINGS, 2)["runs"] == []
    assert bisect.found_verdict(nodes, with_round) == recorded[-1]
    assert recorded[-1]["runs"][0]["hosts"] == ["gpu2", "gpu3"]
    assert recorded[-1]["runs"][0]["reasons"][0].startswith("bisected in 1 round: the link between gpu2 and gpu3: gpu2+gpu3 0.227 GB/s")
