# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A record of the node program read from its JSON: every key one of the dataclass's fields, of the field's type, none
of those without a default missing (settings.Settings, the job's settings; view.View, the supervisor's view)."""

from __future__ import annotations

import dataclasses
from typing import Any


def checked(cls: Any, data: Any, where: str, unknown: str = "") -> dict[str, Any]:
    """data, a decoded JSON object, checked against the dataclass cls: ValueError naming `where` and the key for a key
    cls does not have (`unknown` says what that means), one it needs and data lacks, or a value of another type."""
    if not isinstance(data, dict):
        raise ValueError("%s: not a JSON object" % where)
    known = {f.name: f for f in dataclasses.fields(cls)}
    strange = sorted(set(data) - set(known))
    if strange:
        said = ", ".join(strange)
        raise ValueError("%s: unknown key%s %s (known: %s)%s" % (
            where, "s" if len(strange) > 1 else "", said, ", ".join(sorted(known)), ": " + unknown if unknown else ""))
    missing = [name for name, f in known.items() if name not in data and f.default is dataclasses.MISSING
               and f.default_factory is dataclasses.MISSING]
    if missing:
        raise ValueError("%s: missing %s" % (where, ", ".join(missing)))
    for name, value in data.items():
        if not _is(value, known[name].type):
            raise ValueError("%s: %s is %r, not a %s" % (where, name, value, _said(known[name].type)))
    return data


# A field's declared type (a string: annotations are not evaluated here, so this runs on the node's Python whatever its
# version) read as the kinds a JSON value may be: "int | None" -> (int, None).
_KINDS: dict[str, Any] = {"str": str, "bool": bool, "int": int, "float": float, "list": list, "dict": dict, "None": None}
_WORDS = {str: "string", bool: "boolean", int: "whole number", float: "number", list: "list", dict: "mapping", None: "null"}


def _kinds(declared: Any) -> list:
    return [_KINDS[part.strip().split("[")[0]] for part in str(declared).split("|")]


def _is(value: Any, declared: Any) -> bool:
    """Whether a decoded JSON value is of a field's declared type (a bool is no number, an int is a float too)."""
    for kind in _kinds(declared):
        if kind is None and value is None or kind is not None and isinstance(value, kind) and not (
                isinstance(value, bool) and kind in (int, float)):
            return True
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            return True
    return False


def _said(declared: Any) -> str:
    """A field's type in words: "number", "list", "string or null"."""
    return " or ".join(_WORDS[kind] for kind in _kinds(declared))
