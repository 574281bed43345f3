# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Image reference filters; documentation lives in the <filter name>.yml files next to this one."""

from __future__ import annotations

from ansible_collections.trainops.cluster.plugins.module_utils import images


def image_reference(ref):
    repo, tag, digest = images.split_reference(str(ref))
    return {"repo": repo, "tag": tag, "digest": digest}


def image_digest(result, repo):
    return images.digest_for(dict(result), str(repo))


class FilterModule:
    def filters(self):
        return {"image_reference": image_reference, "image_digest": image_digest}
