# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""`dcgmi diag -r LEVEL -j` read: one entry per test and GPU (or per test, where DCGM names no GPU), with its status,
DCGM's warnings and its info lines. Read, not judged: plugin_utils/dcgm_diag.py judges.

dcgmi prints two shapes: DCGM 3.x under "DCGM GPU Diagnostic" (a result's GPUs in "gpu_ids", a number or a string of
numbers; "info" a string; "warnings" strings or objects), DCGM 4.x under "DCGM Diagnostic" (a result per entity:
"entity_group", "entity_id"; a "test_summary" per test; "metadata" beside it with the version and the driver).

Node side: shipped with the module dcgm_diag; standard library only.
"""

from __future__ import annotations

import json
from typing import Any

# DCGM's words for a status, lower-cased. A word not here is "not run": an unknown status is never read as a pass.
_WORDS = {"pass": "pass", "passed": "pass", "fail": "fail", "failed": "fail", "warn": "warn", "warning": "warn",
          "skip": "skip", "skipped": "skip", "not run": "not run", "notrun": "not run"}
_ROOTS = ("DCGM Diagnostic", "DCGM GPU Diagnostic")


def status(word: object) -> str:
    """pass, fail, warn, skip or not run from DCGM's word ("Pass", "PASS", "Skip"); anything else is not run."""
    return _WORDS.get(str(word or "").strip().lower(), "not run")


def _strings(value: object) -> list[str]:
    """A field that is a string, a list of strings, or a list of {"warning": str, ...} (DCGM 4.x, some 3.x), as
    strings; empty ones dropped."""
    items = value if isinstance(value, list) else [value]
    out = []
    for item in items:
        text = item.get("warning") if isinstance(item, dict) else item
        if text is not None and str(text).strip():
            out.append(str(text).strip())
    return out


def _gpus(result: dict) -> list | None:
    """The GPU indexes a result is about: DCGM 4.x's GPU entity, DCGM 3.x's gpu_ids (0, "0" or "0,1"); None where the
    result names none (a test of the whole node, as 3.x's Deployment tests)."""
    if "entity_id" in result:
        group = str(result.get("entity_group") or "GPU")
        return [int(result["entity_id"])] if group.upper() == "GPU" and _is_int(result["entity_id"]) else None
    ids = result.get("gpu_ids")
    if isinstance(ids, int) and not isinstance(ids, bool):
        return [ids]
    parts = [part.strip() for part in str(ids if ids is not None else "").split(",") if part.strip()]
    return [int(part) for part in parts] if parts and all(part.isdigit() for part in parts) else None


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) or isinstance(value, str) and value.strip().isdigit()


def _entry(category: str, name: str, result: dict, gpus: list | None) -> dict:
    return {"category": category, "name": name, "gpus": gpus, "status": status(result.get("status")),
            "warnings": _strings(result.get("warnings") or []), "info": _strings(result.get("info") or [])}


def _test(category: str, test: dict) -> list:
    """A test's entries: one per result; its summary (4.x) where it has no result, or where it says fail and no
    result does (a test-wide failure is not lost)."""
    name = str(test.get("name") or "?")
    entries = [_entry(category, name, r, _gpus(r)) for r in test.get("results") or [] if isinstance(r, dict)]
    summary = test.get("test_summary")
    if isinstance(summary, dict):
        whole = _entry(category, name, summary, None)
        if not entries or whole["status"] == "fail" and all(e["status"] != "fail" for e in entries):
            entries.append(whole)
    if not entries:
        entries.append(_entry(category, name, {}, None))
    return entries


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "(nothing)")


def _document(text: str) -> Any:
    """The JSON document after any banner ("Successfully ran diagnostic for group."), or None."""
    start = text.find("{")
    if start < 0:
        return None
    try:
        return json.JSONDecoder().raw_decode(text[start:])[0]
    except ValueError:
        return None


def parse(text: str) -> dict:
    """{version, driver, runtime_error, tests: [{category, name, gpus (ints, or None: the whole node), status,
    warnings, info}]} from dcgmi diag -j's output, or {error: the output's first line} where it holds no diagnostic."""
    document = _document(text or "")
    root = next((document[key] for key in _ROOTS if isinstance(document, dict) and isinstance(document.get(key), dict)), None)
    if root is None:
        return {"error": "no DCGM diagnostic in dcgmi's output: %s" % _first_line(text or "")}
    metadata = document.get("metadata") if isinstance(document.get("metadata"), dict) else {}
    tests = []
    for category in root.get("test_categories") or []:
        if not isinstance(category, dict):
            continue
        for test in category.get("tests") or []:
            # dcgmi has printed null entries inside a tests list.
            if isinstance(test, dict):
                tests += _test(str(category.get("category") or "?"), test)
    return {"version": metadata.get("version") or root.get("version"),
            "driver": metadata.get("Driver Version Detected") or root.get("Driver Version Detected"),
            "runtime_error": root.get("runtime_error") or None, "tests": tests}
