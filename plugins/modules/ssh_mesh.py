#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: ssh_mesh
short_description: From this node, SSH to every other cluster node by name and by IP, in parallel
version_added: 0.1.0
author: trainops.cluster maintainers (@trainops)
description:
  - Runs C(ssh <target> hostname) as the connecting user (use C(become_user) for the training user) to every
    target, by name and by address, all at once on parallel threads, so the wall time does not grow with the
    number of nodes until O(parallel) is reached.
  - Each probe uses C(BatchMode=yes), strict host key checking and a bounded connect, and has a hard time limit,
    so a probe never hangs.
  - A probe passes when the node that answers reports the expected hostname; an answer from another node
    (duplicate hostname, wrong address in /etc/hosts) is a failure.
  - Never fails itself on unreachable targets; it returns every probe's result for a cross-node report.
options:
  nodes:
    description:
      - The nodes to reach, as records of P(trainops.cluster.cluster_nodes#filter); each needs C(host)
        (its label in the results), C(short) (the name dialed) and C(cluster_ip); C(hostname), the name the
        node should report, defaults to C(short). Other keys are ignored.
    type: list
    elements: dict
    required: true
  by:
    description: How to address each target.
    type: list
    elements: str
    choices: [name, ip]
    default: [name, ip]
  connect_timeout:
    description: SSH C(ConnectTimeout) in seconds.
    type: int
    default: 5
  timeout:
    description:
      - Hard limit for one probe in seconds, connect included.
      - A probe that hangs past it is tried once more after all the others, so a node slowed by the mesh's own load
        is not reported as a broken path.
    type: int
    default: 15
  parallel:
    description:
      - Probes in flight at once. Every node dials every other at the same time, and sshd refuses connections beyond
        its C(MaxStartups) (10 by default), so a refused handshake (or an empty answer) is tried once more after a second.
    type: int
    default: 8
attributes:
  check_mode:
    support: full
    description: Read-only; runs the same probes in check mode.
  diff_mode:
    support: none
    description: Changes nothing, so there is no diff.
  platform:
    support: full
    platforms: posix
    description: Needs the OpenSSH client on the node.
"""

EXAMPLES = r"""
- name: Check the SSH mesh as the training user
  trainops.cluster.ssh_mesh:
    nodes: "{{ hostvars | trainops.cluster.cluster_nodes(groups['cluster']) | rejectattr('host', 'eq', inventory_hostname) }}"
  become: true
  become_user: train
  register: mesh
"""

RETURN = r"""
results:
  description: One item per probe, in the order of O(nodes) then O(by).
  returned: always
  type: list
  elements: dict
  contains:
    target: {description: Target node (its C(host))., type: str, sample: node2}
    via: {description: "How it was addressed: C(name) or C(ip).", type: str, sample: name}
    address: {description: What was dialed., type: str, sample: node2}
    expected: {description: Hostname the target should report., type: str, sample: node2}
    ok: {description: Whether the probe passed., type: bool, sample: true}
    answered: {description: "Hostname the target reported, null when it did not answer.", type: str, sample: node2}
    error: {description: "Diagnosis of a failed probe, null when it passed.", type: str, sample: connection timed out}
    seconds: {description: Probe duration., type: float, sample: 0.21}
    timed_out: {description: "The probe hung past O(timeout), and hung again when retried once after the others.", type: bool, sample: false}
failed_probes:
  description: Number of failed probes.
  returned: always
  type: int
  sample: 0
seconds:
  description: Wall time of all probes.
  returned: always
  type: float
  sample: 0.4
"""

import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.trainops.cluster.plugins.module_utils.command import run_bounded
from ansible_collections.trainops.cluster.plugins.module_utils.mesh import probe_result, probes_for, run_retrying_hangs, ssh_argv, transient

RETRY_DELAY = 1


def main():
    module = AnsibleModule(
        argument_spec=dict(
            nodes=dict(type="list", elements="dict", required=True),
            by=dict(type="list", elements="str", choices=["name", "ip"], default=["name", "ip"]),
            connect_timeout=dict(type="int", default=5),
            timeout=dict(type="int", default=15),
            parallel=dict(type="int", default=8),
        ),
        supports_check_mode=True,
    )
    p = module.params
    bad = [str(n) for n in p["nodes"] if not (n.get("host") and n.get("short") and n.get("cluster_ip"))]
    if bad:
        module.fail_json(msg="nodes need host, short and cluster_ip: %s" % "; ".join(bad))
    ssh = module.get_bin_path("ssh", required=True)

    def run_one(probe):
        start = time.monotonic()
        argv = ssh_argv(probe["address"], p["connect_timeout"], ssh=ssh)
        rc, out, err, timed_out = run_bounded(module, argv, p["timeout"])
        if transient(rc, err, out):
            time.sleep(RETRY_DELAY)
            rc, out, err, timed_out = run_bounded(module, argv, p["timeout"])
        return probe_result(probe, rc, out, err, time.monotonic() - start, timed_out=timed_out, timeout=p["timeout"])

    start = time.monotonic()
    results = run_retrying_hangs(probes_for(p["nodes"], p["by"]), run_one, p["parallel"])
    module.exit_json(changed=False, results=results, failed_probes=sum(1 for r in results if not r["ok"]),
                     seconds=round(time.monotonic() - start, 3))


if __name__ == "__main__":
    main()
