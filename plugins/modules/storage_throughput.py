#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: storage_throughput
short_description: Measure how fast every node reads shared storage while all nodes read at once
version_added: 0.1.0
author: trainops.cluster maintainers (@trainops)
description:
  - A short read throughput check of shared storage, in three steps run as three tasks. O(step=write) on one node
    writes a test file of O(size_mib) MiB of random data (synced). O(step=read) on every node, in the same task, waits
    until the wall-clock time O(start_at) chosen on the controller, so that the reads really overlap, drops this
    node's cached pages of the file (C(posix_fadvise POSIX_FADV_DONTNEED)) so that the figure is the storage's and
    not the page cache's, reads the file to its end and reports MB/s. O(step=remove) removes the file again.
  - With O(min_mbps), a read slower than that, or one that did not finish within O(timeout), returns a warning that
    names O(node) and its figure and advises to stage datasets on local disk. The module never fails on a slow read;
    it fails when the file cannot be written, read or removed.
  - Every step is bounded. The write and the read stop at O(timeout) seconds (a stopped read is still measured),
    and the wait for O(start_at) lasts at most O(timeout) seconds, so a node whose clock is far behind does not wait
    for ever. A read blocked inside the kernel (a hung NFS server) is not interrupted by the module; give the task
    a C(timeout) as well.
options:
  path:
    description: The test file, on the shared storage.
    type: path
    required: true
  step:
    description: What this task does; O(step=write) on one node, O(step=read) on every node, O(step=remove) on one.
    type: str
    choices: [write, read, remove]
    default: read
  size_mib:
    description: Size of the test file in MiB (O(step=write)).
    type: int
    default: 256
  start_at:
    description:
      - Wall-clock time (seconds since the epoch, as on the controller) at which every node begins to read
        (O(step=read)); at once when unset.
      - Choose it a few seconds ahead, so that the task reaches every node before it. A node that begins later
        reports how late in RV(late); the nodes' clocks should agree (NTP).
    type: float
  timeout:
    description: Seconds the write or the read may take, and the longest wait for O(start_at).
    type: float
    default: 60
  uid:
    description:
      - Read, write and remove as this uid (effective ids, no supplementary groups), as the training user does;
        storage with C(root_squash) refuses root. The account need not exist.
      - Unset, as the user the module runs as.
    type: int
  gid:
    description: The group id with O(uid); O(uid) when unset.
    type: int
  node:
    description: The node's name in RV(summary) and RV(warning), usually C(inventory_hostname).
    type: str
    default: this node
  min_mbps:
    description: Reads slower than this many MB/s (10^6 bytes per second) are warned about (O(step=read)); no judgement when unset.
    type: float
extends_documentation_fragment:
  - trainops.cluster.attributes
attributes:
  check_mode:
    support: full
    description:
      - A measurement, not a change. Check mode runs the same steps; the test file is written and removed again, and
        the module always reports no change.
notes:
  - Run O(step=read) on every node in the same task, without C(serial), and with C(forks) at least the number of
    nodes, so that every node is waiting before O(start_at).
  - The first read of a file on the node that wrote it may still find its pages cached where the kernel cannot drop
    them; the writer syncs the file first, so that they are clean and dropped.
"""

EXAMPLES = r"""
- name: Write the test file on the first node
  trainops.cluster.storage_throughput:
    path: /mnt/shared/.trainops-read-test
    step: write
    size_mib: 256
    uid: 2000
  when: inventory_hostname == ansible_play_hosts[0]
  timeout: 90

- name: Every node reads it at the same moment
  trainops.cluster.storage_throughput:
    path: /mnt/shared/.trainops-read-test
    start_at: "{{ now(utc=true).timestamp() + 5 }}"
    uid: 2000
    node: "{{ inventory_hostname }}"
    min_mbps: 200
  register: read_test
  timeout: 90

- name: Say which nodes read slowly
  ansible.builtin.debug:
    msg: "WARNING {{ read_test.warning }}"
  when: read_test.warning

- name: Remove the test file
  trainops.cluster.storage_throughput:
    path: /mnt/shared/.trainops-read-test
    step: remove
    uid: 2000
  when: inventory_hostname == ansible_play_hosts[0]
  timeout: 30
"""

RETURN = r"""
bytes:
  description: Bytes written or read.
  returned: step is write or read
  type: int
  sample: 268435456
seconds:
  description: Seconds the write or the read took (the wait for O(start_at) not counted).
  returned: step is write or read
  type: float
  sample: 0.331
mbps:
  description: MB/s (10^6 bytes per second) of the write or the read; null when no time passed.
  returned: step is write or read
  type: float
  sample: 811.0
timed_out:
  description: Whether the write or the read stopped at O(timeout) before the end of the file.
  returned: step is write or read
  type: bool
  sample: false
cache_dropped:
  description: Whether this node's cached pages of the file were dropped before the read.
  returned: step is read
  type: bool
  sample: true
started:
  description: Wall-clock time the read began (seconds since the epoch), to see that the nodes' reads overlapped.
  returned: step is read
  type: float
  sample: 1796320923.004
ended:
  description: Wall-clock time the read ended.
  returned: step is read
  type: float
  sample: 1796320923.335
late:
  description: Seconds after O(start_at) that this node began to read (0 when on time).
  returned: step is read
  type: float
  sample: 0.002
summary:
  description: One line with the node, the figure, the size, the path and the time.
  returned: step is read
  type: str
  sample: "node2: 811.0 MB/s reading 256 MiB of /mnt/shared/.trainops-read-test in 0.33 s"
warning:
  description: The warning that names the node and its figure when the read was slower than O(min_mbps), else null.
  returned: step is read
  type: str
  sample: "node2: shared storage /mnt/shared read at 95.2 MB/s with every node reading at once, below 200 MB/s. Stage datasets on local disk ..."
removed:
  description: Whether the test file was there to remove.
  returned: step is remove
  type: bool
  sample: true
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.trainops.cluster.plugins.module_utils import storage_read as st


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            step=dict(type="str", choices=["write", "read", "remove"], default="read"),
            size_mib=dict(type="int", default=256),
            start_at=dict(type="float"),
            timeout=dict(type="float", default=60),
            uid=dict(type="int"),
            gid=dict(type="int"),
            node=dict(type="str", default="this node"),
            min_mbps=dict(type="float"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    path, step = p["path"], p["step"]
    try:
        # The wait is outside as_ids: only the file operations need the training user's ids.
        late = st.wait_until(p["start_at"], p["timeout"]) if step == "read" else None
        with st.as_ids(p["uid"], p["gid"]):
            if step == "write":
                result = st.write_file(path, p["size_mib"], p["timeout"])
            elif step == "remove":
                result = {"removed": st.remove_file(path)}
            else:
                result = dict(st.read_file(path, p["timeout"]), late=late)
    except OSError as err:
        module.fail_json(msg="cannot %s the test file %s: %s" % (step, path, err.strerror or err), errno=err.errno)
    if step == "read":
        result.update(summary=st.summary(p["node"], path, result), warning=st.verdict(p["node"], path, result, p["min_mbps"]))
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
