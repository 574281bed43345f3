# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Port matrix filters; documentation lives in the <filter name>.yml files next to this one."""

from __future__ import annotations

from ansible_collections.trainops.cluster.plugins.module_utils import ports


def port_matrix_reconcile(results_by_source, listeners_by_node):
    return ports.reconcile(dict(results_by_source), dict(listeners_by_node))


def port_matrix_listener_notes(listeners_by_node):
    return ports.listener_notes(dict(listeners_by_node))


class FilterModule:
    def filters(self):
        return {"port_matrix_reconcile": port_matrix_reconcile, "port_matrix_listener_notes": port_matrix_listener_notes}
