# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What a job in the training image needs of each node, read from the drift report's flat values (drift_keys).

Nodes that agree can still all be unable to run the job: a driver older than the CUDA the image's torch was built
for gives torch no GPU (or none of its newer features), and an image whose LLaMA-Factory finds its own requirements
unmet stops at start on every node. Each finding names the node, what it has and what the job needs.
"""

from __future__ import annotations

import re
from typing import Any

_VERSION_RE = re.compile(r"^\s*(\d+)\.(\d+)")


def _major_minor(text: object) -> tuple[int, int] | None:
    match = _VERSION_RE.match(str(text or ""))
    return (int(match.group(1)), int(match.group(2))) if match else None


def _cuda_finding(host: str, values: dict[str, Any]) -> dict[str, str] | None:
    driver, image = _major_minor(values.get("cuda (driver)")), _major_minor(values.get("image torch cuda"))
    if driver is None or image is None or driver >= image:
        return None
    needs = "%d.%d" % image
    has = "the driver %s runs CUDA up to %d.%d" % (values.get("driver") or "", driver[0], driver[1])
    if driver[0] < image[0]:
        return {"host": host, "severity": "critical",
                "message": "{0}: the image's torch is built for CUDA {1}, but {2}: torch finds no usable GPU there. Install a driver "
                           "for CUDA {1} or later on {0}, or run an image built for CUDA {3}.x.".format(host, needs, has, driver[0])}
    return {"host": host, "severity": "warn",
            "message": "{0}: the image's torch is built for CUDA {1}, but {2}: it runs by CUDA's minor-version compatibility, where "
                       "code compiled at run time for the newer CUDA (PTX) fails. A driver for CUDA {1} on {0} avoids it.".format(host, needs, has)}


def _llamafactory_finding(host: str, values: dict[str, Any]) -> dict[str, str] | None:
    unmet = values.get("image llamafactory unmet")
    if not unmet:
        return None
    return {"host": host, "severity": "warn",
            "message": "{0}: the image's LLaMA-Factory {1} requires {2}: llamafactory-cli checks this at start and stops "
                       "(unless DISABLE_VERSION_CHECK=1). Install those versions in the image.".format(
                           host, values.get("image llamafactory") or "", "; ".join(unmet))}


def check(values_by_host: dict[str, dict[str, Any] | None], hosts: list[str]) -> list[dict[str, str]]:
    """[{host, severity (critical|warn), message}] for every node in `hosts` order."""
    findings: list[dict[str, str]] = []
    for host in hosts:
        values = values_by_host.get(host) or {}
        findings.extend(f for f in (_cuda_finding(host, values), _llamafactory_finding(host, values)) if f)
    return findings


def apply(comparison: dict[str, Any], values_by_host: dict[str, dict[str, Any] | None]) -> dict[str, Any]:
    """drift_compare's result with the findings added: critical ones to errors (the run fails), the rest to warnings."""
    findings = check(values_by_host, comparison["hosts"])
    result = dict(comparison, requirements=findings)
    result["errors"] = comparison["errors"] + [f["message"] for f in findings if f["severity"] == "critical"]
    result["warnings"] = comparison["warnings"] + [f["message"] for f in findings if f["severity"] == "warn"]
    result["failed"] = bool(result["errors"])
    return result
