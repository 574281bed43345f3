# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Read the result of ``all_reduce_perf -h``: whether the binary runs on this node, and whether it takes ``-J``.

The usage text followed is that of nccl-tests 2.19.6 (src/common.cu).

Node side: shipped to the nodes inside the module that imports it (nccl_tests_state).
"""

from __future__ import annotations

import re

# The usage line of -J; a "--output_file" alone is not enough, as builds exist whose -F,--output_file writes CSV.
_JSON_OPTION_RE = re.compile(r'-J,\s*--output_file\b')


def help_supports_json(text: str | None) -> bool:
    """``all_reduce_perf -h`` output -> whether the binary takes ``-J <file>`` (results as JSON)."""
    return bool(_JSON_OPTION_RE.search(text or ''))


def help_problem(rc: int, output: str | None, timed_out: bool, timeout: float) -> str | None:
    """Result of ``all_reduce_perf -h`` -> None when the binary ran, else why not, in one line.

    nccl-tests prints its usage and returns 0 for -h, before it starts MPI or CUDA; 1 is taken as fine too. Anything
    else (127 for a library the loader cannot find, a signal) means the binary cannot run on this node.
    """
    if timed_out:
        return '-h did not finish within %d s' % timeout
    if rc in (0, 1):
        return None
    lines = [line.strip() for line in (output or '').splitlines() if line.strip()]
    return 'exited with rc %d%s' % (rc, ': ' + lines[-1][:300] if lines else ' and printed nothing')
