#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: stack_access
short_description: Whether this node's root can read the Python stacks of the training user's processes
version_added: 0.1.0
author:
  - trainops.cluster maintainers (@trainops)
description:
  - A stall's diagnosis (role trainops.cluster.train) reads every rank's Python stack with py-spy, as root, from the
    rank's memory; the kernel allows that only where root holds CAP_SYS_PTRACE (container instances are often started
    without it) and Yama's C(kernel.yama.ptrace_scope) is below 3.
  - Reads both, says what to grant where either stands in the way, and where py-spy is installed (O(py_spy)) tries it on
    a sleeping Python process of O(user), as the ranks run.
options:
  user:
    description: The user the ranks run as (the training user); the trial's process runs as it.
    type: str
    required: true
  py_spy:
    description: py-spy's path (train.yml's start installs it there); not tried where it is missing.
    type: path
    default: /opt/trainops/tools/bin/py-spy
extends_documentation_fragment:
  - trainops.cluster.attributes
attributes:
  check_mode:
    support: full
    description: Reads and tries only; the trial's process is its own and ends with it.
  platform:
    support: full
    platforms: linux
    description: Reads C(/proc).
"""

EXAMPLES = r"""
- name: Can a stall's diagnosis read the ranks' stacks here?
  trainops.cluster.stack_access:
    user: train
  register: stacks
"""

RETURN = r"""
ptrace_scope:
  description: Yama's kernel.yama.ptrace_scope (0 to 3), or null where the kernel has no Yama.
  returned: always
  type: int
  sample: 1
cap_sys_ptrace:
  description: Whether this process (root, as the diagnosis runs) holds CAP_SYS_PTRACE; null where /proc does not say.
  returned: always
  type: bool
  sample: false
grant:
  description: What to grant so that root reads the ranks' stacks, or null where nothing stands in the way.
  returned: always
  type: str
  sample: "root here lacks CAP_SYS_PTRACE (a container started without it): start the node's container with --cap-add SYS_PTRACE"
tried:
  description: Whether py-spy was tried (it is installed at O(py_spy)).
  returned: always
  type: bool
error:
  description: Why py-spy could not read the trial's stack (its own last line), or null where it did or was not tried.
  returned: always
  type: str
  sample: "Error: Permission denied (os error 13)"
"""

import os
import pwd

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.trainops.cluster.plugins.module_utils._ptrace import access, grant, trial


def main():
    module = AnsibleModule(argument_spec=dict(user=dict(type="str", required=True),
                                              py_spy=dict(type="path", default="/opt/trainops/tools/bin/py-spy")),
                           supports_check_mode=True)
    try:
        user = pwd.getpwnam(module.params["user"])
    except KeyError:
        module.fail_json(msg="no user %s on this node (the training user: run site.yml's cluster_user stage)" % module.params["user"])
    found = access()
    tried = os.access(module.params["py_spy"], os.X_OK)
    error = trial(module.params["py_spy"], module.run_command, (user.pw_uid, user.pw_gid)) if tried else None
    module.exit_json(changed=False, grant=grant(found), tried=tried, error=error, **found)


if __name__ == "__main__":
    main()
