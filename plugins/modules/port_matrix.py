#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: port_matrix
short_description: Check that every cluster node can open TCP connections to every other node on the training ports
version_added: 0.1.0
author:
  - trainops.cluster maintainers (@trainops)
description:
  - Finds firewalls that make multi-node training hang at rendezvous, such as a blocked C(master_port) 29500 or
    blocked NCCL, Gloo or MPI ports.
  - Run it on all cluster nodes at once. Each node opens short-lived TCP listeners on its O(bind_address) for
    every port in O(ports). Meanwhile it connects from its own C(cluster_ip) to every other node's C(cluster_ip) on
    every port, all probes on parallel threads, and closes each connection at once. Feed the results of all nodes to
    P(trainops.cluster.reachability_matrix#filter) to get an N x N matrix that names each blocked pair.
  - A port that is already in use on this node (for example by a running rendezvous) is not listened on. It
    is reported as C(served), and the service holding it answers the peers instead.
  - A probe passes when the TCP connection is accepted. A connect that is refused is retried until
    O(connect_timeout) seconds before the window ends, because a peer's listener may start a little later
    than ours. A timeout is not retried.
  - The listeners close as soon as every other node has connected to each of them, so a healthy cluster does not
    wait out O(window). A peer that is down, blocked or connects from another address keeps them up for O(window).
    Any connection from a peer's address counts, so another program on a peer that connects first could close a
    listener before that peer's probe arrives; the probe is then reported C(refused).
  - Every socket operation has a timeout. The module never runs much longer than O(window) + O(connect_timeout).
  - Never fails itself on blocked ports; it returns every probe's result for a cross-node report.
options:
  nodes:
    description:
      - All cluster nodes, this one included, as records of P(trainops.cluster.cluster_nodes#filter). Each
        record needs C(host) (its label in the results) and C(cluster_ip) (the address that is dialed). Other
        keys are ignored.
      - C(cluster_ip) should be an IP address. A name would be resolved without a time limit.
    type: list
    elements: dict
    required: true
  self:
    description:
      - This node's inventory name, usually C(inventory_hostname). The node with this C(host) in O(nodes) is
        not probed, and its C(cluster_ip) is the default O(bind_address).
    type: str
    required: true
  ports:
    description:
      - TCP ports to check, each a number or a range C(LOW-HIGH) as a string.
      - A range is sampled. Only its first, middle and last ports are probed, never every port of it.
    type: list
    elements: raw
    required: true
  bind_address:
    description:
      - Address to listen on. Defaults to this node's C(cluster_ip) from O(nodes).
      - Use C(0.0.0.0) to listen on all IPv4 addresses. A port is then counted as C(served) when it is in use
        on any address.
    type: str
  connect_timeout:
    description: Seconds one connect may take before the port counts as C(timed out) (filtered or dropped).
    type: float
    default: 2
  window:
    description:
      - Seconds the listeners stay up at most, counted from the start of the module. It must be longer than
        O(connect_timeout).
      - All nodes must start the module within O(window) - O(connect_timeout) seconds of each other. Otherwise
        early nodes find late ones C(refused).
    type: int
    default: 8
  parallel:
    description:
      - Probes in flight at once.
      - When there are more probes than threads and the window closes before a probe gets a thread, that
        probe fails with C(not probed).
    type: int
    default: 64
extends_documentation_fragment:
  - trainops.cluster.attributes
attributes:
  check_mode:
    support: full
    description:
      - Changes nothing persistent, so check mode runs the same probes. It still opens the temporary listeners.
  platform:
    support: full
    platforms: posix
    description: Needs only the Python standard library on the node.
notes:
  - Run it on every node in the same task and without C(serial). Set C(forks) to at least the number of nodes
    so that all nodes probe at the same time.
  - The reasons for a failed probe are C(timed out) (packets dropped, usually a firewall's DROP rule or a wrong
    address) and C(refused) (nothing listens, or a firewall REJECT rule). Others are C(no route to host)
    (often a REJECT with C(icmp-host-prohibited)), C(network unreachable), C(name does not resolve) and
    C(operation not permitted) (usually a firewall rule for outgoing traffic on this node).
  - A probe only checks that a TCP handshake completes. It does not check that NCCL or Gloo work over the
    connection.
seealso:
  - name: PyTorch distributed environment variables
    description: E(MASTER_PORT) and the rendezvous endpoint that the probes stand in for.
    link: https://pytorch.org/docs/stable/elastic/run.html
"""

EXAMPLES = r"""
- name: Probe the rendezvous port and a sample of the NCCL port range from every node
  trainops.cluster.port_matrix:
    nodes: "{{ hostvars | trainops.cluster.cluster_nodes(groups['cluster']) }}"
    self: "{{ inventory_hostname }}"
    ports: [29500, "40000-40100"]
  register: port_probe

- name: Print the matrix and every blocked pair
  ansible.builtin.debug:
    msg: "{{ (matrix.headers | trainops.cluster.text_table(matrix.rows)).splitlines() + matrix.messages }}"
  vars:
    # Per node its results, or null where the module did not run (node unreachable or failed).
    results: >-
      {{ dict(groups['cluster'] | zip(groups['cluster'] | map('extract', hostvars, ['port_probe', 'results']) | map('default', None))) }}
    matrix: "{{ results | trainops.cluster.reachability_matrix(groups['cluster']) }}"
  run_once: true
"""

RETURN = r"""
results:
  description: One item per probe, in the order of O(nodes) and then of the ports probed.
  returned: always
  type: list
  elements: dict
  contains:
    target: {description: Peer node (its C(host))., type: str, sample: node1}
    via: {description: The port as a string (the matrix column label)., type: str, sample: "29500"}
    port: {description: The port., type: int, sample: 29500}
    address: {description: Address dialed (the peer's C(cluster_ip))., type: str, sample: 10.72.0.11}
    ok: {description: Whether the connection was accepted., type: bool, sample: false}
    error:
      description:
        - Why the probe failed, or null. One of C(timed out), C(refused), C(no route to host), C(network unreachable),
          C(name does not resolve), C(reset), C(operation not permitted), C(not probed) with a reason, or the
          system's message.
      type: str
      sample: timed out
    seconds: {description: Probe duration including retries., type: float, sample: 2.003}
listeners:
  description: One item per port probed, telling whether this node listened on it.
  returned: always
  type: list
  elements: dict
  contains:
    port: {description: The port., type: int, sample: 29500}
    state:
      description:
        - C(listening) when this module listened on the port until every peer had connected, or for the window.
        - C(served) when the port was already in use by a listening service, which answers instead.
        - C(busy) when the port was held by closing connections of a program that just ended (TIME_WAIT sockets
          of a listener without SO_REUSEADDR, as MPI leaves them) and nothing listens; peers are refused, which
          still shows the path is open (P(trainops.cluster.port_matrix_reconcile#filter)).
        - C(failed) when the listener could not be opened for another reason. Peers then find this port C(refused).
      type: str
      sample: listening
    error: {description: "Why the listener failed, or null.", type: str, sample: "cannot listen on 10.72.0.11:80: permission denied"}
ports:
  description: The ports probed, sorted, with each range of O(ports) reduced to its sample.
  returned: always
  type: list
  elements: int
  sample: [29500, 40000, 40050, 40100]
bind_address:
  description: The address listened on.
  returned: always
  type: str
  sample: 10.72.0.11
failed_probes:
  description: Number of failed probes.
  returned: always
  type: int
  sample: 1
seconds:
  description: Wall time of the module, the time its listeners were up included.
  returned: always
  type: float
  sample: 8.004
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.trainops.cluster.plugins.module_utils.ports import expand_ports, find_node, run_matrix


def main():
    module = AnsibleModule(
        argument_spec=dict(
            nodes=dict(type="list", elements="dict", required=True),
            self=dict(type="str", required=True),
            ports=dict(type="list", elements="raw", required=True),
            bind_address=dict(type="str"),
            connect_timeout=dict(type="float", default=2),
            window=dict(type="int", default=8),
            parallel=dict(type="int", default=64),
        ),
        supports_check_mode=True,
    )
    p = module.params
    bad = [str(n) for n in p["nodes"] if not (n.get("host") and n.get("cluster_ip"))]
    if bad:
        module.fail_json(msg="nodes need host and cluster_ip: %s" % "; ".join(bad))
    me = find_node(p["nodes"], p["self"])
    if me is None:
        module.fail_json(msg="self %r is not the host of any of nodes" % p["self"])
    if not 0 < p["connect_timeout"] < p["window"]:
        module.fail_json(msg="connect_timeout must be above 0 and below window (%s s)" % p["window"])
    try:
        ports = expand_ports(p["ports"])
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    bind_address = p["bind_address"] or me["cluster_ip"]
    result = run_matrix(p["nodes"], p["self"], ports, bind_address, p["connect_timeout"], p["window"], p["parallel"])
    module.exit_json(changed=False, ports=ports, bind_address=bind_address, **result)


if __name__ == "__main__":
    main()
