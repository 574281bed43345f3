# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
import pytest

from ansible_collections.trainops.cluster.plugins.module_utils import images

DIGEST = "sha256:" + "ab" * 32


@pytest.mark.parametrize("ref, expected", [
    ("repo/train:1", ("repo/train", "1", None)),
    ("10.0.0.1:5000/train", ("10.0.0.1:5000/train", None, None)),
    ("10.0.0.1:5000/train:2@" + DIGEST, ("10.0.0.1:5000/train", "2", DIGEST)),
    ("train@" + DIGEST, ("train", None, DIGEST)),
])
def test_split_reference(ref, expected):
    assert images.split_reference(ref) == expected


def test_parse_inspect_docker_and_podman():
    docker = '[{"Id": "sha256:11", "RepoDigests": ["r/t@%s"], "RepoTags": ["r/t:1"]}]' % DIGEST
    assert images.parse_inspect(docker) == {"id": "sha256:11", "repo_digests": ["r/t@" + DIGEST], "repo_tags": ["r/t:1"]}
    podman = '[{"Id": "22", "Digest": "sha256:x", "RepoDigests": null, "RepoTags": null}]'
    assert images.parse_inspect(podman) == {"id": "sha256:22", "repo_digests": [], "repo_tags": []}
    assert images.parse_inspect("[]") is None and images.parse_inspect("Error: no such image") is None


def test_digest_for():
    image = {"repo_digests": ["other/x@sha256:00", "10.0.0.1:5000/train@" + DIGEST]}
    assert images.digest_for(image, "10.0.0.1:5000/train") == DIGEST
    assert images.digest_for(image, "train") is None
    assert images.digest_for({"repo_digests": ["docker.io/library/ubuntu@" + DIGEST]}, "ubuntu") == DIGEST
    assert images.digest_for({"repo_digests": ["docker.io/pytorch/pytorch@" + DIGEST]}, "pytorch/pytorch") == DIGEST
    assert images.digest_for({"repo_digests": ["mirror.local/pytorch@" + DIGEST]}, "pytorch/pytorch") == DIGEST  # the only one
