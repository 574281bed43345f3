# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Container image references and inspection output, as pure functions.

Node side: shipped to the nodes inside the module that imports it (container_image); the filter images uses it on
the controller too.
"""

from __future__ import annotations

import json
from typing import Any


def split_reference(ref: str) -> tuple[str, str | None, str | None]:
    """'repo[:tag][@sha256:x]' -> (repo, tag or None, digest or None); a registry port is not a tag."""
    name, _sep, digest = ref.partition("@")
    slash = name.rfind("/")
    colon = name.rfind(":")
    tag: str | None = None
    if colon > slash:
        name, tag = name[:colon], name[colon + 1:]
    return name, tag, digest or None


def parse_inspect(text: str | None) -> dict[str, Any] | None:
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


def _normal(repo: str) -> str:
    """Docker Hub names as engines write them: 'docker.io/library/ubuntu' and 'ubuntu' are one repository."""
    for prefix in ("docker.io/", "index.docker.io/", "library/"):
        if repo.startswith(prefix):
            repo = repo[len(prefix):]
    return repo


def digest_for(image: dict[str, Any], repo: str) -> str | None:
    """The registry digest of `repo` among an inspected image's RepoDigests (the only one, if there is one), or None."""
    found = [split_reference(item) for item in image.get("repo_digests") or []]
    for name, dummy, digest in found:
        if digest and _normal(name) == _normal(repo):
            return digest
    digests = {digest for dummy, dummy2, digest in found if digest}
    return digests.pop() if len(digests) == 1 else None
