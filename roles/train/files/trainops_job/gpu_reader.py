# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Every GPU's load now, as the runner's sampler reads it at each look: nvidia-smi's query (_gpu_load.command), parsed."""

from __future__ import annotations

import subprocess

from ._gpu_load import REASON_FIELDS, command, parse

TIMEOUT = 5.0


class Reader:
    """One look at every GPU of the node (nvidia-smi at `tool`): parse's list, or None where it could not be read."""

    def __init__(self, tool: str, timeout: float = TIMEOUT):
        self.tool, self.timeout, self.reasons = tool, timeout, REASON_FIELDS[0]

    def __call__(self) -> list | None:
        for dummy in REASON_FIELDS:
            try:
                run = subprocess.run(command(self.tool, self.reasons), capture_output=True, text=True, timeout=self.timeout, check=False)
            except (OSError, subprocess.TimeoutExpired):
                return None
            if run.returncode == 0:
                return parse(run.stdout)
            if "not a valid field" not in (run.stdout + run.stderr).lower() or self.reasons == REASON_FIELDS[-1]:
                return None
            self.reasons = REASON_FIELDS[-1]  # a driver before 535: the older name, from now on
        return None
