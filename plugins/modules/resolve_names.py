#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: resolve_names
short_description: Resolve host names on a node the way its programs do, and report its own hostname
version_added: 0.1.0
author: trainops.cluster maintainers (@trainops)
description:
  - Resolves every name in O(names) with the node's resolver (C(getaddrinfo), so C(/etc/hosts) and then DNS as
    C(nsswitch.conf) orders them), in one pass, and returns the first address of each, or null.
  - Also returns the node's hostname, so duplicate hostnames across nodes can be found.
options:
  names:
    description: Names to resolve.
    type: list
    elements: str
    required: true
  family:
    description: Address family to ask for.
    type: str
    choices: [ipv4, ipv6, any]
    default: ipv4
extends_documentation_fragment:
  - trainops.cluster.attributes
"""

EXAMPLES = r"""
- name: How does every node resolve every node's name?
  trainops.cluster.resolve_names:
    names: [node1, node2, node3]
  register: resolved
"""

RETURN = r"""
addresses:
  description: Name to its first address, null when it does not resolve.
  returned: always
  type: dict
  sample: {node1: 10.72.0.11, node2: null}
hostname:
  description: The node's hostname.
  returned: always
  type: str
  sample: node1
"""

import socket

from ansible.module_utils.basic import AnsibleModule

FAMILIES = {"ipv4": socket.AF_INET, "ipv6": socket.AF_INET6, "any": socket.AF_UNSPEC}


def resolve(name, family):
    try:
        infos = socket.getaddrinfo(name, None, family, socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        return None
    return infos[0][4][0] if infos else None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            names=dict(type="list", elements="str", required=True),
            family=dict(type="str", choices=list(FAMILIES), default="ipv4"),
        ),
        supports_check_mode=True,
    )
    family = FAMILIES[module.params["family"]]
    module.exit_json(changed=False, hostname=socket.gethostname(),
                     addresses=dict((name, resolve(name, family)) for name in module.params["names"]))


if __name__ == "__main__":
    main()
