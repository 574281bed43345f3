# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Rewrite /etc/hosts text so every cluster name resolves to its training address, as a pure function.

Node side: shipped to the nodes inside the module that imports it (etc_hosts).
"""

from __future__ import annotations

from typing import Any

BEGIN = "# BEGIN trainops.cluster nodes (managed by Ansible, do not edit)"
END = "# END trainops.cluster nodes"


def _drop_names(line: str, cluster: dict[str, str]) -> str | None:
    """Remove from one hosts line the cluster names it maps to another address; None when no name is left."""
    content, sep, comment = line.partition("#")
    fields = content.split()
    if len(fields) < 2:
        return line
    address, aliases = fields[0], fields[1:]
    kept = [a for a in aliases if cluster.get(a.lower(), address) == address]
    if kept == aliases:
        return line
    if not kept:
        return None
    return "\t".join([address] + kept) + ((" " + sep + comment) if sep else "")


def render(text: str, entries: list[dict[str, Any]]) -> str:
    """Return new /etc/hosts text.

    entries: [{"ip", "names": [..]}] in a stable (rank) order, written as one marked block.
    Outside the block, a cluster name mapped to any other address is removed from its line: a stale or
    conflicting entry cannot shadow the block, and no node's own name resolves to 127.0.1.1 (torchrun and
    NCCL would bind loopback). Other lines are kept as they are.
    """
    cluster = {name.lower(): entry["ip"] for entry in entries for name in entry["names"]}
    kept: list[str] = []
    inside = False
    for line in text.splitlines():
        if line.strip() == BEGIN:
            inside = True
        elif line.strip() == END:
            inside = False
        elif not inside:
            left = _drop_names(line, cluster)
            if left is not None:
                kept.append(left)
    while kept and not kept[-1].strip():
        kept.pop()

    block = [BEGIN] + ["%s\t%s" % (e["ip"], " ".join(e["names"])) for e in entries] + [END]
    return "\n".join(kept + ([""] if kept else []) + block) + "\n"
