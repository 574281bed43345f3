#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: etc_hosts
short_description: Make every cluster node's name resolve to its training address in /etc/hosts
version_added: 0.1.0
author: trainops.cluster maintainers (@trainops)
description:
  - Writes one marked block with every cluster node's address and names, in the order given, so a re-run
    changes nothing.
  - Outside the block, removes any cluster name that another line maps to a different address. That drops
    stale entries of nodes that left the inventory, conflicting manual entries, and the C(127.0.1.1 <hostname>)
    line that installers add, which makes torchrun and NCCL bind to loopback.
  - Other lines are kept as they are.
options:
  path:
    description: The hosts file to manage.
    type: path
    default: /etc/hosts
  nodes:
    description:
      - The cluster's nodes in rank order, as records of P(trainops.cluster.cluster_nodes#filter).
      - Each needs C(cluster_ip) and C(names) (the canonical name first); other keys are ignored.
    type: list
    elements: dict
    required: true
extends_documentation_fragment:
  - trainops.cluster.attributes
attributes:
  check_mode:
    support: full
    description: Reports the change it would make without writing.
  diff_mode:
    support: full
    description: Shows the hosts file before and after.
notes:
  - The file is replaced atomically. In containers, /etc/hosts must not be a bind mount (podman C(--no-hosts)).
"""

EXAMPLES = r"""
- name: Map every node's name to its training address
  trainops.cluster.etc_hosts:
    nodes: "{{ hostvars | trainops.cluster.cluster_nodes(groups['cluster']) }}"
"""

RETURN = r"""
entries:
  description: Number of node entries in the managed block.
  returned: always
  type: int
  sample: 3
"""

import os
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.trainops.cluster.plugins.module_utils.hosts_file import render


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", default="/etc/hosts"),
            nodes=dict(type="list", elements="dict", required=True),
        ),
        supports_check_mode=True,
    )
    path = module.params["path"]
    bad = [str(n.get("host", n)) for n in module.params["nodes"] if not n.get("cluster_ip") or not n.get("names")]
    if bad:
        module.fail_json(msg="nodes without cluster_ip or names: %s" % ", ".join(bad))
    entries = [{"ip": n["cluster_ip"], "names": n["names"]} for n in module.params["nodes"]]
    before = ""
    if os.path.exists(path):
        with open(path) as f:
            before = f.read()
    after = render(before, entries)
    changed = after != before
    result = dict(changed=changed, entries=len(entries))
    if module._diff:
        result["diff"] = dict(before=before, after=after, before_header=path, after_header=path)
    if changed and not module.check_mode:
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=".hosts.")
        with os.fdopen(fd, "w") as f:
            f.write(after)
        os.chmod(tmp, 0o644)
        module.atomic_move(tmp, path)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
