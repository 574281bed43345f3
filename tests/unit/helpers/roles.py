# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A role's variables rendered as Ansible renders them, for tests of the expressions in defaults/ and vars/."""

from pathlib import Path

import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

ROLES = Path(__file__).resolve().parents[3] / "roles"


def trusted(value):
    """Strings of the role's files are templates to Ansible; a test's own values are not."""
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, list):
        return [trusted(item) for item in value]
    if isinstance(value, dict):
        return {key: trusted(item) for key, item in value.items()}
    return value


def role_vars(role, parts=("defaults", "vars")):
    """The role's defaults and vars (in that order, as Ansible layers them), as templates."""
    variables = {}
    for part in parts:
        path = ROLES / role / part / "main.yml"
        if path.exists():
            variables.update(trusted(yaml.safe_load(path.read_text())))
    return variables


def render(variables, expression):
    """The value of one expression, "{{ name }}", with these variables."""
    return Templar(loader=DataLoader(), variables=variables).template(trust_as_template(expression))
