# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters of the verify ladder; documentation lives in the <filter name>.yml files next to this one."""

from __future__ import annotations

from ansible_collections.trainops.cluster.plugins.plugin_utils.nccl_tests import bisect, ladder


def verify_plan(nodes, gpus, settings, expect_gpus=None, gpu_facts=None):
    return ladder.plan(list(nodes), dict(gpus), dict(settings), None if expect_gpus is None else int(expect_gpus), dict(gpu_facts or {}))


def verify_judge(step, outputs, gpu_facts, comm_facts, min_fraction=None, cleanup=None, min_busbw_gbps=None, outlier_fraction=None):
    fraction = None if min_fraction is None else float(min_fraction)
    return ladder.judge_step(dict(step), dict(outputs), dict(gpu_facts), dict(comm_facts), fraction, dict(cleanup or {}),
                             None if min_busbw_gbps is None else float(min_busbw_gbps),
                             None if outlier_fraction is None else float(outlier_fraction))


def verify_network(matrix, nodes):
    return ladder.network_verdict(dict(matrix), list(nodes))


def verify_bisect_rounds(nodes, verdicts):
    return bisect.rounds(list(nodes), list(verdicts))


def verify_bisect_next(nodes, verdicts, gpus, settings, number):
    return bisect.next_round(list(nodes), list(verdicts), dict(gpus), dict(settings), int(number))


def verify_bisect_found(nodes, verdicts):
    return bisect.found_verdict(list(nodes), list(verdicts))


def verify_rows(verdicts):
    return ladder.report_rows(list(verdicts))


class FilterModule:
    def filters(self):
        return {"verify_plan": verify_plan, "verify_judge": verify_judge, "verify_network": verify_network, "verify_rows": verify_rows,
                "verify_bisect_rounds": verify_bisect_rounds, "verify_bisect_next": verify_bisect_next,
                "verify_bisect_found": verify_bisect_found}
