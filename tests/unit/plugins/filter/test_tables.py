# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.trainops.cluster.plugins.filter.tables import FilterModule

FILTERS = FilterModule().filters()


def test_text_table():
    table = FILTERS["text_table"](["from", "n1", "n2"], [["n1", "-", "ok"], ["n2", "FAIL", "-"]], highlight=[[1, 1]], marker="!")
    lines = table.splitlines()
    assert len(set(len(line) for line in lines)) == 1
    assert "FAIL !" in lines[4]


@pytest.mark.parametrize("headers, rows", [
    ("a,b", [["1", "2"]]),
    (["a", "b"], "1,2"),
    (["a", "b"], ["1,2"]),
])
def test_text_table_rejects_strings(headers, rows):
    with pytest.raises(AnsibleFilterError, match="text_table"):
        FILTERS["text_table"](headers, rows)
