# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Each role's README.md is its argument specs' Markdown view (scripts/role-readmes): a stale one fails here."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_role_readmes_are_made_from_the_current_argument_specs():
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "role-readmes"), "--check"], capture_output=True, text=True,
                         check=False)
    assert run.returncode == 0, run.stdout + run.stderr


def test_every_role_has_one():
    roles = {p.parents[1].name for p in ROOT.glob("roles/*/meta/argument_specs.yml")}
    assert roles == {p.name for p in ROOT.glob("roles/*") if p.is_dir()}
    assert all((ROOT / "roles" / role / "README.md").exists() for role in roles)
