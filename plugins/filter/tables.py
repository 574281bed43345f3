# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The text table filter; documentation lives in text_table.yml next to this file."""

from __future__ import annotations

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.trainops.cluster.plugins.plugin_utils import tables


def text_table(headers, rows, highlight=None, marker="*"):
    if isinstance(headers, (str, Mapping)) or isinstance(rows, (str, Mapping)):
        raise AnsibleFilterError("text_table expects a list of headers and a list of rows (lists of cells)")
    if any(isinstance(row, (str, Mapping)) for row in rows):
        raise AnsibleFilterError("text_table rows must be lists of cells")
    return tables.render_table(list(headers), [list(row) for row in rows], highlight=highlight, marker=marker)


class FilterModule:
    def filters(self):
        return {"text_table": text_table}
