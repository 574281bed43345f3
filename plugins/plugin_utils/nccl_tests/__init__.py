# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The verify ladder on the controller: its plan and command lines, the link limits, and each rung's verdict, from what
module_utils/nccl_tests/ read on the nodes.

Controller side: imported by the filters of the verify ladder (plugins/filter/verify.py); never shipped to a node.
"""
