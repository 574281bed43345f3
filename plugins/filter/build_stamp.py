# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Build stamp filters; documentation lives in build_stamp_differences.yml next to this file."""

from __future__ import annotations

from ansible_collections.trainops.cluster.plugins.plugin_utils import build_stamp


def build_stamp_differences(built, needed):
    return build_stamp.differences(built, needed)


class FilterModule:
    def filters(self):
        return {"build_stamp_differences": build_stamp_differences}
