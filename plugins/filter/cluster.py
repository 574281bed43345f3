# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters over the cluster inventory model; documentation lives in the <filter name>.yml files next to this one."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.trainops.cluster.plugins.module_utils import mesh
from ansible_collections.trainops.cluster.plugins.plugin_utils import authorized_keys, inventory, reachability, storage_peers


def by_node(nodes, hostvars, path, default=None):
    return inventory.by_node(list(nodes), hostvars, path, default)


def cluster_stale_keys(authorized, pubkey):
    return authorized_keys.stale(str(authorized or ""), str(pubkey or ""))


def cluster_nodes(hostvars, hosts):
    return inventory.node_records(hostvars, list(hosts))


def cluster_rank_order(hosts, master=None):
    try:
        return inventory.rank_order(list(hosts), master)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc)) from exc


def cluster_inventory_errors(nodes, settings_by_host, spares=None):
    return inventory.validate(list(nodes), dict(settings_by_host), list(spares or []))


def cluster_node_errors(node):
    return inventory.node_errors(dict(node))


def nfs_kernel_errors(kernel):
    return inventory.nfs_kernel_errors(dict(kernel))


def storage_round_trip_errors(trip):
    return inventory.storage_round_trip_errors(dict(trip))


def storage_slower_than_peers(reads, fraction, path, server=None):
    return storage_peers.slower_than_peers(dict(reads), float(fraction), str(path), server or None)


def reachability_matrix(results_by_source, nodes, arrow="->"):
    return reachability.summarize(dict(results_by_source), list(nodes), arrow=arrow)


def ssh_mesh_logins(targets, self_host, full_max, neighbours, launchers):
    return mesh.login_targets(list(targets), self_host, int(full_max), int(neighbours), list(launchers))


class FilterModule:
    def filters(self):
        return {
            "by_node": by_node,
            "cluster_nodes": cluster_nodes,
            "cluster_rank_order": cluster_rank_order,
            "cluster_stale_keys": cluster_stale_keys,
            "cluster_inventory_errors": cluster_inventory_errors,
            "cluster_node_errors": cluster_node_errors,
            "nfs_kernel_errors": nfs_kernel_errors,
            "reachability_matrix": reachability_matrix,
            "ssh_mesh_logins": ssh_mesh_logins,
            "storage_round_trip_errors": storage_round_trip_errors,
            "storage_slower_than_peers": storage_slower_than_peers,
        }
