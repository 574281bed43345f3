# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The doctor's verdict; documentation lives in doctor_report.yml next to this file."""

from __future__ import annotations

from ansible_collections.trainops.cluster.plugins.module_utils import doctor


def doctor_report(data):
    return doctor.run_all(dict(data))


class FilterModule:
    def filters(self):
        return {"doctor_report": doctor_report}
