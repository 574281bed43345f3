# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Fixed-width text tables, as every stage prints its matrix or verdicts on the controller."""

from __future__ import annotations

from typing import Iterable, Sequence


def cell_text(value: object) -> str:
    # A newline inside a cell would break the grid.
    return " ".join(str(value).splitlines())


def grid_line(cells: Sequence[str], widths: Sequence[int]) -> str:
    return "| " + " | ".join(cell.ljust(width) for cell, width in zip(cells, widths)) + " |"


def render_table(headers: Sequence[object], rows: Sequence[Sequence[object]], highlight: Iterable[Iterable[int]] | None = None,
                 marker: str = "*") -> str:
    """Plain fixed-width text table with a +---+ frame; every line has the same width.

    rows: list of lists of cells (anything, shown with str()); short rows are padded with empty cells.
    highlight: (row_index, column_index) pairs of body cells to suffix with " " + marker.
    """
    marked = set(tuple(pair) for pair in highlight or ())
    width = max([len(headers)] + [len(row) for row in rows])
    if not width:
        return ""
    head = [cell_text(h) for h in headers] + [""] * (width - len(headers))
    body = []
    for r, row in enumerate(rows):
        cells = [cell_text(value) for value in row] + [""] * (width - len(row))
        body.append([cell + " " + marker if (r, c) in marked else cell for c, cell in enumerate(cells)])
    widths = [max(len(line[c]) for line in [head] + body) for c in range(width)]
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    return "\n".join([rule, grid_line(head, widths), rule] + [grid_line(cells, widths) for cells in body] + [rule])
