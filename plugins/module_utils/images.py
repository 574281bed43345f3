# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Container image references and inspection output, as pure functions."""

from __future__ import annotations

import json


def split_reference(ref):
    """'repo[:tag][@sha256:x]' -> (repo, tag or None, digest or None); a registry port is not a tag."""
    name, _sep, digest = ref.partition("@")
    slash = name.rfind("/")
    colon = name.rfind(":")
    tag = None
    if colon > slash:
        name, tag = name[:colon], name[colon + 1:]
    return name, tag, digest or None


def pinned(repo, digest):
    return "%s@%s" % (repo, digest)


def parse_inspect(text):
    """`docker|podman image inspect` JSON -> {id, repo_digests, repo_tags} of its first image, or None."""
    try:
        data = json.loads(text or "null")
    except ValueError:
        return None
    if not data:
        return None
    image = data[0]
    image_id = image.get("Id") or image.get("ID") or ""
    if image_id and not image_id.startswith("sha256:"):
        image_id = "sha256:" + image_id
    return {"id": image_id, "repo_digests": image.get("RepoDigests") or [], "repo_tags": image.get("RepoTags") or []}


def digest_for(image, repo):
    """The registry digest of `repo` among an inspected image's RepoDigests, or None."""
    for item in image.get("repo_digests") or []:
        name, _tag, digest = split_reference(item)
        if name == repo and digest:
            return digest
    return None


def odd_nodes(ids_by_node):
    """Nodes whose image ID is not the most common one (every node when there is no majority)."""
    counts = {}
    for image_id in ids_by_node.values():
        counts[image_id] = counts.get(image_id, 0) + 1
    if len(counts) <= 1:
        return []
    best = max(counts.values())
    winners = [i for i, n in counts.items() if n == best]
    if len(winners) > 1:
        return sorted(ids_by_node)
    return sorted(node for node, image_id in ids_by_node.items() if image_id != winners[0])
