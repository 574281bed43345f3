# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A unit test's timed step, recorded as the molecule tests record theirs (tests/testbed/testbed_fixtures.py's timed):
`scripts/benchmark --suite-timings` holds the targets and compares; the test fails only on a hang."""

from __future__ import annotations

import json
from pathlib import Path

TIMINGS = Path(__file__).resolve().parents[3] / "tests" / "output" / "timings.jsonl"


def timed(what: str, seconds: float, hang_bound: float) -> None:
    TIMINGS.parent.mkdir(parents=True, exist_ok=True)
    with open(TIMINGS, "a", encoding="utf-8") as log:
        log.write(json.dumps({"scenario": "unit", "what": what, "seconds": round(seconds, 2)}) + "\n")
    assert seconds < hang_bound, "%s took %.1f s, over the never-hang bound of %d s" % (what, seconds, hang_bound)
