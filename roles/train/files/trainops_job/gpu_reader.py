# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Every GPU's load now, as the runner's sampler reads it at each look: nvidia-smi's query (_gpu_load.command), parsed."""

from __future__ import annotations

import subprocess

from ._gpu_load import REASON_FIELDS, command, parse

TIMEOUT = 5.0


class Reader:
    """One look at every GPU of the node (nvidia-smi at `tool`): parse's list, or None where it could not be read. An
    nvidia-smi that does not answer within `timeout` (a GPU fallen off the bus leaves it stuck in the kernel) is killed,
    not waited for, and the GPUs are not read again in this attempt: the runner's loop must go on."""

    def __init__(self, tool: str, timeout: float = TIMEOUT):
        self.tool, self.timeout, self.reasons = tool, timeout, REASON_FIELDS[0]
        self.off: str | None = None

    def _run(self) -> tuple:
        """(exit status, output) of the query, or (None, why) where it could not run or did not end in time."""
        try:
            process = subprocess.Popen(command(self.tool, self.reasons), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        except OSError as error:
            return None, str(error)
        try:
            out = process.communicate(timeout=self.timeout)[0]
        except subprocess.TimeoutExpired:
            process.kill()
            self.off = "nvidia-smi did not answer within %g s" % self.timeout
            return None, self.off
        return process.returncode, out

    def __call__(self) -> list | None:
        for dummy in REASON_FIELDS:
            if self.off:
                return None
            rc, out = self._run()
            if rc == 0:
                return parse(out)
            if rc is None or "not a valid field" not in out.lower() or self.reasons == REASON_FIELDS[-1]:
                return None
            self.reasons = REASON_FIELDS[-1]  # a driver before 535: the older name, from now on
        return None
