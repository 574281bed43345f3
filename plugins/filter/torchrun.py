# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters of the torchrun rungs; documentation lives in the <filter name>.yml files next to this one."""

from __future__ import annotations

from ansible_collections.trainops.cluster.plugins.plugin_utils import torchrun_verdict


def torchrun_allreduce_verdict(results, nodes, nproc, gpus, master, nccl_sources=None):
    # torch's own NCCL is its pip package (nvidia-nccl-cu*), as the facts found it on each node.
    built_for = {node: next((s["version"] for s in (sources or []) if s.get("source") == "pip"), None)
                 for node, sources in dict(nccl_sources or {}).items()}
    return torchrun_verdict.judge_allreduce(dict(results), list(nodes), dict(nproc), dict(gpus), str(master), built_for)


def torchrun_training_verdict(first, resumed, nodes, nproc, master, settings):
    return torchrun_verdict.judge_training(dict(first), dict(resumed), list(nodes), dict(nproc), str(master), dict(settings))


def torchrun_blocked(nodes, failed_before, found_rc, executable, where):
    return torchrun_verdict.blocked(list(nodes), list(failed_before), dict(found_rc), str(executable), str(where))


def torchrun_rows(verdicts):
    return torchrun_verdict.report_rows(list(verdicts))


class FilterModule:
    def filters(self):
        return {"torchrun_allreduce_verdict": torchrun_allreduce_verdict, "torchrun_training_verdict": torchrun_training_verdict,
                "torchrun_blocked": torchrun_blocked, "torchrun_rows": torchrun_rows}
