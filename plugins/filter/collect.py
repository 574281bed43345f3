# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters of train_action=collect (playbooks/train.yml); documentation lives in the <filter name>.yml files next to this one."""

from __future__ import annotations

import os
import shutil

from ansible_collections.trainops.cluster.plugins.plugin_utils import collect


def train_collect_destination(value):
    # Filters run in the controller's process: a relative directory is the controller's, from where ansible-playbook
    # runs (as for any path given to a command), and rsync is the one on its PATH.
    return collect.destination(value, os.getcwd(), shutil.which("rsync"))


def train_collect_plan(job_dir, resume, found, checkpoint, dest, records):
    output = collect.final_output((found or {}).get("files", []), resume["dir"]) if found is not None else None
    return collect.plan(str(job_dir), dict(resume), output, bool(checkpoint), found is not None, dict(dest), dict(records))


def train_collect_sent(hashed, dest):
    # The results of async_status over the find loop: each item is the find's async result, whose item is the part.
    files = collect.files_found([(entry["item"]["item"], entry.get("files") or []) for entry in (hashed or {}).get("results", [])])
    paths = sorted(files)
    return {"files": files, "paths": paths, "at": ["%s/%s" % (dest["path"].rstrip("/"), path) for path in paths],
            "sums": collect.sums_command(dest, paths) if dest["kind"] == "remote" else None}


def train_collect_verify(sent, arrived, running):
    # A dict of sha256 by path, or sha256sum's output at a remote destination.
    sums = collect.sha256sum_output(arrived) if isinstance(arrived, str) else dict(arrived)
    # A running job's records grow while they are copied; a complete checkpoint does not change.
    live = {path for path in sent["files"] if "/" not in path} if list(running) else set()
    return collect.verify(sent["files"], sums, live)


def train_collect_summary(verification, job, dest, chosen, copies, running, kept, addresses):
    stats = collect.rsync_stats([entry.get("stdout_lines") for entry in (copies or {}).get("results", [])])
    return collect.summary(str(job), dest, chosen, verification, stats, list(running), list(kept), dict(addresses))


class FilterModule:
    def filters(self):
        return {"train_collect_destination": train_collect_destination, "train_collect_plan": train_collect_plan,
                "train_collect_sent": train_collect_sent, "train_collect_verify": train_collect_verify,
                "train_collect_summary": train_collect_summary}
