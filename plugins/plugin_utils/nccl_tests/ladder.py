# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The bring-up ladder of verify.yml as pure functions: which runs make each rung, and their command lines.

Rungs, in order, each stopping the climb when it fails: one GPU on each node; all GPUs of each node; disjoint
node pairs (N/2 at a time, an odd node out in a second wave); all nodes. On a cluster without GPUs the GPU rungs
are skipped and one CPU rung runs a real MPI all-reduce across all nodes instead, over the same mpirun-over-SSH
path with the same pinned ports and interface. A GPU cluster (a node has GPUs, or the user says how many each
must have) where a node has fewer GPUs than that is not a CPU cluster: it fails on its first rung, naming the node.

Verdicts say what they proved in one word, their `verdict`: PASS and FAIL for a run that was judged, "not judged" for a
run that passed its checks but had no bandwidth threshold (no link limit known, or a one-GPU run that crosses no
link), "skipped" for a step that did not run; a skipped step's `passed` is None, never True.
"""

from __future__ import annotations

import posixpath
import statistics
from typing import Any, Sequence

from ansible_collections.trainops.cluster.plugins.plugin_utils.nccl_tests.bandwidth import DEFAULT_FRACTION, LINK_FRACTIONS, link_limit_gbps
from ansible_collections.trainops.cluster.plugins.plugin_utils.nccl_tests.rung_verdict import busbw_curve, judge_rung

RUNGS = ("network", "gpus", "gpu", "node", "pairs", "all", "bisect", "cpu")
LABELS = {
    "network": "ports between nodes",
    "gpus": "GPUs on each node",
    "gpu": "one GPU on each node",
    "node": "all GPUs of each node",
    "pairs": "node pairs",
    "all": "all nodes",
    # A slow all-nodes rung's halves and pairs (bisect.py), run after it.
    "bisect": "all nodes, bisected",
    "cpu": "CPU all-reduce over MPI, all nodes",
}
# What a rung's busbw is judged against (see bandwidth.link_limit_gbps).
SCOPES = {"network": None, "gpus": None, "gpu": "gpu", "node": "node", "pairs": "multi_node", "all": "multi_node", "bisect": "multi_node",
          "cpu": None}


def pair_waves(nodes: Sequence[str]) -> list[list[list[str]]]:
    """Disjoint pairs that can run at once: (1,2), (3,4) ...; an odd node out pairs with the first in a second wave."""
    waves = [[list(nodes[i:i + 2]) for i in range(0, len(nodes) - 1, 2)]]
    if len(nodes) % 2 and len(nodes) > 2:
        waves.append([[nodes[-1], nodes[0]]])
    return [wave for wave in waves if wave]


def gpu_shortfall(nodes: list[str], gpus: dict[str, int | None], expect_gpus: int | None = None,
                  gpu_facts: dict[str, Any] | None = None) -> list[str]:
    """Why a GPU cluster is short of GPUs: one reason per node with fewer GPUs than expect_gpus, else than the most
    any node has ("node2 reports 0 GPUs, the others 8"), with gpu_facts' own reason where it gives one (the driver
    gone after a kernel update). [] on a cluster without GPUs (none has any and expect_gpus is unset) or a full one.
    """
    counts = dict((node, gpus.get(node) or 0) for node in nodes)
    want = expect_gpus or max(list(counts.values()) or [0])
    if not want:
        return []
    short = [node for node in nodes if counts[node] < want]
    full = [node for node in nodes if node not in short]
    if expect_gpus:
        others = "expected %d (verify_expect_gpus)" % want
    elif len(short) == 1:
        others = "the others %d" % want
    else:
        others = "%d on %s" % (want, ", ".join(full))
    reasons = []
    for node in short:
        why = ((gpu_facts or {}).get(node) or {}).get("reason")
        reasons.append("%s reports %d GPU%s, %s%s" % (
            node, counts[node], "" if counts[node] == 1 else "s", others, ": %s" % why if why else ""))
    return reasons


def _skip(rung: str, reason: str | None) -> dict[str, Any]:
    return {"rung": rung, "label": LABELS[rung], "wave": None, "runs": [], "skipped": reason}


def _skipped_verdict(step: dict[str, Any]) -> dict[str, Any]:
    """A step that did not run: `passed` None (not proven either way), so no report can count it as a pass."""
    return {"rung": step["rung"], "label": step["label"], "wave": step["wave"], "skipped": step["skipped"], "passed": None,
            "verdict": "skipped", "runs": []}


def _step(rung: str, runs: list[dict[str, Any]], wave: int | None = None) -> dict[str, Any]:
    label = LABELS[rung] + (" (%s %d)" % ("round" if rung == "bisect" else "wave", wave) if wave else "")
    return {"rung": rung, "label": label, "wave": wave, "runs": runs, "skipped": None}


def _json_file(settings: dict[str, Any], leader: str) -> str | None:
    """Where nccl-tests writes its JSON (-J): it holds rank 0's whole environment, so a per-run name under json_dir,
    a directory only the training user can read, never a fixed name in /tmp. The leader's name keeps runs on nodes
    that share a home directory apart. None without json_dir (a build without -J)."""
    if not settings.get("json_dir"):
        return None
    return posixpath.join(settings["json_dir"], "%s-%s.json" % (settings["run_id"], leader))


def _run(hosts: list[str], gpus: dict[str, Any], settings: dict[str, Any], rung: str) -> dict[str, Any]:
    """One launch: on the first of `hosts`; a single process (-g all GPUs) on one node, mpirun across nodes."""
    leader = hosts[0]
    if rung == "cpu":
        slots = [(h, 1) for h in hosts]
        program = [settings["python"], settings["cpu_program"]] + settings.get("cpu_args", [])
        return {"leader": leader, "hosts": hosts, "ranks": len(hosts), "kind": "cpu",
                "argv": launcher_argv(settings, slots, program), "json_file": None}
    json_file = _json_file(settings, leader)
    if len(hosts) == 1:
        per_proc = 1 if rung == "gpu" else gpus[leader]
        max_bytes = settings["gpu_max_bytes"] if rung == "gpu" else settings["max_bytes"]
        argv = [settings["env_wrapper"]] + nccl_tests_argv(settings, per_proc, max_bytes, json_file)
        return {"leader": leader, "hosts": hosts, "ranks": per_proc, "kind": "nccl_tests", "argv": argv, "json_file": json_file}
    slots = [(h, gpus[h]) for h in hosts]
    argv = launcher_argv(settings, slots, nccl_tests_argv(settings, 1, settings["max_bytes"], json_file), gpus[leader])
    return {"leader": leader, "hosts": hosts, "ranks": sum(n for _h, n in slots), "kind": "nccl_tests", "argv": argv,
            "json_file": json_file}


def plan(nodes: Sequence[str], gpus: dict[str, Any], settings: dict[str, Any], expect_gpus: int | None = None,
         gpu_facts: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The ladder's steps, in order.

    nodes: cluster nodes in rank order; gpus: {node: GPU count}; settings: see nccl_tests_argv and mpirun_argv;
    expect_gpus: the GPUs each node must have (None: as many as the node with the most); gpu_facts: {node:
    trainops_gpu facts}, for the reason a node lists fewer GPUs. Each step: {rung, label, wave, runs: [{leader, hosts,
    ranks, kind, argv, json_file}], skipped (reason or None)}; the "gpus" step of a GPU cluster short of GPUs has
    no runs, the nodes checked in `hosts` and its reasons in `problems` (see gpu_shortfall), and every GPU rung after
    it is skipped.
    """
    nodes = list(nodes)
    short = gpu_shortfall(nodes, gpus, expect_gpus, gpu_facts)
    if short:
        # A node that lost its GPUs must not turn a GPU cluster into a CPU one that passes on the CPU rung.
        failed = dict(_skip("gpus", None), hosts=nodes, problems=short)
        return [failed] + [_skip(rung, "not run: %s failed" % LABELS["gpus"]) for rung in ("gpu", "node", "pairs", "all")]
    no_gpu = [n for n in nodes if not gpus.get(n)]
    if no_gpu:
        reason = "skipped: no GPUs on %s" % ", ".join(no_gpu)
        steps = [_skip(rung, reason) for rung in ("gpu", "node", "pairs", "all")]
        if len(nodes) < 2:
            return steps + [_skip("cpu", "skipped: needs at least 2 nodes")]
        return steps + [_step("cpu", [_run(nodes, gpus, settings, "cpu")])]

    steps = [_step("gpu", [_run([n], gpus, settings, "gpu") for n in nodes])]
    multi_gpu = [n for n in nodes if gpus[n] > 1]
    if multi_gpu:
        steps.append(_step("node", [_run([n], gpus, settings, "node") for n in multi_gpu]))
    else:
        steps.append(_skip("node", "skipped: every node has one GPU (the gpu rung covers it)"))
    if len(nodes) < 2:
        return steps + [_skip("pairs", "skipped: needs at least 2 nodes"), _skip("all", "skipped: needs at least 2 nodes")]
    if len(nodes) == 2:
        steps.append(_skip("pairs", "skipped: with 2 nodes the all-nodes rung is the pair"))
    else:
        for number, wave in enumerate(pair_waves(nodes), 1):
            steps.append(_step("pairs", [_run(pair, gpus, settings, "pairs") for pair in wave], number))
    steps.append(_step("all", [_run(nodes, gpus, settings, "all")]))
    return steps


def nccl_tests_argv(settings: dict[str, Any], gpus_per_process: int, max_bytes: int, json_file: str | None = None) -> list[str]:
    """all_reduce_perf with data checks on (-c 1): the verdict needs the wrong-value count.

    With settings["nccl_library"] (the libnccl.so.2 the build was linked against) it runs under env(1) with that
    library in LD_PRELOAD: nccl-tests links without an rpath, so the system's libnccl.so.2 (ldconfig) or one on
    LD_LIBRARY_PATH would otherwise be loaded, and the test would measure another NCCL than the one built for.
    """
    preload = ["env", "LD_PRELOAD=" + settings["nccl_library"]] if settings.get("nccl_library") else []
    argv = preload + [settings["all_reduce_perf"], "-b", str(settings["min_bytes"]), "-e", str(max_bytes), "-f", "2",
                      "-g", str(gpus_per_process), "-c", "1", "-n", str(settings["iters"]), "-w", str(settings["warmup"])]
    if json_file:
        argv += ["-J", json_file]
    return argv


def launcher_argv(settings: dict[str, Any], slots: list[tuple[str, int]], program: list[str], gpus_per_node: int = 0) -> list[str]:
    """The launch across nodes: mpirun over SSH, or srun where Slurm is the scheduler (settings["launcher"])."""
    if settings.get("launcher", "mpirun") == "srun":
        return srun_argv(settings, slots, program, gpus_per_node)
    return mpirun_argv(settings, slots, program)


def srun_argv(settings: dict[str, Any], slots: list[tuple[str, int]], program: list[str], gpus_per_node: int = 0) -> list[str]:
    """One Slurm step over the hosts in place of mpirun: a task per slot, each line labelled with its task (--label,
    read like mpirun's tags), MPI wired up through settings["srun_mpi"] (PMIx). Every GPU of a node is given to each
    of its tasks: NVLink peer access between a node's ranks needs all of them visible. --immediate: a node that is
    drained, down or busy fails the step at once, instead of queueing it (a silent hang). Slurm names nodes by their
    short names (settings["slurm_names"]); a task that fails ends the step.
    """
    names = settings.get("slurm_names") or {}
    argv = [settings.get("srun", "srun"), "--label", "--mpi=%s" % settings.get("srun_mpi", "pmix"),
            "--nodes=%d" % len(slots), "--ntasks=%d" % sum(n for _h, n in slots),
            "--ntasks-per-node=%d" % max(n for _h, n in slots), "--nodelist=%s" % ",".join(names.get(h, h) for h, _n in slots),
            "--immediate=%d" % int(settings.get("srun_immediate", 10)), "--kill-on-bad-exit=1"]
    if gpus_per_node:
        argv.append("--gres=gpu:%d" % gpus_per_node)
    return argv + list(settings.get("srun_args", [])) + [settings["env_wrapper"]] + list(program)


def mpirun_argv(settings: dict[str, Any], slots: list[tuple[str, int]], program: list[str]) -> list[str]:
    """mpirun over SSH: ranks placed by slot on each host, output tagged by rank, MCA settings given explicitly.

    slots: [(host, processes)]; program: the command each rank runs (through the per-node environment wrapper,
    which sets that node's own NCCL_SOCKET_IFNAME, since interface names can differ between nodes).
    """
    argv = [settings["mpirun"], "--tag-output", "--bind-to", "none", "-np", str(sum(n for _h, n in slots)),
            "-H", ",".join("%s:%d" % (h, n) for h, n in slots)]
    for key, value in sorted(settings.get("mca", {}).items()):
        argv += ["--mca", key, str(value)]
    for name in sorted(settings.get("export_env", [])):
        argv += ["-x", name]
    return argv + list(settings.get("mpirun_args", [])) + [settings["env_wrapper"]] + list(program)


def _limit(run: dict[str, Any], scope: str | None, gpu_facts: dict[str, Any], comm_facts: dict[str, Any]) -> dict[str, Any] | None:
    if scope is None:
        return None
    if scope == "multi_node":
        # The slowest node's network bounds what crosses nodes.
        limits = [link_limit_gbps(gpu_facts.get(h), comm_facts.get(h), scope) for h in run["hosts"]]
        known = [limit for limit in limits if limit["limit_gbps"]]
        return min(known, key=lambda limit: limit["limit_gbps"]) if known else limits[0]
    return link_limit_gbps(gpu_facts.get(run["leader"]), comm_facts.get(run["leader"]), scope)


def _interface(comm_facts: dict[str, Any] | None) -> str:
    """The interface a node's traffic between nodes takes, as far as its facts say."""
    comm_facts = comm_facts or {}
    ifname: str | None = comm_facts.get("nccl_socket_ifname")
    if ifname:
        return ifname
    up = [nic["name"] for nic in comm_facts.get("interfaces") or [] if nic.get("name") != "lo" and str(nic.get("state")).upper() == "UP"]
    return "/".join(up) or "network"


def _unjudged_links(run: dict[str, Any], scope: str | None, comm_facts: dict[str, Any]) -> list[str]:
    """What a run without a known link limit crossed, by node: "gpu3's train0", "vm's GPU links"."""
    if scope == "node":
        return ["%s's GPU links (no NVLink or PCIe facts)" % run["leader"]]
    return ["%s's %s" % (host, _interface(comm_facts.get(host))) for host in run["hosts"]]


def fraction_for(limit: dict[str, Any], min_fraction: float | None) -> tuple[float, str]:
    """(the share of the link's limit a run must reach, why that one): the user's verify_min_fraction where set, else
    the table's for the link's kind (bandwidth.LINK_FRACTIONS), else DEFAULT_FRACTION."""
    if min_fraction is not None:
        return float(min_fraction), "verify_min_fraction"
    kind = limit.get("kind")
    if kind in LINK_FRACTIONS:
        return LINK_FRACTIONS[kind], "the table's for %s" % kind
    return DEFAULT_FRACTION, "the default, no table entry for %s" % (kind or "this link")


def _threshold(run: dict[str, Any], scope: str | None, limit: dict[str, Any] | None, min_fraction: float | None,
               min_busbw_gbps: float | None, comm_facts: dict[str, Any]) -> tuple[float | None, str | None, str | None]:
    """-> (threshold GB/s or None, basis, not_judged reason or None) of a run that ran."""
    basis = (limit or {}).get("basis")
    if scope is None:
        return None, basis, None
    if scope == "gpu":
        # busbw of one rank is 0 by definition: nothing to hold it against, whatever the user set.
        return None, basis, "not judged: one GPU on %s, no link exercised" % run["leader"]
    if limit and limit.get("limit_gbps"):
        fraction, why = fraction_for(limit, min_fraction)
        return round(fraction * limit["limit_gbps"], 1), "%s; threshold %d %% of it (%s)" % (basis, round(100 * fraction), why), None
    links = ", ".join(_unjudged_links(run, scope, comm_facts))
    if min_busbw_gbps is not None:
        return float(min_busbw_gbps), "verify_min_busbw_gbps %g GB/s (no link limit known for %s)" % (min_busbw_gbps, links), None
    return None, basis, "not judged: no link limit known for %s" % links


def _verdict_word(passed: bool | None, not_judged: str | None) -> str:
    if not passed:
        return "FAIL"
    return "not judged" if not_judged else "PASS"


def _cleaned(result: object) -> dict[str, Any] | None:
    """The end_run result of one node, or None where the cleanup did not look (skipped, unreachable, not run)."""
    return result if isinstance(result, dict) and "found" in result else None


def timeout_reasons(out: dict[str, Any], run: dict[str, Any], cleanup: dict[str, Any]) -> list[str]:
    """What a timed-out run left on its nodes, from the end_run result per node (absent: not looked at)."""
    reasons = ["timed out after %ss on %s" % (out.get("seconds"), run["leader"])]
    looked = {host: _cleaned(cleanup.get(host)) for host in run["hosts"]}
    seen = {host: result for host, result in looked.items() if result is not None}
    ended = ["%s %s" % (host, ", ".join("%s (%s)" % (p["comm"], p["state"]) for p in result["found"]))
             for host, result in seen.items() if result["found"]]
    clean = [host for host, result in seen.items() if not result["found"]]
    unseen = [host for host in run["hosts"] if host not in seen]
    if ended:
        reasons[0] += "; still running, ended by the cleanup: " + "; ".join(ended)
    if clean:
        reasons[0] += "; nothing of it left on " + ", ".join(clean)
    if unseen:
        reasons[0] += "; not checked on " + ", ".join(unseen)
    reasons += ["%s: %s (pid %s, %s) survived SIGKILL" % (host, p["comm"], p["pid"], p["state"])
                for host, result in seen.items() for p in result.get("left") or []]
    return reasons


def against_peers(runs: list[dict[str, Any]], fraction: float) -> None:
    """The runs of a step (each node's GPUs, each pair of a wave) whose busbw is more than `fraction` below the median of
    the others of the same shape (rank count and link limit; at least two others): a part that passes the link's
    threshold and still makes every job's straggler. Adds a reason to each such run, failing it. Only runs over a known
    link (NVLink, PCIe, InfiniBand, RoCE) and not over sockets: TCP's spread from run to run on a shared cloud network
    passes a tenth."""
    judged = [run for run in runs if run.get("busbw_gbps") and run.get("passed") is not False and run.get("limit_gbps")
              and "NET/Socket" not in (run.get("transports") or [])]
    for run in judged:
        peers = [other["busbw_gbps"] for other in judged if other is not run and (other["ranks"], other.get("limit_gbps")) ==
                 (run["ranks"], run.get("limit_gbps"))]
        if len(peers) < 2:
            continue
        median = statistics.median(peers)
        if run["busbw_gbps"] < (1 - fraction) * median:
            who = "these nodes are" if len(run["hosts"]) > 1 else "this node is"
            run["reasons"].append("busbw %.3g GB/s is %d %% of the other runs' median %.3g GB/s (%s): %s slower than its peers "
                                  "(verify_outlier_fraction %s)" % (run["busbw_gbps"], round(100 * run["busbw_gbps"] / median), median,
                                                                    ", ".join(run["hosts"]), who, fraction))
            run["passed"], run["not_judged"] = False, None


def judge_step(step: dict[str, Any], outputs: dict[str, Any], gpu_facts: dict[str, Any], comm_facts: dict[str, Any],
               min_fraction: float | None, cleanup: dict[str, Any] | None = None, min_busbw_gbps: float | None = None,
               outlier_fraction: float | None = None) -> dict[str, Any]:
    """Verdict of one ladder step from its runs' allreduce_run results.

    outputs: {leader: allreduce_run result, or None when the run could not start there}; gpu_facts and comm_facts:
    {host: facts}; min_fraction: busbw at the largest size must reach this fraction of the link limit (None: the
    table's for the link's kind, fraction_for); cleanup:
    {host: the end_run module's result} for the nodes of a timed-out run that were cleaned up;
    min_busbw_gbps: the threshold of a run whose link limit is unknown (None: such a run is not judged);
    outlier_fraction: a run more than this below its peers' median busbw fails (against_peers; None: not compared).
    Returns {rung, label, wave, passed, verdict, skipped, runs: [{leader, hosts, ranks, passed, verdict, not_judged,
    reasons, busbw_gbps, pct_of_limit, limit_gbps, threshold_gbps, basis, transports, seconds, timed_out, curve}]}.
    passed: no run failed (None for a skipped step, which has no runs); verdict: PASS, FAIL, "not judged" or
    "skipped", the step's being the worst of its runs'; not_judged: why a run that passed had no bandwidth
    threshold, else None.
    """
    if step["skipped"]:
        return _skipped_verdict(step)
    verdict: dict[str, Any]
    verdict = {"rung": step["rung"], "label": step["label"], "wave": step["wave"], "skipped": None, "passed": True,
               "verdict": "PASS", "runs": []}
    if step.get("problems"):
        verdict["runs"].append(_check_run(step["hosts"], step["problems"], False))
    scope = SCOPES[step["rung"]]
    ib_hosts = [h for h, facts in comm_facts.items() if (facts or {}).get("infiniband")]
    for run in step["runs"]:
        out = outputs.get(run["leader"])
        limit = _limit(run, scope, gpu_facts, comm_facts)
        entry: dict[str, Any]
        entry = {"leader": run["leader"], "hosts": run["hosts"], "ranks": run["ranks"], "limit_gbps": (limit or {}).get("limit_gbps"),
                 "basis": (limit or {}).get("basis"), "seconds": None, "timed_out": False, "not_judged": None}
        if out is None:
            entry.update(passed=False, reasons=["%s: the run could not start (node unreachable or setup failed)" % run["leader"]],
                         busbw_gbps=None, pct_of_limit=None, transports=None, curve=[])
        else:
            threshold, basis, not_judged = _threshold(run, scope, limit, min_fraction, min_busbw_gbps, comm_facts)
            judged = judge_rung(out["result"], run["ranks"], run["hosts"], min_busbw_gbps=threshold, ib_present=ib_hosts,
                                transports=out.get("debug"), limit=limit)
            reasons = judged["reasons"]
            if out.get("timed_out"):
                reasons[:0] = timeout_reasons(out, run, cleanup or {})
            elif out.get("rc") and not reasons:
                reasons.append("%s exited with %s" % (run["argv"][0], out.get("rc")))
            entry.update(passed=not reasons, reasons=reasons, busbw_gbps=judged["busbw_gbps"], pct_of_limit=judged["pct_of_limit"],
                         threshold_gbps=judged["threshold_gbps"], transports=judged["transports"], seconds=out.get("seconds"),
                         timed_out=bool(out.get("timed_out")), basis=basis, not_judged=None if reasons else not_judged,
                         curve=busbw_curve(out["result"].get("rows")))
        verdict["runs"].append(entry)
    if outlier_fraction is not None:
        against_peers(verdict["runs"], outlier_fraction)
    for entry in verdict["runs"]:
        entry["verdict"] = _verdict_word(entry["passed"], entry["not_judged"])
    words = [run["verdict"] for run in verdict["runs"]]
    verdict["passed"] = "FAIL" not in words
    verdict["verdict"] = "FAIL" if "FAIL" in words else "not judged" if "not judged" in words else "PASS"
    return verdict


def _check_run(hosts: Sequence[str], reasons: Sequence[str], passed: bool) -> dict[str, Any]:
    """A verdict's run entry for a check made from facts, not by launching anything (the port matrix, GPU counts)."""
    return {"leader": None, "hosts": list(hosts), "ranks": None, "passed": passed, "verdict": "PASS" if passed else "FAIL",
            "not_judged": None, "reasons": list(reasons), "busbw_gbps": None, "pct_of_limit": None, "limit_gbps": None, "basis": None,
            "transports": None, "seconds": None, "timed_out": False}


def network_verdict(matrix: dict[str, Any], nodes: Sequence[str]) -> dict[str, Any]:
    """The first rung: the port matrix (reachability.summarize of port_matrix results) as a step verdict.

    A single node has no ports between nodes: the rung is skipped (passed None, as every skipped step), whatever
    matrix holds (verify.yml then runs no port matrix and passes an empty one).
    """
    if len(nodes) < 2:
        return _skipped_verdict(_skip("network", "skipped: one node"))
    run = _check_run(nodes, matrix["messages"], matrix["ok"])
    return {"rung": "network", "label": LABELS["network"], "wave": None, "skipped": None, "passed": matrix["ok"],
            "verdict": run["verdict"], "runs": [run]}


def report_rows(verdicts: list[dict[str, Any]]) -> list[list[str]]:
    """One table row per run: rung, nodes, ranks, busbw, % of limit, limit basis, transports, verdict, reasons.

    The verdict column is the run's verdict word; a run that was not judged says why in its reasons column.
    """
    rows = []
    for verdict in verdicts:
        if verdict["skipped"]:
            rows.append([verdict["label"], "-", "-", "-", "-", "-", "-", "skipped", verdict["skipped"]])
            continue
        for run in verdict["runs"]:
            busbw = run.get("busbw_gbps")
            pct = run.get("pct_of_limit")
            notes = list(run.get("reasons") or []) + ([run["not_judged"]] if run.get("not_judged") else [])
            rows.append([verdict["label"], ",".join(run["hosts"]), str(run["ranks"] or "-"), "-" if busbw is None else "%.1f" % busbw,
                         "-" if pct is None else "%.0f%%" % pct, run.get("basis") or "-", ",".join(run.get("transports") or []) or "-",
                         run["verdict"], "; ".join(notes)])
    return rows
