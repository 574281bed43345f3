# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The attributes that the collection's modules share; a module states only where it differs."""

from __future__ import annotations


class ModuleDocFragment:
    # Most modules only look at the node: check mode runs them as they are, and there is nothing to diff.
    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    support: full
    description: It only reads the node, so check mode runs it unchanged, and it reports no change.
  diff_mode:
    support: none
    description: It writes no file, so there is no diff.
  platform:
    support: full
    platforms: posix
    description: Linux nodes.
"""

    # Action plugins that write a file on the controller (reports): no module runs on the nodes.
    CONTROLLER = r"""
options: {}
attributes:
  action:
    support: full
    description: All the work is done by the action plugin on the controller; there is no module code.
  check_mode:
    support: full
    description: Reports whether the file would change and writes nothing.
  diff_mode:
    support: none
    description: Shows no diff; reports are often large and change on every run.
  platform:
    support: full
    platforms: posix
    description: Writes on a POSIX controller; targets of any platform are never contacted.
"""

    # Fact modules.
    FACTS = r"""
options: {}
attributes:
  facts:
    support: full
    description: Returns C(ansible_facts), which update the node's facts.
"""
