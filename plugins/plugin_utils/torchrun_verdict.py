# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The torchrun rungs, controller side: judge a launch across all nodes from every node's torchrun_run result.

Each node's output was read on that node (module_utils/torchrun.py, inside the module torchrun_run); the filters of
the torchrun rungs and train.yml's pre-flight judge the results here.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping


def _spans(numbers: Iterable[int]) -> str:
    numbers = sorted(numbers)
    spans: list[str] = []
    start: int | None = None
    for index, number in enumerate(numbers):
        if start is None:
            start = number
        if index + 1 == len(numbers) or numbers[index + 1] != number + 1:
            spans.append(str(start) if start == number else "%d-%d" % (start, number))
            start = None
    return ",".join(spans)


def launch_reasons(launches: Mapping[str, dict[str, str] | None], nodes: list[str], master: str) -> list[str]:
    """What in the nodes' launch environments makes a rendezvous hang: [reason], naming the nodes.

    launches: {node: launch.env as read on that node, or None}; nodes: the NODE_RANK order (cluster_master first);
    master: "addr:port" every node must use (cluster_master's cluster_ip and cluster_master_port).
    """
    reasons: list[str] = []
    by_rank: dict[str | None, list[str]] = {}
    for node in nodes:
        env = launches.get(node)
        if env is None:
            continue
        by_rank.setdefault(env.get("NODE_RANK"), []).append(node)
        addr = env.get("MASTER_ADDR", "")
        if addr.startswith("127.") or addr in ("localhost", "::1"):
            reasons.append("%s: MASTER_ADDR=%s is loopback: its agent waits for a rendezvous of its own" % (node, addr))
        elif "%s:%s" % (addr, env.get("MASTER_PORT")) != master:
            reasons.append("%s: MASTER_ADDR:MASTER_PORT is %s:%s, the cluster's master is %s"
                           % (node, addr, env.get("MASTER_PORT"), master))
        if env.get("NNODES") != str(len(nodes)):
            reasons.append("%s: NNODES=%s, the cluster has %d nodes" % (node, env.get("NNODES"), len(nodes)))
    for rank, holders in sorted(by_rank.items(), key=lambda item: str(item[0])):
        if len(holders) > 1:
            reasons.append("%s %s claimed NODE_RANK %s (in their launch.env): the rendezvous waits for the node that "
                           "should hold the missing rank" % (" and ".join(holders), "both" if len(holders) == 2 else "all", rank))
    return reasons


def _probe_reason(node: str, probe: dict[str, Any] | None) -> str | None:
    if not probe or probe.get("ok"):
        return None
    return "%s never reached %s:%s (MASTER_ADDR:MASTER_PORT): %s" % (
        node, probe.get("address"), probe.get("port"), probe.get("error") or "no answer")


def _cleanup_text(cleanups: dict[str, Any]) -> str:
    """One phrase for what the cleanup found after the launch on each node."""
    found = ["%s (%s)" % (node, ", ".join(sorted({"%s %s" % (p["comm"], p["state"]) for p in c["found"]})))
             for node, c in cleanups.items() if c and c["found"]]
    clean = [node for node, c in cleanups.items() if c and not c["found"]]
    parts = []
    if found:
        parts.append("ended what was still running on " + "; ".join(found))
    if clean:
        parts.append("nothing left on " + ", ".join(clean))
    return "; ".join(parts)


def run_reasons(results: dict[str, Any], nodes: list[str], master: str) -> list[str]:
    """Why a launch on every node did not end well: [reason], naming who could not reach whom and who failed first.

    results: {node: torchrun_run result, or None where the module did not run}.
    """
    reasons = launch_reasons({n: (results.get(n) or {}).get("launch") for n in nodes}, nodes, master) + _held_reasons(results, nodes)
    for node in nodes:
        result = results.get(node)
        if result is None:
            reasons.append("%s: not launched (the controller could not run the rung there)" % node)
            continue
        if result.get("launch") is None:
            reasons.append("%s: its launch environment could not be read (role trainops.cluster.launch writes it)" % node)
        reason = _probe_reason(node, result.get("probe"))
        if reason:
            reasons.append(reason)
    parsed = {n: results[n]["parsed"] for n in nodes if results.get(n)}
    for node, out in parsed.items():
        if out["clients"]:
            joined = [n for n in nodes if (results.get(n) or {}).get("probe", {}).get("ok")]
            missing = [n for n in nodes if n not in joined]
            reasons.append("%s (master) timed out waiting: %d/%d agents joined the rendezvous%s" % (
                node, out["clients"][0], out["clients"][1],
                " (reached the master: %s; never did: %s)" % (", ".join(joined) or "none", ", ".join(missing)) if missing else ""))
    reasons += _failure_reasons({n: _without_our_signal(out) if results[n].get("stopped") else out for n, out in parsed.items()}, nodes)
    not_ready = [n for n in nodes if (results.get(n) or {}).get("stopped") == "not ready"]
    started = [n for n in nodes if n not in not_ready and any(r.get("event") == "start" for r in parsed.get(n, {}).get("records", []))]
    if not_ready:
        reasons.append("no worker started within the rendezvous limit (%.0fs) on %s%s: stopped there" % (
            max(results[n]["seconds"] for n in not_ready), ", ".join(not_ready),
            ", while %s did" % ", ".join(started) if started else ""))
    timed_out = [n for n in nodes if (results.get(n) or {}).get("stopped") == "timeout"]
    if timed_out:
        reasons.append("timed out after %.0fs on %s" % (max(results[n]["seconds"] for n in timed_out), ", ".join(timed_out)))
    cleanup = _cleanup_text({n: results[n].get("cleanup") for n in nodes if results.get(n)})
    if cleanup and (timed_out or not_ready or any(results[n]["rc"] != 0 for n in parsed)):
        reasons.append("cleanup: " + cleanup)
    left = ["%s: %s (pid %s, %s) survived SIGKILL" % (n, p["comm"], p["pid"], p["state"])
            for n in parsed for p in (results[n].get("cleanup") or {}).get("left", [])]
    return reasons + left


# What a process that the rung itself stopped (SIGTERM at a limit) says about it: no cause of the failure.
_OUR_SIGNAL_RE = re.compile(r'SignalException: Process \d+ got signal: 15\b')
# Process states that hold a launch without failing it: the others wait for the rank until a limit.
_HELD = {"stopped": "was stopped (SIGSTOP)", "traced": "was stopped by a debugger", "uninterruptible": "was stuck in the kernel (state D)"}


def _without_our_signal(out: dict[str, Any]) -> dict[str, Any]:
    return dict(out, errors=[e for e in out["errors"] if not _OUR_SIGNAL_RE.search(e)])


def _held_reasons(results: dict[str, Any], nodes: list[str]) -> list[str]:
    """Processes the cleanup found stopped or stuck: the cause of a launch that waited until its limit or failed. After a
    launch that ended well everywhere they are no cause of anything: the container engine's own teardown is briefly in
    state D (unmounting the container's filesystem) when the cleanup looks."""
    if not any(r and (r.get("stopped") or r.get("rc")) for r in (results.get(n) for n in nodes)):
        return []
    return ["%s: %s (pid %s) %s when the launch was ended: the ranks on the other nodes waited for it" % (
        node, p["comm"], p["pid"], _HELD[p["state"]])
        for node in nodes for p in ((results.get(node) or {}).get("cleanup") or {}).get("found", []) if p["state"] in _HELD]


def _failure_reasons(parsed: dict[str, dict[str, Any]], nodes: list[str]) -> list[str]:
    """torchrun's failure summaries: the ranks killed by a signal first (the cause), then the others' exit codes."""
    failures = [dict(f, node=node) for node, out in parsed.items() for f in out["failures"]]
    by_signal = [f for f in failures if f["signal"] or (f["exitcode"] is not None and f["exitcode"] < 0)]
    reasons = []
    for failure in sorted(by_signal, key=lambda f: (f["time"] or "", nodes.index(f["node"]))):
        reasons.append("rank %s on %s died of signal %s%s" % (
            failure["rank"], failure["node"], failure["signal"] or -failure["exitcode"],
            " at %s" % failure["time"] if failure["time"] else ""))
    others = sorted({f["node"] for f in failures if f not in by_signal}, key=nodes.index)
    if others:
        reasons.append("%s %s in consequence or on their own: %s" % (
            "then" if by_signal else "failed:", ", ".join(others),
            "; ".join(("%s: %s" % (n, parsed[n]["errors"][0])) if parsed[n]["errors"] else n for n in others)))
    silent = [n for n, out in parsed.items() if out["errors"] and not out["failures"] and n not in others]
    reasons += ["%s: %s" % (n, parsed[n]["errors"][0]) for n in silent if not parsed[n]["clients"]]
    return reasons


def records(results: dict[str, Any], event: str) -> list[dict[str, Any]]:
    """Every node's records of one event, each with the node that printed it."""
    return [dict(record, node=node) for node, result in results.items() if result
            for record in result["parsed"]["records"] if record.get("event") == event]


def expected_ranks(nodes: list[str], nproc: dict[str, Any]) -> dict[str, list[int]]:
    """{node: [global ranks]} as torchrun assigns them: node by node in NODE_RANK order, nproc[node] each (1 if unknown)."""
    ranks: dict[str, list[int]] = {}
    start = 0
    for node in nodes:
        count = int(nproc.get(node) or 1)
        ranks[node] = list(range(start, start + count))
        start += count
    return ranks


def rank_reasons(found: list[dict[str, Any]], placement: dict[str, list[int]]) -> list[str]:
    """Ranks that are missing, doubled or on another node than their NODE_RANK puts them."""
    reasons: list[str] = []
    seen: dict[int, list[str]] = {}
    for record in found:
        seen.setdefault(record["rank"], []).append(record["node"])
    for node, ranks in placement.items():
        missing = [r for r in ranks if r not in seen]
        if missing:
            reasons.append("ranks %s (%s) never reported" % (_spans(missing), node))
        elsewhere = [r for r in ranks if r in seen and seen[r] != [node]]
        if elsewhere:
            reasons.append("ranks %s ran on %s, expected on %s" % (_spans(elsewhere), ",".join(sorted(set(sum((seen[r] for r in elsewhere), [])))), node))
    return reasons


def _interfaces(result: dict[str, Any] | None, found: list[dict[str, Any]]) -> list[str]:
    """The interfaces a node's ranks used: NCCL's own log where it ran with NCCL_DEBUG=INFO, else the launch variable."""
    logged = ((result or {}).get("nccl_debug") or {}).get("socket_interfaces") or []
    if logged:
        return sorted({name.split(":")[0] for name in logged})
    return sorted({r["interface"] for r in found if r.get("interface")})


def nccl_reasons(found: list[dict[str, Any]], nodes: list[str], built_for: dict[str, str | None] | None) -> list[str]:
    """Ranks that loaded different NCCLs, or another than torch's own (the version field reports blame for hangs).

    built_for: {node: the version of torch's own NCCL there (its pip package), or None where not known}.
    """
    loaded: dict[str, set[str]] = {}
    for record in found:
        if record.get("nccl"):
            loaded.setdefault(record["node"], set()).add(record["nccl"])
    reasons = []
    versions = sorted({v for vs in loaded.values() for v in vs})
    if len(versions) > 1:
        reasons.append("the ranks loaded different NCCL versions: %s" % "; ".join(
            "%s on %s" % (v, ", ".join(n for n in nodes if v in loaded.get(n, ()))) for v in versions))
    for node in nodes:
        wanted = (built_for or {}).get(node)
        other = sorted(loaded.get(node, set()) - {wanted}) if wanted else []
        if other:
            reasons.append("%s's ranks loaded NCCL %s, but torch's own NCCL there is %s: another libnccl.so.2 won at run "
                           "time (LD_LIBRARY_PATH)" % (node, ", ".join(other), wanted))
    return reasons


def judge_allreduce(results: dict[str, Any], nodes: list[str], nproc: dict[str, Any], gpus: dict[str, Any],
                    master: str, built_for: dict[str, str | None] | None = None) -> dict[str, Any]:
    """Verdict of the torchrun all-reduce rung from every node's torchrun_run result.

    nproc: {node: processes}; gpus: {node: GPU count from the facts} (NCCL expected where > 0, Gloo elsewhere);
    master: "addr:port" every node must rendezvous at; built_for: see nccl_reasons.
    """
    backends = {node: "nccl" if int(gpus.get(node) or 0) > 0 else "gloo" for node in nodes}
    found = records(results, "result")
    placement = expected_ranks(nodes, nproc)
    world = sum(len(ranks) for ranks in placement.values())
    reasons = run_reasons(results, nodes, master) + rank_reasons(found, placement)
    for record in found:
        if record["world_size"] != world:
            reasons.append("rank %s on %s saw world size %s, expected %d" % (record["rank"], record["node"], record["world_size"], world))
            break
    wrong = [r for r in found if not r.get("sum_ok")]
    reasons += ["rank %s on %s: %s of %s elements of the sum are wrong" % (r["rank"], r["node"], r["wrong"], r["bytes"] // 4) for r in wrong]
    reasons += nccl_reasons(found, nodes, built_for)
    for node in nodes:
        used = sorted({r["backend"] for r in found if r["node"] == node})
        if used and used != [backends[node]]:
            reasons.append("%s ran %s, expected %s (the facts %s)" % (
                node, "/".join(used), backends[node], "found GPUs but torch sees none" if backends[node] == "nccl" else "found no GPU"))
    busbw = [r["busbw_gbps"] for r in found]
    rendezvous = [r["rendezvous_s"] for r in found if r.get("rendezvous_s") is not None]
    return {
        "rung": "torchrun", "label": "torchrun all-reduce", "skipped": None, "passed": not reasons, "reasons": reasons,
        "world_size": world, "backend": ",".join(sorted(set(backends.values()))),
        "ranks": sorted(({"rank": r["rank"], "node": r["node"], "host": r["host"], "local_rank": r["local_rank"]} for r in found),
                        key=lambda r: r["rank"]),
        "interfaces": {n: _interfaces(results.get(n), [r for r in found if r["node"] == n]) for n in nodes},
        "nccl": sorted({r["nccl"] for r in found if r.get("nccl")}),
        "bytes": found[0]["bytes"] if found else None,
        "busbw_gbps": min(busbw) if busbw else None,
        "algbw_gbps": min(r["algbw_gbps"] for r in found) if found else None,
        "rendezvous_s": max(rendezvous) if rendezvous else None,
        "seconds": max((results[n]["seconds"] for n in nodes if results.get(n)), default=None),
    }


def _losses(results: dict[str, Any]) -> list[tuple[int, float]]:
    return [(r["step"], r["loss"]) for r in sorted(records(results, "step"), key=lambda r: r["step"])]


def training_reasons(first: dict[str, Any], resumed: dict[str, Any], nodes: list[str], world: int,
                     settings: dict[str, Any]) -> list[str]:
    """What the two launches of the training run proved wrong: loss, parameters, checkpoint, resume."""
    reasons = []
    losses = _losses(first) + _losses(resumed)
    stop_at, steps = settings["stop_at"], settings["steps"]
    if losses and losses[0][1] > 0:
        drop = (losses[0][1] - losses[-1][1]) / losses[0][1]
        if drop < settings["min_loss_drop"]:
            reasons.append("the loss fell by %.0f%% (%.4g -> %.4g), less than %.0f%%" % (
                100 * drop, losses[0][1], losses[-1][1], 100 * settings["min_loss_drop"]))
    for label, results, last in (("first launch", first, stop_at), ("resumed launch", resumed, steps)):
        done = records(results, "done")
        if len(done) != world:
            reasons.append("%s: %d of %d ranks finished" % (label, len(done), world))
        digests = sorted({d["params_sha256"] for d in done})
        if len(digests) > 1:
            odd = [d for d in done if d["params_sha256"] != done[0]["params_sha256"]]
            reasons.append("%s: the ranks hold different parameters after training (DDP did not synchronise): ranks %s differ from rank %s"
                           % (label, _spans([d["rank"] for d in odd]), done[0]["rank"]))
        if done and any(d["step"] != last for d in done):
            reasons.append("%s: ranks stopped at steps %s, expected %d" % (label, sorted({d["step"] for d in done}), last))
    saved = [c for c in records(first, "checkpoint") if c["step"] == stop_at]
    if not saved:
        reasons.append("rank 0 wrote no checkpoint of step %d" % stop_at)
    else:
        read = {r["node"]: r for r in records(first, "checkpoint_read") if r["step"] == stop_at}
        for node in nodes:
            if node not in read:
                reasons.append("%s did not read the checkpoint of step %d back" % (node, stop_at))
            elif read[node]["sha256"] != saved[0]["sha256"]:
                reasons.append("%s read another file at %s than rank 0 wrote (sha256 %s, not %s): the checkpoint directory is not shared"
                               % (node, saved[0]["path"], read[node]["sha256"][:12], saved[0]["sha256"][:12]))
    reasons += _resume_reasons(resumed, stop_at, settings["resume_tolerance"])
    return reasons


def _resume_reasons(resumed: dict[str, Any], stop_at: int, tolerance: float) -> list[str]:
    found = records(resumed, "resumed")
    if not found:
        return ["the second launch did not resume from a checkpoint"]
    back = found[0]
    reasons: list[str] = []
    if back["step"] != stop_at:
        reasons.append("resumed from step %s, the last checkpoint was step %d" % (back["step"], stop_at))
    if abs(back["eval_loss"] - back["stored_eval_loss"]) > tolerance * max(1.0, abs(back["stored_eval_loss"])):
        reasons.append("after the resume the loss is %.6g, it stopped at %.6g: the model did not come back as saved"
                       % (back["eval_loss"], back["stored_eval_loss"]))
    steps = _losses(resumed)
    if steps and steps[0][0] != back["step"] + 1:
        reasons.append("the resumed run went on at step %d, not %d" % (steps[0][0], back["step"] + 1))
    return reasons


def blocked(nodes: list[str], failed_before: list[str], found_rc: dict[str, int | None], executable: str, where: str) -> dict[str, Any] | None:
    """The verdict of rungs that cannot run, or None: an earlier rung failed (skipped), no node has torchrun where the
    launch runs (skipped, saying so), or some nodes lack it (failed, naming them).

    found_rc: {node: rc of looking for the executable, None where it was not looked for}; where: "in training_image X"
    or "on the hosts (no training_image)".
    """
    verdict: dict[str, Any] = {"rung": "torchrun", "label": "torchrun all-reduce", "passed": None, "reasons": [], "skipped": None}
    missing = [n for n in nodes if found_rc.get(n) not in (None, 0)]
    if failed_before:
        return dict(verdict, skipped="not run: %s failed" % ", ".join(failed_before))
    if missing and len(missing) == len(nodes):
        return dict(verdict, skipped="not run: no %s %s on any node (install torch there to run the rungs)" % (executable, where))
    if missing:
        return dict(verdict, passed=False, reasons=["%s: no %s %s, the other nodes have one" % (n, executable, where) for n in missing])
    return None


def _launch_failed(results: dict[str, Any], nodes: list[str]) -> bool:
    return not all(results.get(n) and results[n]["rc"] == 0 and not results[n]["timed_out"] for n in nodes)


def judge_training(first: dict[str, Any], resumed: dict[str, Any], nodes: list[str],
                   nproc: dict[str, Any], master: str, settings: dict[str, Any]) -> dict[str, Any]:
    """Verdict of the training rung: a first launch that stops at settings.stop_at, and a launch that resumes.

    first, resumed: {node: torchrun_run result, or None}; settings: {steps, stop_at, min_loss_drop, resume_tolerance}.
    """
    world = sum(len(ranks) for ranks in expected_ranks(nodes, nproc).values())
    if _launch_failed(first, nodes):
        reasons = ["first launch: %s" % r for r in run_reasons(first, nodes, master)] or ["first launch failed, saying nothing"]
    elif _launch_failed(resumed, nodes):
        reasons = ["resumed launch: %s" % r for r in run_reasons(resumed, nodes, master)] or ["resumed launch failed, saying nothing"]
    else:
        reasons = training_reasons(first, resumed, nodes, world, settings)
    losses = _losses(first) + _losses(resumed)
    back = records(resumed, "resumed")
    saved = [c for c in records(first, "checkpoint") if c["step"] == settings["stop_at"]]
    return {
        "rung": "train", "label": "DDP training run", "skipped": None, "passed": not reasons, "reasons": reasons,
        "world_size": world, "losses": losses,
        "loss_drop": round((losses[0][1] - losses[-1][1]) / losses[0][1], 4) if losses and losses[0][1] > 0 else None,
        "checkpoint": saved[0]["path"] if saved else None,
        "resumed_at": back[0]["step"] if back else None,
        "seconds": [max((r[n]["seconds"] for n in nodes if r.get(n)), default=None) for r in (first, resumed)],
    }


def report_rows(verdicts: list[dict[str, Any]]) -> list[list[str]]:
    """One table row per rung: rung, world size, backend, interfaces, rendezvous s, busbw, loss, verdict, reasons."""
    rows = []
    for verdict in verdicts:
        if verdict.get("skipped"):
            rows.append([verdict["label"], "-", "-", "-", "-", "-", "-", "skipped", verdict["skipped"]])
            continue
        interfaces = sorted({i for names in (verdict.get("interfaces") or {}).values() for i in names})
        losses = verdict.get("losses")
        rows.append([
            verdict["label"], str(verdict.get("world_size") or "-"), verdict.get("backend") or "-", ",".join(interfaces) or "-",
            "-" if verdict.get("rendezvous_s") is None else "%.1f" % verdict["rendezvous_s"],
            "-" if verdict.get("busbw_gbps") is None else "%.2f" % verdict["busbw_gbps"],
            "%.3g -> %.3g" % (losses[0][1], losses[-1][1]) if losses else "-",
            "PASS" if verdict["passed"] else "FAIL", "; ".join(verdict["reasons"])])
    return rows
