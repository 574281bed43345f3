# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters of the acceptance record; documentation lives in the <filter name>.yml files next to this one."""

from __future__ import annotations

from ansible_collections.trainops.cluster.plugins.plugin_utils import acceptance


def acceptance_record(nodes, gpu_facts, burn_in, ladder, date):
    return acceptance.record(list(nodes), dict(gpu_facts), dict(burn_in or {}), list(ladder or []), str(date))


class FilterModule:
    def filters(self):
        return {"acceptance_record": acceptance_record}
