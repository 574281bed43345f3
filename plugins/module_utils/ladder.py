# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The bring-up ladder of verify.yml as pure functions: which runs make each rung, and their command lines.

Rungs, in order, each stopping the climb when it fails: one GPU on each node; all GPUs of each node; disjoint
node pairs (N/2 at a time, an odd node out in a second wave); all nodes. Where a node has no GPU the GPU rungs
are skipped and one CPU rung runs a real MPI all-reduce across all nodes instead, over the same mpirun-over-SSH
path with the same pinned ports and interface.
"""

from __future__ import annotations

from ansible_collections.trainops.cluster.plugins.module_utils.nccl_tests import judge_rung, link_limit_gbps

RUNGS = ("network", "gpu", "node", "pairs", "all", "cpu")
LABELS = {
    "network": "ports between nodes",
    "gpu": "one GPU on each node",
    "node": "all GPUs of each node",
    "pairs": "node pairs",
    "all": "all nodes",
    "cpu": "CPU all-reduce over MPI, all nodes",
}
# What a rung's busbw is judged against (see nccl_tests.link_limit_gbps).
SCOPES = {"network": None, "gpu": "gpu", "node": "node", "pairs": "multi_node", "all": "multi_node", "cpu": None}


def pair_waves(nodes):
    """Disjoint pairs that can run at once: (1,2), (3,4) ...; an odd node out pairs with the first in a second wave."""
    waves = [[list(nodes[i:i + 2]) for i in range(0, len(nodes) - 1, 2)]]
    if len(nodes) % 2 and len(nodes) > 2:
        waves.append([[nodes[-1], nodes[0]]])
    return [wave for wave in waves if wave]


def _skip(rung, reason):
    return {"rung": rung, "label": LABELS[rung], "wave": None, "runs": [], "skipped": reason}


def _step(rung, runs, wave=None):
    label = LABELS[rung] + (" (wave %d)" % wave if wave else "")
    return {"rung": rung, "label": label, "wave": wave, "runs": runs, "skipped": None}


def _run(hosts, gpus, settings, rung):
    """One launch: on the first of `hosts`; a single process (-g all GPUs) on one node, mpirun across nodes."""
    leader = hosts[0]
    if rung == "cpu":
        slots = [(h, 1) for h in hosts]
        program = [settings["python"], settings["cpu_program"]] + settings.get("cpu_args", [])
        return {"leader": leader, "hosts": hosts, "ranks": len(hosts), "kind": "cpu",
                "argv": mpirun_argv(settings, slots, program), "json_file": None}
    json_file = settings.get("json_file")
    if len(hosts) == 1:
        per_proc = 1 if rung == "gpu" else gpus[leader]
        max_bytes = settings["gpu_max_bytes"] if rung == "gpu" else settings["max_bytes"]
        argv = [settings["env_wrapper"]] + nccl_tests_argv(settings, per_proc, max_bytes, json_file)
        return {"leader": leader, "hosts": hosts, "ranks": per_proc, "kind": "nccl_tests", "argv": argv, "json_file": json_file}
    slots = [(h, gpus[h]) for h in hosts]
    argv = mpirun_argv(settings, slots, nccl_tests_argv(settings, 1, settings["max_bytes"], json_file))
    return {"leader": leader, "hosts": hosts, "ranks": sum(n for _h, n in slots), "kind": "nccl_tests", "argv": argv,
            "json_file": json_file}


def plan(nodes, gpus, settings):
    """The ladder's steps, in order.

    nodes: cluster nodes in rank order; gpus: {node: GPU count}; settings: see nccl_tests_argv and mpirun_argv.
    Each step: {rung, label, wave, runs: [{leader, hosts, ranks, kind, argv, json_file}], skipped (reason or None)}.
    """
    nodes = list(nodes)
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


def nccl_tests_argv(settings, gpus_per_process, max_bytes, json_file=None):
    """all_reduce_perf with data checks on (-c 1): the verdict needs the wrong-value count."""
    argv = [settings["all_reduce_perf"], "-b", str(settings["min_bytes"]), "-e", str(max_bytes), "-f", "2",
            "-g", str(gpus_per_process), "-c", "1", "-n", str(settings["iters"]), "-w", str(settings["warmup"])]
    if json_file:
        argv += ["-J", json_file]
    return argv


def mpirun_argv(settings, slots, program):
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


def _limit(run, scope, gpu_facts, comm_facts):
    if scope is None:
        return None
    if scope == "multi_node":
        # The slowest node's network bounds what crosses nodes.
        limits = [link_limit_gbps(gpu_facts.get(h), comm_facts.get(h), scope) for h in run["hosts"]]
        known = [limit for limit in limits if limit["limit_gbps"]]
        return min(known, key=lambda limit: limit["limit_gbps"]) if known else limits[0]
    return link_limit_gbps(gpu_facts.get(run["leader"]), comm_facts.get(run["leader"]), scope)


# /proc/<pid>/status State letters, as the cleanup reports them.
STATES = {"R": "running", "S": "sleeping", "D": "uninterruptible", "T": "stopped", "t": "traced", "Z": "zombie"}


def parse_cleanup(lines):
    """The verify role's cleanup of a timed-out run on one node: lines 'killed|left PID STATE COMM'.

    Returns {killed: [(pid, state, comm)], left: [...]}; left is what was still there a second after SIGKILL.
    """
    found = {"killed": [], "left": []}
    for line in lines or []:
        fields = line.split(None, 3)
        if len(fields) == 4 and fields[0] in found:
            found[fields[0]].append((fields[1], STATES.get(fields[2], fields[2]), fields[3]))
    return found


def timeout_reasons(out, run, cleanup):
    """What a timed-out run left on its nodes, from the cleanup's report per node (absent: not looked at)."""
    reasons = ["timed out after %ss on %s" % (out.get("seconds"), run["leader"])]
    seen = {host: parse_cleanup(cleanup[host]) for host in run["hosts"] if cleanup.get(host) is not None}
    killed = ["%s %s" % (host, ", ".join("%s (%s)" % (comm, state) for _pid, state, comm in found["killed"]))
              for host, found in seen.items() if found["killed"]]
    clean = [host for host, found in seen.items() if not found["killed"] and not found["left"]]
    unseen = [host for host in run["hosts"] if host not in seen]
    if killed:
        reasons[0] += "; still running, killed by the cleanup: " + "; ".join(killed)
    if clean:
        reasons[0] += "; nothing of it left on " + ", ".join(clean)
    if unseen:
        reasons[0] += "; not checked on " + ", ".join(unseen)
    reasons += ["%s: %s (pid %s, %s) survived SIGKILL" % (host, comm, pid, state)
                for host, found in seen.items() for pid, state, comm in found["left"]]
    return reasons


def judge_step(step, outputs, gpu_facts, comm_facts, min_fraction, cleanup=None):
    """Verdict of one ladder step from its runs' allreduce_run results.

    outputs: {leader: allreduce_run result, or None when the run could not start there}; gpu_facts and comm_facts:
    {host: facts}; min_fraction: busbw at the largest size must reach this fraction of the link limit; cleanup:
    {host: the cleanup's output lines (see parse_cleanup)} for the nodes of a timed-out run that were cleaned up.
    Returns {rung, label, passed, skipped, runs: [{leader, hosts, passed, reasons, busbw_gbps, pct_of_limit,
    limit_gbps, basis, transports, seconds, timed_out}]}.
    """
    verdict = {"rung": step["rung"], "label": step["label"], "wave": step["wave"], "skipped": step["skipped"],
               "passed": True, "runs": []}
    scope = SCOPES[step["rung"]]
    ib_hosts = [h for h, facts in comm_facts.items() if (facts or {}).get("infiniband")]
    for run in step["runs"]:
        out = outputs.get(run["leader"])
        limit = _limit(run, scope, gpu_facts, comm_facts)
        entry = {"leader": run["leader"], "hosts": run["hosts"], "ranks": run["ranks"], "limit_gbps": (limit or {}).get("limit_gbps"),
                 "basis": (limit or {}).get("basis"), "seconds": None, "timed_out": False}
        if out is None:
            entry.update(passed=False, reasons=["%s: the run could not start (node unreachable or setup failed)" % run["leader"]],
                         busbw_gbps=None, pct_of_limit=None, transports=None)
        else:
            threshold = round(min_fraction * limit["limit_gbps"], 1) if limit and limit.get("limit_gbps") else None
            judged = judge_rung(out["result"], run["ranks"], run["hosts"], min_busbw_gbps=threshold, ib_present=ib_hosts,
                                transports=out.get("debug"), limit=limit)
            reasons = judged["reasons"]
            if out.get("timed_out"):
                reasons[:0] = timeout_reasons(out, run, cleanup or {})
            elif out.get("rc") and not reasons:
                reasons.append("%s exited with %s" % (run["argv"][0], out.get("rc")))
            entry.update(passed=not reasons, reasons=reasons, busbw_gbps=judged["busbw_gbps"], pct_of_limit=judged["pct_of_limit"],
                         threshold_gbps=judged["threshold_gbps"], transports=judged["transports"], seconds=out.get("seconds"),
                         timed_out=bool(out.get("timed_out")))
        verdict["runs"].append(entry)
        verdict["passed"] = verdict["passed"] and entry["passed"]
    return verdict


def network_verdict(matrix, nodes):
    """The first rung: the port matrix (reachability.summarize of port_matrix results) as a step verdict.

    A single node has no ports between nodes: the rung is skipped, and passes, whatever matrix holds (verify.yml
    then runs no port matrix and passes an empty one).
    """
    if len(nodes) < 2:
        return dict(_skip("network", "skipped: one node"), passed=True)
    run = {"leader": None, "hosts": list(nodes), "ranks": None, "passed": matrix["ok"], "reasons": matrix["messages"],
           "busbw_gbps": None, "pct_of_limit": None, "limit_gbps": None, "basis": None, "transports": None,
           "seconds": None, "timed_out": False}
    return {"rung": "network", "label": LABELS["network"], "wave": None, "skipped": None, "passed": matrix["ok"], "runs": [run]}


def report_rows(verdicts):
    """One table row per run: rung, nodes, ranks, busbw, % of limit, limit basis, transports, verdict, reasons."""
    rows = []
    for verdict in verdicts:
        if verdict["skipped"]:
            rows.append([verdict["label"], "-", "-", "-", "-", "-", "-", "skipped", verdict["skipped"]])
            continue
        for run in verdict["runs"]:
            busbw = run.get("busbw_gbps")
            pct = run.get("pct_of_limit")
            rows.append([verdict["label"], ",".join(run["hosts"]), str(run["ranks"] or "-"), "-" if busbw is None else "%.1f" % busbw,
                         "-" if pct is None else "%.0f%%" % pct, run.get("basis") or "-", ",".join(run.get("transports") or []) or "-",
                         "PASS" if run["passed"] else "FAIL", "; ".join(run.get("reasons") or [])])
    return rows
