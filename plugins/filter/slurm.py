# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters of Slurm (role slurm, the doctor, train.yml); documentation lives in the <filter name>.yml files next to this one."""

from __future__ import annotations

from ansible_collections.trainops.cluster.plugins.plugin_utils import slurm


def slurm_nodes_shown(show_text):
    return dict((name, {"state": record.get("State"), "reason": record.get("Reason"), "address": record.get("NodeAddr"),
                        "gres": record.get("Gres"), "gpus": slurm.gres_gpus(record.get("Gres"))})
                for name, record in slurm.parse_show_node(str(show_text or "")).items())


def slurm_node_problems(show_text, nodes, gpus, munge):
    problems = slurm.check_records(nodes, slurm.parse_show_node(str(show_text or "")), dict(gpus or {}), dict(munge or {}))
    return [{"node": node, "problem": problem, "fix": fix} for node, problem, fix in problems]


def slurm_cpu_layout(facts):
    return " ".join("%s=%d" % item for item in slurm.cpu_layout(facts).items())


def slurm_job_state(squeue_text):
    return slurm.job_state(str(squeue_text or ""))


class FilterModule:
    def filters(self):
        return {
            "slurm_nodes_shown": slurm_nodes_shown,
            "slurm_node_problems": slurm_node_problems,
            "slurm_job_state": slurm_job_state,
            "slurm_cpu_layout": slurm_cpu_layout,
        }
