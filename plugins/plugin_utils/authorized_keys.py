# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The cluster key's earlier versions in an authorized_keys file: after a rotation they must go, the user's own keys stay.

The cluster key is recognised by its comment (user@cluster), which every key the collection generates carries.
"""

from __future__ import annotations

import re

# An OpenSSH key line: [options] type base64 [comment]; options may hold quoted spaces (from="10.0.0.0/24").
_KEY_RE = re.compile(r'(?:^|\s)((?:ssh|ecdsa|sk)-[A-Za-z0-9@.-]+)\s+([A-Za-z0-9+/=]+)(?:\s+(.*))?$')


def _parse(line: str) -> tuple[str, str, str] | None:
    match = _KEY_RE.search(line.strip())
    return (match.group(1), match.group(2), (match.group(3) or "").strip()) if match else None


def stale(authorized: str | None, pubkey: str | None) -> list[str]:
    """The lines of authorized (the file's text) that carry the cluster key's comment but another key: [line]."""
    current = _parse(pubkey or "")
    if not current or not current[2]:
        return []
    found = []
    for line in (authorized or "").splitlines():
        key = _parse(line)
        if key and key[2] == current[2] and key[1] != current[1]:
            found.append(line)
    return found
