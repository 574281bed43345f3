#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: dcgm_diag
short_description: Run NVIDIA DCGM's own diagnostic (dcgmi diag) at a chosen level and read its tests
version_added: 0.1.0
author: trainops.cluster maintainers (@trainops)
description:
  - Where C(dcgmi) is on E(PATH), runs C(dcgmi diag -r LEVEL -j) on every GPU of the node, bounded by O(timeout), and
    returns each test's status per GPU with DCGM's warnings and info lines, read from the JSON of DCGM 3.x
    (C(DCGM GPU Diagnostic)) or 4.x (C(DCGM Diagnostic)).
  - Where there is no C(dcgmi), returns RV(found=false) and runs nothing. Where C(dcgmi) printed no diagnostic (no
    C(nv-hostengine) to connect to, a timeout), returns RV(error) with what it printed; the module does not fail
    then, nor when a test fails (C(dcgmi) exits non-zero); the caller judges.
  - Reads only, but loads every GPU for seconds (level 1) to hours (level 4); run it while no job uses them.
options:
  level:
    description: DCGM's run level, 1 (seconds), 2 (about 2 minutes), 3 (about 30 minutes) or 4 (an hour or more).
    type: int
    choices: [1, 2, 3, 4]
    default: 1
  timeout:
    description: Seconds C(dcgmi diag) may take before it is stopped (the default suits levels 1 and 2; the burn-in role passes one per level).
    type: int
    default: 900
extends_documentation_fragment:
  - trainops.cluster.attributes
attributes:
  check_mode:
    support: full
    description: The diagnostic loads the GPUs, so check mode does not run it; it returns RV(ran=false).
notes:
  - C(dcgmi diag) talks to C(nv-hostengine) (the C(nvidia-dcgm) service), which must run on the node.
"""

EXAMPLES = r"""
- name: Run DCGM's quick diagnostic
  trainops.cluster.dcgm_diag:
    level: 1
    timeout: 300
  register: dcgm
  changed_when: false

- name: Name the failed tests
  ansible.builtin.debug:
    msg: "{{ dcgm.tests | selectattr('status', 'eq', 'fail') | map(attribute='name') | list }}"
  when: dcgm.tests is defined
"""

RETURN = r"""
found:
  description: Whether C(dcgmi) is on the node's E(PATH).
  returned: always
  type: bool
  sample: true
ran:
  description: Whether the diagnostic ran (false without C(dcgmi) and in check mode).
  returned: always
  type: bool
  sample: true
level:
  description: The run level asked for.
  returned: always
  type: int
  sample: 1
cmd:
  description: The command run.
  returned: when ran
  type: list
  elements: str
  sample: [/usr/bin/dcgmi, diag, -r, "1", -j]
rc:
  description: C(dcgmi)'s exit status (non-zero where a test failed).
  returned: when ran
  type: int
  sample: 0
stderr:
  description: The last lines of C(dcgmi)'s standard error.
  returned: when ran
  type: str
  sample: ""
timed_out:
  description: Whether C(dcgmi diag) was stopped at O(timeout).
  returned: when ran
  type: bool
  sample: false
version:
  description: The DCGM version the diagnostic reports (DCGM 4.x's metadata; 3.x may leave it out).
  returned: when ran and dcgmi printed a diagnostic
  type: str
  sample: 4.2.3
driver:
  description: The driver version DCGM detected.
  returned: when ran and dcgmi printed a diagnostic
  type: str
  sample: 570.148.08
runtime_error:
  description: DCGM's runtime error for the whole run, or null.
  returned: when ran and dcgmi printed a diagnostic
  type: str
  sample: null
tests:
  description:
    - One entry per test and GPU; per test where DCGM names no GPU (C(gpus) null, the whole node).
    - C(status) is one of pass, fail, warn, skip, not run; a word DCGM printed that is none of these reads not run.
  returned: when ran and dcgmi printed a diagnostic
  type: list
  elements: dict
  sample: [{category: Deployment, name: software, gpus: [0], status: fail, info: [],
            warnings: ["Persistence Mode: Persistence mode for GPU 0 is disabled. ..."]}]
error:
  description: Why there is no diagnostic (the first line C(dcgmi) printed, or the timeout), or null.
  returned: when ran
  type: str
  sample: "no DCGM diagnostic in dcgmi's output: Error: Unable to establish a connection to the specified host: localhost"
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.trainops.cluster.plugins.module_utils._dcgm_diag import parse
from ansible_collections.trainops.cluster.plugins.module_utils.command import run_bounded

# Lines of dcgmi's standard error kept: its last words, not a log.
STDERR_LINES = 20


def main():
    module = AnsibleModule(
        argument_spec=dict(
            level=dict(type="int", choices=[1, 2, 3, 4], default=1),
            timeout=dict(type="int", default=900),
        ),
        supports_check_mode=True,
    )
    level, timeout = module.params["level"], module.params["timeout"]
    if timeout < 1:
        module.fail_json(msg="timeout must be at least 1 second")
    dcgmi = module.get_bin_path("dcgmi")
    if not dcgmi or module.check_mode:
        module.exit_json(changed=False, found=bool(dcgmi), ran=False, level=level)
    argv = [dcgmi, "diag", "-r", str(level), "-j"]
    rc, out, err, timed_out = run_bounded(module, argv, timeout)
    result = {"error": None}
    if timed_out:
        result["error"] = "dcgmi diag -r %d did not finish in %d s (timeout)" % (level, timeout)
    else:
        # dcgmi says on standard output that it cannot reach nv-hostengine; standard error where the output is empty.
        result.update(parse(out if out.strip() else err))
    module.exit_json(changed=False, found=True, ran=True, level=level, cmd=argv, rc=rc, timed_out=timed_out,
                     stderr="\n".join(err.splitlines()[-STDERR_LINES:]), **result)


if __name__ == "__main__":
    main()
