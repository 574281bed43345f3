# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A value as nvidia-smi prints it, read: its placeholders ("N/A", "[Not Supported]") as None, the integer in front of
"143771 MiB", an element's text in `nvidia-smi -q -x`.

Node side: imported by gpu.py and _gpu_health.py (the module gpu_facts; the job runner, whose trainops_job links
these files); standard library only.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

UNSET = frozenset(("", "n/a", "[n/a]", "not supported", "[not supported]", "unknown error", "[unknown error]"))


def value(text: str | None) -> str | None:
    """Stripped text, or None for nvidia-smi's "N/A"-style placeholders."""
    if text is None:
        return None
    text = text.strip()
    return None if text.lower() in UNSET else text


def int_prefix(text: str | None) -> int | None:
    """Leading integer of "143771 MiB" style values, None if there is none."""
    text = value(text)
    match = re.match(r"\d+", text) if text else None
    return int(match.group(0)) if match else None


def xml_text(element: ET.Element, path: str) -> str | None:
    found = element.find(path)
    return value(found.text) if found is not None else None
