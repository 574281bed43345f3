# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The node program's links to plugins/module_utils are the files module_utils' README lists, each one the program
imports: a file linked or unlinked without a word there fails here, and so does one the program no longer needs."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PROGRAM = ROOT / "roles" / "train" / "files" / "trainops_job"
MODULE_UTILS = ROOT / "plugins" / "module_utils"


def linked() -> dict:
    """{name in the program: its file's path under plugins/module_utils}."""
    return {path.name: path.resolve().relative_to(MODULE_UTILS.resolve()).as_posix() for path in sorted(PROGRAM.iterdir()) if path.is_symlink()}


def listed() -> set:
    """The files the README's table names (its first column, `path` and, where renamed, `path` (as `name`))."""
    table = (MODULE_UTILS / "README.md").read_text().split("## Linked into the job runner", 1)[1]
    return {re.match(r"\| `([^`]+)`", line).group(1) for line in table.splitlines() if re.match(r"\| `", line)}


def test_every_link_is_listed_and_every_listed_file_is_linked():
    assert set(linked().values()) == listed()


def test_every_linked_file_is_imported_by_the_program():
    sources = "\n".join(path.read_text() for path in PROGRAM.glob("*.py"))
    for name in linked():
        module = name[:-3]
        assert re.search(r"^from \.(?:%s import |\s*import .*\b%s\b)|^from \. import .*\b%s\b" % (module, module, module), sources, re.M), name
