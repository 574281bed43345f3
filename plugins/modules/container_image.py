#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: container_image
short_description: Make one exact container image present, from a registry or an archive, with docker or podman
version_added: 0.1.0
author: trainops.cluster maintainers (@trainops)
description:
  - Ensures that O(name) is present on the node, pulling it from its registry or loading it from O(archive), and
    reports its image ID and registry digests, so that a play can compare nodes.
  - A reference pinned by digest (C(repo@sha256:...)) is immutable, so a node that has it is never pulled again.
    A tag is pulled every time (it may have moved); pin by digest to make runs repeatable.
  - With O(expected_id), an image of another ID under O(name) is replaced (pulled or loaded again), and with
    O(tag) the tag is moved to this image when it points elsewhere; both are reported with the previous ID.
  - Uses the engine's command line, which docker and podman share for these operations.
options:
  engine:
    description: Container engine.
    type: str
    choices: [docker, podman]
    default: podman
  name:
    description: Image reference, C(repo@sha256:...) (recommended), C(repo:tag), or the name inside O(archive).
    type: str
    required: true
  source:
    description: Where the image comes from.
    type: str
    choices: [registry, archive]
    default: registry
  archive:
    description: Image archive on the node (C(docker save) / C(podman save) output) for O(source=archive).
    type: path
  expected_id:
    description: The image ID every node must end up with (C(sha256:...)).
    type: str
  tag:
    description: A local tag (such as the C(repo:tag) that was pinned) that must point to this image.
    type: str
  insecure:
    description: Pull over plain HTTP or without TLS verification (podman; docker takes this from its daemon configuration).
    type: bool
    default: false
  timeout:
    description: Seconds a pull or load may take.
    type: int
    default: 1800
extends_documentation_fragment:
  - trainops.cluster.attributes
attributes:
  check_mode:
    support: full
    description: Reports what would be pulled, loaded or re-tagged without doing it.
  diff_mode:
    support: none
    description: No diff; the previous and new image IDs are returned.
  platform:
    support: full
    platforms: posix
    description: Needs the C(docker) or C(podman) command.
"""

EXAMPLES = r"""
- name: The pinned training image on every node
  trainops.cluster.container_image:
    engine: docker
    name: registry.example.com/team/train@sha256:4f5e...
    tag: registry.example.com/team/train:2026-11
  register: image

- name: Air-gapped, from the shared storage
  trainops.cluster.container_image:
    name: localhost/train:2026-11
    source: archive
    archive: /mnt/shared/images/train-2026-11.tar
"""

RETURN = r"""
id:
  description: Image ID (C(sha256:) of its configuration) after the task.
  returned: success
  type: str
  sample: sha256:1b4c...
repo_digests:
  description: Registry digests of the image.
  returned: success
  type: list
  elements: str
  sample: [registry.example.com/team/train@sha256:4f5e...]
action:
  description: What was done, C(present), C(pulled), C(loaded) or C(retagged) (in check mode, what would be done).
  returned: always
  type: str
  sample: pulled
previous_id:
  description: Image ID under O(name) (or O(tag), when re-tagged) before the task, null when there was none.
  returned: always
  type: str
  sample: null
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.trainops.cluster.plugins.module_utils.command import run_bounded
from ansible_collections.trainops.cluster.plugins.module_utils.images import parse_inspect, split_reference

INSPECT_TIMEOUT = 60


class Engine:
    def __init__(self, module):
        self.module = module
        self.exe = module.get_bin_path(module.params["engine"], required=True)

    def run(self, args, timeout=INSPECT_TIMEOUT):
        rc, out, err, timed_out = run_bounded(self.module, [self.exe] + args, timeout)
        if timed_out:
            self.module.fail_json(msg="%s %s timed out after %ss" % (self.module.params["engine"], " ".join(args), timeout))
        return rc, out, err

    def inspect(self, ref):
        rc, out, dummy = self.run(["image", "inspect", ref])
        return parse_inspect(out) if rc == 0 else None

    def must(self, args, timeout):
        rc, out, err = self.run(args, timeout)
        if rc != 0:
            self.module.fail_json(msg="%s %s failed: %s" % (self.module.params["engine"], " ".join(args), (err or out).strip()))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            engine=dict(type="str", choices=["docker", "podman"], default="podman"),
            name=dict(type="str", required=True),
            source=dict(type="str", choices=["registry", "archive"], default="registry"),
            archive=dict(type="path"),
            expected_id=dict(type="str"),
            tag=dict(type="str"),
            insecure=dict(type="bool", default=False),
            timeout=dict(type="int", default=1800),
        ),
        required_if=[("source", "archive", ["archive"])],
        supports_check_mode=True,
    )
    p = module.params
    engine = Engine(module)
    verb = "pulled" if p["source"] == "registry" else "loaded"
    before = engine.inspect(p["name"])
    image = before
    result = dict(changed=False, action="present", previous_id=before["id"] if before else None)
    stale = before is None or bool(p["expected_id"] and before["id"] != p["expected_id"])
    # A tag may have moved in the registry, so it is always pulled; a digest or a loaded image is checked locally.
    if stale or (p["source"] == "registry" and split_reference(p["name"])[2] is None):
        if module.check_mode:
            if stale:
                result.update(changed=True, action=verb)
        else:
            if p["source"] == "registry":
                tls = ["--tls-verify=false"] if p["insecure"] and p["engine"] == "podman" else []
                engine.must(["pull"] + tls + [p["name"]], p["timeout"])
            else:
                engine.must(["load", "-i", p["archive"]], p["timeout"])
            image = engine.inspect(p["name"])
            if image is None:
                module.fail_json(msg="%s is not present after it was %s" % (p["name"], verb), **result)
            if p["expected_id"] and image["id"] != p["expected_id"]:
                module.fail_json(msg="%s is %s here, not the expected %s" % (p["name"], image["id"], p["expected_id"]), **result)
            if before is None or image["id"] != before["id"]:
                result.update(changed=True, action=verb)
    if p["tag"] and image:
        tagged = engine.inspect(p["tag"])
        if tagged is None or tagged["id"] != image["id"]:
            result.update(changed=True, action="retagged" if result["action"] == "present" else result["action"],
                          previous_id=tagged["id"] if tagged else result["previous_id"])
            if not module.check_mode:
                engine.must(["tag", image["id"], p["tag"]], INSPECT_TIMEOUT)
    if image:
        result.update(id=image["id"], repo_digests=image["repo_digests"])
    module.exit_json(**result)


if __name__ == "__main__":
    main()
