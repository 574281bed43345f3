#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: end_run
short_description: End every process of one run on this node, found by a marker in its environment
version_added: 0.1.0
author:
  - trainops.cluster maintainers (@trainops)
description:
  - Finds the processes whose environment holds O(variable)=O(run_id) (the verify and torchrun roles export it to
    every rank, inside containers too), sends the run's own processes SIGTERM (and SIGCONT), then SIGKILL to what is
    left of them after O(grace) seconds, and says what it found, what needed SIGKILL and what survived that a second
    later (a process stuck in the kernel, on a GPU that fell off the bus say).
  - Only processes of that run are touched, so another job of the same user goes on. The container engine's processes
    (C(podman), C(conmon), C(docker), C(containerd-shim), C(fuse-overlayfs), the OCI runtime) are left alone while the
    run's own end, since the container's files and network must stay until its last process has ended; they end
    with their container. What of the engine is left 5 seconds after that gets SIGKILL.
options:
  run_id:
    description: The run's marker value.
    type: str
    required: true
  variable:
    description: The environment variable that carries the marker.
    type: str
    default: TRAINOPS_RUN_ID
  grace:
    description: Seconds between SIGTERM and SIGKILL.
    type: float
    default: 5.0
extends_documentation_fragment:
  - trainops.cluster.attributes
attributes:
  check_mode:
    support: full
    description: Check mode finds the processes and reports them as changed, and signals none.
  platform:
    support: full
    platforms: linux
    description: Reads C(/proc) to find the processes.
notes:
  - Run it as the user that owns the run's processes, or as root; others' processes are not readable and are not found.
"""

EXAMPLES = r"""
- name: End what a timed-out run left on its nodes
  trainops.cluster.end_run:
    run_id: "{{ verify_run_id }}"
    grace: 2
  register: cleanup
"""

RETURN = r"""
found:
  description: The run's processes still there when the module looked (zombies left out).
  returned: always
  type: list
  elements: dict
  contains:
    pid: {description: Process id., type: int, sample: 4242}
    state: {description: "From /proc/<pid>/status: running, sleeping, uninterruptible, stopped, traced.", type: str, sample: stopped}
    comm: {description: The process name., type: str, sample: all_reduce_perf}
    parent: {description: Its parent's pid., type: int, sample: 4200}
killed:
  description: Those of RV(found) still there O(grace) seconds after SIGTERM, which then got SIGKILL (same keys).
  returned: always
  type: list
  elements: dict
left:
  description: Those of RV(killed) still there a second after SIGKILL (same keys).
  returned: always
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.trainops.cluster.plugins.module_utils.processes import end_run, find


def main():
    module = AnsibleModule(
        argument_spec=dict(
            run_id=dict(type="str", required=True),
            variable=dict(type="str", default="TRAINOPS_RUN_ID"),
            grace=dict(type="float", default=5.0),
        ),
        supports_check_mode=True,
    )
    run_id, variable, grace = module.params["run_id"], module.params["variable"], module.params["grace"]
    if not run_id:
        module.fail_json(msg="run_id must not be empty: it would match no process, or every process with an empty marker")
    if grace < 0:
        module.fail_json(msg="grace must be 0 or more seconds, got %s" % grace)
    if module.check_mode:
        found = find(variable, run_id)
        module.exit_json(changed=bool(found), found=found, killed=[], left=[])
    ended = end_run(variable, run_id, grace=grace)
    module.exit_json(changed=bool(ended["found"]), **ended)


if __name__ == "__main__":
    main()
