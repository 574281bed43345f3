# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters of the burn-in; documentation lives in the <filter name>.yml files next to this one."""

from __future__ import annotations

from ansible_collections.trainops.cluster.plugins.plugin_utils import burn_in


def burn_in_verdict(outputs, gpu_facts, outlier_fraction=0.1, dcgm=None, dcgm_level=None):
    return burn_in.verdict(dict(outputs), dict(gpu_facts), float(outlier_fraction), None if dcgm is None else dict(dcgm),
                           None if dcgm_level is None else int(dcgm_level))


class FilterModule:
    def filters(self):
        return {"burn_in_verdict": burn_in_verdict}
