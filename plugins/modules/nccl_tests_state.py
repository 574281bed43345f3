#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: nccl_tests_state
short_description: Look, in one pass, at what decides whether nccl-tests must be built on a node
version_added: 0.1.0
author: trainops.cluster maintainers (@trainops)
description:
  - Finds the NCCL library to build against (the first C(libnccl.so.2) in O(nccl_dirs)) with the size and modification
    time of the file it leads to, reads the stamp of the last build, and asks nccl-tests C(all_reduce_perf) (O(binary))
    whether it can write its results as JSON (C(-J)).
  - These are the looks the role trainops.cluster.nccl_tests takes before it decides whether to build; one module run
    instead of one per look. RV(cpus) gives the build its C(make -j), without gathering the hardware facts.
  - Read-only. Nothing missing makes it fail; a missing library, binary or stamp is reported as V(null) or V(false).
options:
  nccl_dirs:
    description:
      - Directories searched in this order for C(libnccl.so.2) (a file, or a link to one; links are followed).
      - A directory that does not exist, and a dangling link, are passed over.
      - Empty or left out, no library is looked for.
    type: list
    elements: path
    default: []
  binary:
    description:
      - Path of C(all_reduce_perf). When it is an executable file, it is run once with C(-h).
    type: path
    required: true
  stamp_file:
    description:
      - A file whose text is returned as RV(stamp), the build stamp the role writes after each build.
      - Left out, or missing, RV(stamp) is V(null).
    type: path
  timeout:
    description: Seconds C(all_reduce_perf -h) may run before it is killed.
    type: int
    default: 30
extends_documentation_fragment:
  - trainops.cluster.attributes
attributes:
  check_mode:
    support: full
    description: The module only reads, so it does the same in check mode, C(all_reduce_perf -h) included.
  platform:
    support: full
    platforms: posix
    description: Any POSIX node with coreutils C(timeout).
notes:
  - C(all_reduce_perf -h) prints its usage and exits before it starts MPI or touches a GPU, so it is quick and safe.
    It still needs the shared libraries the binary links against, so a binary that cannot be loaded shows up in
    RV(help_error).
seealso:
  - name: nccl-tests
    description: The NVIDIA collective tests; C(-J) writes the results as JSON.
    link: https://github.com/NVIDIA/nccl-tests
"""

EXAMPLES = r"""
- name: Look at NCCL, the last build and its stamp
  trainops.cluster.nccl_tests_state:
    nccl_dirs: [/opt/nccl/lib, /usr/lib/x86_64-linux-gnu, /usr/lib64]
    binary: /opt/trainops/nccl-tests/src/build/all_reduce_perf
    stamp_file: /opt/trainops/nccl-tests/build.stamp
  register: nccl_state

- name: Build when the binary is gone or the stamp differs from what this build would write
  ansible.builtin.include_tasks: make.yml
  vars:
    expected_stamp: "nccl: {{ nccl_state.nccl_lib }} {{ nccl_state.nccl_lib_size }} {{ nccl_state.nccl_lib_mtime }}\n"
  when: not nccl_state.binary_exists or nccl_state.stamp != expected_stamp

- name: A prebuilt all_reduce_perf, and whether it writes JSON
  trainops.cluster.nccl_tests_state:
    binary: /opt/nccl-tests/build/all_reduce_perf
  register: prebuilt
  failed_when: prebuilt.help_error is not none
"""

RETURN = r"""
nccl_lib:
  description:
    - Path of the first C(libnccl.so.2) found in O(nccl_dirs), as found (not resolved through links); V(null) when
      there is none.
  returned: always
  type: str
  sample: /usr/lib/x86_64-linux-gnu/libnccl.so.2
nccl_lib_size:
  description: Size in bytes of the file RV(nccl_lib) leads to; V(null) without RV(nccl_lib).
  returned: always
  type: int
  sample: 283645656
nccl_lib_mtime:
  description: Modification time (seconds since the epoch) of the file RV(nccl_lib) leads to; V(null) without RV(nccl_lib).
  returned: always
  type: float
  sample: 1754565600.0
binary_exists:
  description: Whether O(binary) is an executable file (a link to one counts).
  returned: always
  type: bool
  sample: true
stamp:
  description: Text of O(stamp_file); V(null) when it was not given or cannot be read.
  returned: always
  type: str
  sample: |
    source: git https://github.com/NVIDIA/nccl-tests.git v2.19.6
    nccl: /usr/lib/x86_64-linux-gnu/libnccl.so.2 283645656 1754565600.0
    cuda: /usr/local/cuda 13.0
    mpi: /usr/lib/x86_64-linux-gnu/openmpi
json_output:
  description:
    - Whether O(binary) takes C(-J <file>) to write its results as JSON, going by its C(-h) usage text.
    - V(false) when there is no binary or C(-h) did not run.
  returned: always
  type: bool
  sample: true
cpus:
  description:
    - CPUs this node lets the module run on (its CPU affinity, which a container's or cgroup's cpuset narrows), as
      C(nproc) counts them; the role's C(make -j).
  returned: always
  type: int
  sample: 16
help_rc:
  description: Exit status of C(all_reduce_perf -h); V(null) when O(binary) is not an executable file.
  returned: always
  type: int
  sample: 0
help_error:
  description:
    - V(null) when C(all_reduce_perf -h) ran (exit status 0 or 1); else why it did not, in one line (not an executable
      file, timed out, or the exit status with the last line it printed).
  returned: always
  type: str
  sample: "exited with rc 127: all_reduce_perf: error while loading shared libraries: libmpi.so.40: cannot open shared object file"
"""

import os
import stat

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.trainops.cluster.plugins.module_utils.command import run_bounded
from ansible_collections.trainops.cluster.plugins.module_utils.nccl_tests.perf_help import help_problem, help_supports_json

LIBRARY = "libnccl.so.2"
# The stamp is a few lines; a larger file is not one the role wrote.
STAMP_MAX_BYTES = 65536


def find_library(dirs):
    """First dir/libnccl.so.2 that leads to a file -> (path, size, mtime), else (None, None, None)."""
    for directory in dirs:
        path = os.path.normpath(os.path.join(directory, LIBRARY))
        try:
            st = os.stat(path)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            return path, st.st_size, st.st_mtime
    return None, None, None


def read_stamp(path):
    if not path:
        return None
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read(STAMP_MAX_BYTES)
    except OSError:
        return None


def usable_cpus():
    """CPUs this process may run on, as nproc(1) counts them: the affinity mask, where the platform has one."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no sched_getaffinity outside Linux
        return os.cpu_count() or 1


def main():
    module = AnsibleModule(
        argument_spec=dict(
            nccl_dirs=dict(type="list", elements="path", default=[]),
            binary=dict(type="path", required=True),
            stamp_file=dict(type="path"),
            timeout=dict(type="int", default=30),
        ),
        supports_check_mode=True,
    )
    params = module.params
    binary, timeout = params["binary"], params["timeout"]
    if timeout < 1:
        module.fail_json(msg="timeout must be at least 1 second, got %d" % timeout)
    nccl_lib, size, mtime = find_library(params["nccl_dirs"])
    binary_exists = os.path.isfile(binary) and os.access(binary, os.X_OK)
    help_rc, json_output = None, False
    help_error = "%s is not an executable file" % binary
    if binary_exists:
        help_rc, out, err, timed_out = run_bounded(module, [binary, "-h"], timeout)
        help_error = help_problem(help_rc, out + "\n" + err, timed_out, timeout)
        json_output = help_supports_json(out + "\n" + err)
    module.exit_json(changed=False, nccl_lib=nccl_lib, nccl_lib_size=size, nccl_lib_mtime=mtime, binary_exists=binary_exists,
                     stamp=read_stamp(params["stamp_file"]), json_output=json_output, help_rc=help_rc, help_error=help_error,
                     cpus=usable_cpus())


if __name__ == "__main__":
    main()
