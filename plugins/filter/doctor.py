# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The doctor's filters; documentation lives in the <filter name>.yml files next to this one."""

from __future__ import annotations

from ansible_collections.trainops.cluster.plugins.plugin_utils import df, doctor


def doctor_report(data):
    return doctor.run_all(dict(data))


def stack_notes(found):
    """One line per node whose ranks' stacks a stall's diagnosis cannot read: {node: stack_access's result}."""
    return ["%s: %s. %s" % (f["node"], f["detail"], f["fix"]) for node, facts in dict(found).items()
            for f in doctor.stacks(node, facts) if f["status"] != "ok"]


def df_usage(text):
    return df.usage(text)


class FilterModule:
    def filters(self):
        return {"doctor_report": doctor_report, "df_usage": df_usage, "stack_notes": stack_notes}
