# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Cross-node drift report filters; documentation lives in the <filter name>.yml files next to this one."""

from __future__ import annotations

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.trainops.cluster.plugins.plugin_utils.drift_compare import compare, render_drift_table, render_markdown
from ansible_collections.trainops.cluster.plugins.plugin_utils import drift_keys, job_requirements


def _require_mapping(value, what):
    if not isinstance(value, Mapping):
        raise AnsibleFilterError("{0} must be a dictionary, got {1}".format(what, type(value).__name__))


def _require_comparison(comparison, name):
    _require_mapping(comparison, name + " input")
    missing = [key for key in ("hosts", "rows", "failed", "errors", "warnings") if key not in comparison]
    if missing:
        raise AnsibleFilterError("{0} expects the result of trainops.cluster.drift_compare; missing {1}".format(name, ", ".join(missing)))


def drift_values(gpu_facts, comm_facts=None, extra=None, image_facts=None):
    return drift_keys.values_for(gpu_facts, comm_facts, extra, image_facts)


def drift_compare(values_by_host, policy=None, default_severity="warn", hosts_order=None):
    _require_mapping(values_by_host, "drift_compare input")
    for host, facts in values_by_host.items():
        if facts is not None:
            _require_mapping(facts, "drift_compare values of host {0}".format(host))
    if policy is not None:
        _require_mapping(policy, "drift_compare policy")
    try:
        comparison = compare(values_by_host, policy, default_severity=default_severity, hosts_order=hosts_order)
    except ValueError as exc:
        raise AnsibleFilterError("drift_compare: {0}".format(exc)) from exc
    return job_requirements.apply(comparison, values_by_host)


def drift_table(comparison, marker="*"):
    _require_comparison(comparison, "drift_table")
    return render_drift_table(comparison, marker=marker)


def drift_markdown(comparison, title="Cluster drift report"):
    _require_comparison(comparison, "drift_markdown")
    return render_markdown(comparison, title=title)


class FilterModule(object):
    def filters(self):
        return {
            "drift_values": drift_values,
            "drift_compare": drift_compare,
            "drift_table": drift_table,
            "drift_markdown": drift_markdown,
        }
