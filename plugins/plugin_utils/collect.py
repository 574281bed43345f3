# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What train_action=collect copies off the cluster, and whether what arrived is what left.

A job's results are its records (job.json, every node's log, exit record and other JSON at the top of its directory,
as the first node's report names them)
and one checkpoint: the newest complete one (checkpoints.assess decides), or LLaMA-Factory's final model at the top of
its output_dir when the training finished. Each part is one rsync from one node; each file's sha256 is taken on the
node and again at the destination, and the two must agree.
"""

from __future__ import annotations

import re
import shlex
from typing import Any, Collection, Iterable, Sequence

from ansible_collections.trainops.cluster.plugins.module_utils._checkpoints import HF_CHECKPOINT_RE, WEIGHT_SHARD_RE, WEIGHT_FILES

# rsync's own words for where data came from: sent as literal data, or matched in a file already at the destination.
_STATS_RE = re.compile(r"^(Total file size|Total transferred file size|Literal data|Matched data): ([\d,.]+)")
# A line of sha256sum: an escaped name's backslash, the digest, a space and a space or "*" (binary mode), the name.
_SUM_RE = re.compile(r"^(\\?)([0-9a-fA-F]+) [ *](.*)$")
# [user@]host: an rsync target over SSH (rsync takes a colon before any slash as one).
_REMOTE_RE = re.compile(r"^((?:[A-Za-z0-9._-]+@)?[A-Za-z0-9][A-Za-z0-9.-]*):(.*)$")


def destination(value: object, cwd: object, rsync: str | None) -> dict[str, Any]:
    """train_collect_dest read as rsync reads it: {kind: local|remote, path, host, display, problem}.

    A colon before any slash makes it a target over SSH ([user@]host:path, reached from the first node); anything else is
    a directory of the controller (relative to cwd), where rsync (the controller's, or None) runs. problem says why it
    cannot be used, or is None.
    """
    text = "" if value is None else str(value).strip()
    result: dict[str, Any] = {"kind": "local", "path": text, "host": None, "display": text, "problem": None}
    if not text:
        return dict(result, problem="train_collect_dest is empty: give a directory of the controller or [user@]host:/path")
    head = text.split("/", 1)[0]
    if text.startswith("rsync://") or "::" in head:
        return dict(result, problem="train_collect_dest %s is an rsync daemon: its files cannot be checked by sha256 there; "
                                    "give [user@]host:/path (over SSH) or a directory of the controller" % text)
    if ":" in head:
        match = _REMOTE_RE.match(text)
        if not match or not match.group(2):
            return dict(result, problem="train_collect_dest %s is not [user@]host:/path nor a directory of the controller" % text)
        return {"kind": "remote", "path": match.group(2).rstrip("/") or "/", "host": match.group(1), "display": text,
                "problem": None}
    path = text if text.startswith("/") else "%s/%s" % (str(cwd).rstrip("/"), text)
    path = path.rstrip("/") or "/"
    if not rsync:
        return dict(result, path=path, display=path, problem="train_collect_dest %s is a directory of the controller, which "
                                                             "has no rsync to copy there: install it" % path)
    return dict(result, path=path, display=path)


def final_output(files: list[dict[str, Any]], root: object) -> dict[str, Any] | None:
    """LLaMA-Factory's final model at the top of output_dir: {files, size, problems}, or None where there is none.

    files: [{path, size}] under root (absolute paths, as find lists them). The Trainer's save_model writes the weights
    there, then LLaMA-Factory's save_metrics and save_state (trainer_state.json): without the state file the training
    did not get to its end.
    """
    prefix = str(root).rstrip("/") + "/"
    top = {f["path"][len(prefix):]: int(f.get("size", 0)) for f in files
           if f["path"].startswith(prefix) and "/" not in f["path"][len(prefix):]}
    shards = [match for match in (WEIGHT_SHARD_RE.match(name) for name in top) if match]
    if not top.keys() & set(WEIGHT_FILES) and not shards:
        return None
    problems = []
    if "trainer_state.json" not in top:
        problems.append("no trainer_state.json (LLaMA-Factory writes it after the model: the training did not finish)")
    for total in {int(match.group(2)) for match in shards}:
        have = {int(match.group(1)) for match in shards if int(match.group(2)) == total}
        missing = sorted(set(range(1, total + 1)) - have)
        if missing:
            problems.append("weight shard %s of %d missing" % (", ".join(str(i) for i in missing), total))
    return {"files": sorted(top), "size": sum(top.values()), "problems": problems}


def _join(*names: str) -> str:
    return "/".join(name.strip("/") if i else name.rstrip("/") for i, name in enumerate(names) if name) or "/"


def _part(what: str, src: str, dest: str, filters: list[str], patterns: list[str], recurse: bool) -> dict[str, Any]:
    return {"what": what, "src": src, "dest": dest, "filters": filters, "patterns": patterns, "recurse": recurse,
            # rsync copies the contents of src into its part of the destination.
            "source": src.rstrip("/") + "/", "into": dest}


def _result_part(resume: dict[str, Any], output: dict[str, Any] | None) -> dict[str, Any] | None:
    """The part that copies the job's result (its "at": where it lands, relative to the destination), or None."""
    latest = resume.get("latest")
    if output and not output["problems"]:
        # The training finished: its model is the result; a checkpoint would only resume a run that is over.
        return dict(_part("final model", resume["dir"], "output", ["--exclude=*/"], ["*"], False), at="output/")
    if latest and HF_CHECKPOINT_RE.match(latest):
        part = _part("checkpoint " + latest, "%s/%s" % (resume["dir"], latest), "checkpoints/" + latest, [], ["*"], True)
        # The directory itself into checkpoints/: rsync makes one missing directory level, not two.
        return dict(part, source=part["src"], into="checkpoints", at="checkpoints/%s/" % latest)
    if latest:
        part = _part("checkpoint " + latest, resume["dir"], "checkpoints", ["--include=/" + latest, "--exclude=*"], [latest], False)
        return dict(part, at="checkpoints/" + latest)
    return None


def _placed(dest: dict[str, Any], part: dict[str, Any]) -> dict[str, Any]:
    """A part with "to" (where its files land) and "into" (where rsync copies to) as paths at the destination."""
    return dict(part, to=_join(dest["path"], part["dest"]), into=_join(dest["path"], part["into"]))


def plan(job_dir: str, resume: dict[str, Any], output: dict[str, Any] | None, checkpoint: bool, config: object,
         dest: dict[str, Any], records: dict[str, Any]) -> dict[str, Any]:
    """The parts to copy, and what is left out: {parts, result, notes, problem, left, prepare}.

    resume: the train_checkpoints filter's assessment (dir, latest, incomplete); output: final_output's result, or None;
    checkpoint: false to collect the records alone; config: whether a LLaMA-Factory config was given; dest: destination's;
    records: {name: kind} of the job's records at the top of job_dir (the first node's report says them).
    Each part is {what, src (a directory on the nodes), dest (relative to the destination), to (that, at the
    destination), filters (rsync's), source and into (rsync's source and target), patterns and recurse (find's, for
    the files of src that rsync copies)}. result is the part of the checkpoint or final model, or None; problem says
    why there is nothing to collect, or is None; left, what a release would lose that this run does not copy; prepare,
    at a remote destination, the shell command that makes it ready.
    """
    records = dict(_part("records", job_dir, "", ["--include=/%s" % name for name in records] + ["--exclude=*"], sorted(records), False),
                   kinds=dict(records))
    found = _result_part(resume, output)
    # Beside a finished run's model, a checkpoint that its last save left incomplete is no loss.
    notes = [] if found and found["what"] == "final model" else [
        "%s/%s is incomplete (%s): not collected" % (resume["dir"], name, "; ".join(reasons))
        for name, reasons in sorted((resume.get("incomplete") or {}).items())]
    if output and output["problems"]:
        notes.append("the final model in %s is incomplete (%s): not collected" % (resume["dir"], "; ".join(output["problems"])))
    result = _placed(dest, found) if found and checkpoint else None
    problem = left = None
    if checkpoint and not found:
        problem = "no complete checkpoint in %s%s%s; to collect its records alone: -e train_collect_checkpoint=false" % (
            resume["dir"], "".join("; " + note for note in notes),
            "" if config else " (a LLaMA-Factory job keeps them in its output_dir: give its -e train_config)")
    if found and not checkpoint:
        left = "its %s was not collected (train_collect_checkpoint=false)" % found["what"]
    return {"parts": [_placed(dest, records)] + ([result] if result else []), "result": result, "notes": notes,
            "problem": problem, "left": left, "prepare": prepare_command(dest) if dest["kind"] == "remote" else None}


def prepare_command(dest: dict[str, Any]) -> str:
    """The shell command that makes a remote destination's directory, and names a tool missing there."""
    tools = " ".join("command -v %s >/dev/null || { echo '%s is not installed on %s' >&2; exit 127; };" % (t, t, dest["host"])
                     for t in ("rsync", "sha256sum"))
    return "mkdir -p -- %s && %s" % (shlex.quote(dest["path"]), tools)


def sums_command(dest: dict[str, Any], paths: Iterable[str]) -> str:
    """The shell command that prints the sha256 of paths (relative to a remote destination) there, as sha256sum does."""
    return "cd -- %s && sha256sum -- %s" % (shlex.quote(dest["path"]), " ".join(shlex.quote(p) for p in sorted(paths)))


def files_found(finds: Iterable[tuple[dict[str, Any], list[dict[str, Any]]]]) -> dict[str, dict[str, Any]]:
    """The files find listed on the node, keyed by their path relative to the destination: {path: {size, sha256}}.

    finds: (part, find's files) pairs, one per part.
    """
    found: dict[str, dict[str, Any]] = {}
    for part, files in finds:
        prefix = part["src"].rstrip("/") + "/"
        for entry in files:
            relative = entry["path"][len(prefix):] if entry["path"].startswith(prefix) else entry["path"]
            found[_join(part["dest"], relative) if part["dest"] else relative] = {
                "size": int(entry.get("size", 0)), "sha256": entry.get("checksum")}
    return found


def sha256sum_output(text: str) -> dict[str, str]:
    """sha256sum's lines read: {path: sha256}. A line starting with a backslash names a file whose name sha256sum
    escaped (a backslash or newline in it); " *" before the name marks binary mode."""
    sums = {}
    for line in text.splitlines():
        match = _SUM_RE.match(line)
        if match:
            name = match.group(3)
            if match.group(1):
                name = re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), name)
            sums[name] = match.group(2)
    return sums


def verify(sent: dict[str, dict[str, Any]], arrived: dict[str, str], live: Collection[str]) -> dict[str, Any]:
    """Whether every file arrived as it left: {files ({path: size}), bytes, mismatched, changed}.

    sent: files_found's result on the node; arrived: {path: sha256} at the destination; live: paths that may change while they are
    copied (the records of a job still running). mismatched: [message] (a failure, naming each file); changed: the live
    files that did (copied as they were then).
    """
    mismatched: list[str] = []
    changed: list[str] = []
    for path, entry in sorted(sent.items()):
        there = arrived.get(path)
        if there == entry["sha256"]:
            continue
        if path in live:
            changed.append(path)
        elif there is None:
            mismatched.append("%s: not at the destination after the copy" % path)
        else:
            mismatched.append("%s: sha256 %s at the destination, %s on the node" % (path, there, entry["sha256"]))
    files = {path: entry["size"] for path, entry in sent.items()}
    return {"files": files, "bytes": sum(files.values()), "mismatched": mismatched, "changed": changed}


def rsync_stats(outputs: Iterable[list[str] | None]) -> dict[str, int]:
    """rsync --stats of every part, summed: {total, transferred, literal, matched} in bytes."""
    keys = {"Total file size": "total", "Total transferred file size": "transferred", "Literal data": "literal",
            "Matched data": "matched"}
    stats = dict.fromkeys(keys.values(), 0)
    for lines in outputs:
        for line in lines or []:
            match = _STATS_RE.match(line.strip())
            if match:
                stats[keys[match.group(1)]] += int(float(match.group(2).replace(",", "")))
    return stats


def human(size: float) -> str:
    """Bytes in the largest unit that keeps a number >= 1 (1.0 GiB, 512.0 MiB, 12 B)."""
    for unit, scale in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if size >= scale:
            return "%.1f %s" % (size / scale, unit)
    return "%d B" % size


def _count(number: int, thing: str) -> str:
    return "%d %s%s" % (number, thing, "" if number == 1 else "s")


def _records_line(paths: Iterable[str], where: str, kinds: dict[str, str]) -> str:
    """What of the job's records arrived, by kind ({name: job record, log, exit record, record})."""
    names = [p for p in paths if "/" not in p]
    of = {kind: [n for n in names if kinds.get(n) == kind] for kind in ("job record", "log", "exit record")}
    other = sorted(n for n in names if n not in of["job record"] + of["log"] + of["exit record"])
    parts = of["job record"] + [_count(len(of["log"]), "log"), _count(len(of["exit record"]), "exit record")]
    if other:
        parts.append("%s (%s)" % (_count(len(other), "more record"), ", ".join(other)))
    return "records: %s -> %s/" % (", ".join(parts), where)


def _unsafe(job: str, dest: dict[str, Any], collected: dict[str, Any], running: Sequence[str], addresses: dict[str, str]) -> list[str]:
    """Why releasing the cluster's copy of the job would lose something: [reason]."""
    reasons = [collected["left"]] if collected["left"] else []
    if running:
        reasons.append("job %s is still running on %s: stop it (-e train_action=stop) and collect again" % (job, ", ".join(running)))
    host = (dest["host"] or "").rpartition("@")[2]
    node = next((name for name, address in addresses.items() if host in (name, address)), None)
    if node:
        reasons.append("the destination is on %s, a node of this cluster" % node)
    return reasons


def summary(job: str, dest: dict[str, Any], collected: dict[str, Any], verification: dict[str, Any], stats: dict[str, int],
            running: Sequence[str], kept: list[str], addresses: dict[str, str]) -> dict[str, Any]:
    """What collect says, ending with whether the cluster's copy may be released: {lines, safe}.

    collected: plan's result; verification: verify's; stats: rsync_stats'; running: the nodes where the job still runs;
    kept: the directories on the cluster that hold the job (nothing there is deleted); addresses: {node: cluster_ip}.
    """
    where = dest["display"].rstrip("/")
    files = verification["files"]
    changed = verification["changed"]
    lines = ["job %s: %s (%s) copied to %s, %s by sha256 on the node and at the destination"
             % (job, _count(len(files), "file"), human(verification["bytes"]), where,
                "%d verified" % (len(files) - len(changed)) if changed else "each verified")]
    result = collected["result"]
    if result:
        inside = [size for path, size in files.items() if path.startswith(result["at"])]
        lines.append("%s: %s (%s) -> %s/%s" % (result["what"], _count(len(inside), "file"), human(sum(inside)), where, result["at"]))
    lines.append(_records_line(files, where, collected["parts"][0]["kinds"]))
    if stats["matched"]:
        lines.append("reused %s already at the destination (an earlier or interrupted copy), sent %s"
                     % (human(stats["matched"]), human(stats["literal"])))
    lines += collected["notes"]
    if changed:
        lines.append("changed while copied (the job runs), copied as they were: %s" % ", ".join(changed))
    unsafe = _unsafe(job, dest, collected, running, addresses)
    # A checkpoint directory inside the job's directory goes with it.
    kept = [d for i, d in enumerate(kept) if d not in kept[:i] and not any(d.startswith(o.rstrip("/") + "/") for o in kept)]
    if unsafe:
        lines.append("NOT safe to release: %s" % "; ".join(unsafe))
    else:
        stays, them = ("stays", "it") if len(kept) == 1 else ("stay", "them")
        lines.append("safe to release: the job has ended and its results are verified at %s. Nothing on the cluster was "
                     "deleted: %s %s there until you remove %s" % (where, " and ".join(kept), stays, them))
    return {"lines": lines, "safe": not unsafe}
