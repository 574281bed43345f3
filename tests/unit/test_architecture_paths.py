# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Library paths of the roles come from the node's architecture: x86_64 and aarch64 (GH200, GB200) alike."""

import pytest

from helpers.roles import ROLES, render, role_vars


def nccl_tests_vars(architecture):
    return dict(role_vars("nccl_tests"), ansible_facts={"architecture": architecture, "trainops_comm": {"nccl": {"sources": []}}})


@pytest.mark.parametrize("architecture", ["x86_64", "aarch64"])
def test_mpi_and_nccl_directories_follow_the_architecture(architecture):
    variables = nccl_tests_vars(architecture)
    assert render(variables, "{{ nccl_tests_mpi_prefix }}") == "/usr/lib/%s-linux-gnu/openmpi" % architecture
    assert "/usr/lib/%s-linux-gnu" % architecture in render(variables, "{{ nccl_tests_nccl_dirs }}")


def test_no_role_hard_codes_one_architecture():
    hard_coded = [str(path.relative_to(ROLES)) for path in ROLES.rglob("*") if path.is_file() and path.suffix in (".yml", ".j2")
                  and ("x86_64-linux-gnu" in path.read_text() or "aarch64-linux-gnu" in path.read_text())]
    assert hard_coded == []
