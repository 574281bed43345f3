#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: ssh_mesh
short_description: From this node, SSH to the other cluster nodes by name and by IP, in parallel
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
  - Targets left out of O(login) are checked on this node without logging in, so the logins of a large cluster can
    grow with its size, not with its square. The dialled name must resolve (through C(ssh -G), so ssh_config aliases count) to the target's
    C(cluster_ip) and a known_hosts file must trust a key for it (C(ssh-keygen -F)).
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
  login:
    description:
      - The targets (their C(host)) to log into; the others are checked locally. Default, all of them.
      - P(trainops.cluster.ssh_mesh_logins#filter) picks them for a cluster.
    type: list
    elements: str
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
extends_documentation_fragment:
  - trainops.cluster.attributes
attributes:
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
    checked: {description: "C(ssh): logged in and ran C(hostname); C(local): checked on this node without logging in.", type: str, sample: ssh}
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

import os
import pwd
import socket
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.trainops.cluster.plugins.module_utils.command import run_bounded
from ansible_collections.trainops.cluster.plugins.module_utils.mesh import (
    known_hosts_files, known_hosts_key, local_result, probe_result, probes_for, run_retrying_hangs, ssh_argv, ssh_config, transient)

RETRY_DELAY = 1


def main():
    module = AnsibleModule(
        argument_spec=dict(
            nodes=dict(type="list", elements="dict", required=True),
            login=dict(type="list", elements="str"),
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
    keygen = module.get_bin_path("ssh-keygen", required=True)
    home = pwd.getpwuid(os.getuid()).pw_dir
    login = set(p["login"]) if p["login"] is not None else {n["host"] for n in p["nodes"]}
    ip_of = {n["host"]: n["cluster_ip"] for n in p["nodes"]}

    def run_one(probe):
        start = time.monotonic()
        argv = ssh_argv(probe["address"], p["connect_timeout"], ssh=ssh)
        rc, out, err, timed_out = run_bounded(module, argv, p["timeout"])
        if transient(rc, err, out):
            time.sleep(RETRY_DELAY)
            rc, out, err, timed_out = run_bounded(module, argv, p["timeout"])
        return probe_result(probe, rc, out, err, time.monotonic() - start, timed_out=timed_out, timeout=p["timeout"])

    def check_locally(probe):
        start = time.monotonic()
        config = ssh_config(run_bounded(module, [ssh, "-G", probe["address"]], p["timeout"])[1])
        dialled = config.get("hostname") or probe["address"]
        try:
            resolved = {info[4][0] for info in socket.getaddrinfo(dialled, None, 0, socket.SOCK_STREAM)}
        except socket.gaierror as e:
            resolved = "%s: %s" % (dialled, e.strerror)
        key = known_hosts_key(config, probe["address"])
        known = any(os.path.exists(f) and run_bounded(module, [keygen, "-F", key, "-f", f], p["timeout"])[0] == 0
                    for f in known_hosts_files(config, home))
        return local_result(probe, ip_of[probe["target"]], resolved, known, time.monotonic() - start)

    start = time.monotonic()
    probes = probes_for(p["nodes"], p["by"])
    logins = run_retrying_hangs([probe for probe in probes if probe["target"] in login], run_one, p["parallel"])
    local = [check_locally(probe) for probe in probes if probe["target"] not in login]
    # Back in the order of the probes: logins and local checks each keep it.
    results = [logins.pop(0) if probe["target"] in login else local.pop(0) for probe in probes]
    module.exit_json(changed=False, results=results, failed_probes=sum(1 for r in results if not r["ok"]),
                     seconds=round(time.monotonic() - start, 3))


if __name__ == "__main__":
    main()
