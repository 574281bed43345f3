# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Library paths of the roles come from the node's architecture: x86_64 and aarch64 (GH200, GB200) alike."""

from pathlib import Path

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

ROLES = Path(__file__).resolve().parents[2] / "roles"


def trusted(value):
    """The role's files as Ansible loads them: their strings are templates."""
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, list):
        return [trusted(item) for item in value]
    if isinstance(value, dict):
        return {key: trusted(item) for key, item in value.items()}
    return value


def nccl_tests_vars(architecture):
    variables = {}
    for part in ("defaults", "vars"):
        variables.update(trusted(yaml.safe_load((ROLES / "nccl_tests" / part / "main.yml").read_text())))
    variables["ansible_facts"] = {"architecture": architecture, "trainops_comm": {"nccl": {"sources": []}}}
    return Templar(loader=DataLoader(), variables=variables)


@pytest.mark.parametrize("architecture", ["x86_64", "aarch64"])
def test_mpi_and_nccl_directories_follow_the_architecture(architecture):
    templar = nccl_tests_vars(architecture)
    assert templar.template(trust_as_template("{{ nccl_tests_mpi_prefix }}")) == "/usr/lib/%s-linux-gnu/openmpi" % architecture
    assert "/usr/lib/%s-linux-gnu" % architecture in templar.template(trust_as_template("{{ nccl_tests_nccl_dirs }}"))


def test_no_role_hard_codes_one_architecture():
    hard_coded = [str(path.relative_to(ROLES)) for path in ROLES.rglob("*") if path.is_file() and path.suffix in (".yml", ".j2")
                  and ("x86_64-linux-gnu" in path.read_text() or "aarch64-linux-gnu" in path.read_text())]
    assert hard_coded == []
