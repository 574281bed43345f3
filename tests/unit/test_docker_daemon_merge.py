# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""docker's daemon.json: the role's keys merged into the administrator's, never written whole."""

import base64
import json

from helpers.roles import render, role_vars

ADMIN = {"data-root": "/data/docker", "default-runtime": "runc", "live-restore": True, "log-opts": {"max-size": "100m"},
         "insecure-registries": ["mirror.local:5000"]}


def merged(current, registries, nvidia):
    variables = role_vars("container_runtime", parts=("vars",))
    variables.update(container_runtime_insecure_registries=registries, container_runtime_nvidia_ready=nvidia,
                     container_runtime_daemon_file={"content": base64.b64encode(json.dumps(current).encode()).decode()}
                     if current is not None else {"failed": True})
    return render(variables, "{{ container_runtime_daemon_merged }}"), render(variables, "{{ container_runtime_daemon_current }}")


def test_the_administrators_keys_stay_and_ours_are_added():
    result, dummy = merged(ADMIN, ["node1:5000"], True)
    assert result == dict(ADMIN, **{"insecure-registries": ["mirror.local:5000", "node1:5000"],
                                    "runtimes": {"nvidia": {"path": "nvidia-container-runtime", "runtimeArgs": []}}})


def test_nothing_to_change_writes_nothing():
    current = dict(ADMIN, **{"insecure-registries": ["mirror.local:5000", "node1:5000"]})
    result, before = merged(current, ["node1:5000"], False)
    assert result == before


def test_a_node_without_the_file():
    assert merged(None, ["node1:5000"], False)[0] == {"insecure-registries": ["node1:5000"]}
    assert merged(None, [], False) == ({}, {})
