# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The verify ladder's runs, read on the node that ran them: nccl-tests' all_reduce_perf output (text, JSON, -h), the
CPU rung's, NCCL's debug log and the launchers' line prefixes. Their verdicts are in plugin_utils/nccl_tests/.

Node side: shipped to the nodes inside the modules that import from it (allreduce_run, nccl_tests_state, torchrun_run).
"""
