# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The type checker passes: mypy (mypy.ini: strict where the code is annotated) over the node program
(roles/train/files/trainops_job, with the module_utils files it links), plugins/module_utils and plugins/plugin_utils,
each imported as it is at run time."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("trainops_job", "ansible_collections.trainops.cluster.plugins.module_utils",
            "ansible_collections.trainops.cluster.plugins.plugin_utils")


def test_mypy_passes_on_the_node_program_module_utils_and_plugin_utils():
    # module_utils and plugin_utils are found as ansible_collections.trainops.cluster through this link (scripts/bootstrap).
    assert (ROOT / ".collections" / "ansible_collections" / "trainops" / "cluster" / "plugins").is_dir(), (
        ".collections/ansible_collections/trainops/cluster is missing: run scripts/bootstrap")
    argv = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "mypy.ini")]
    for package in PACKAGES:
        argv += ["-p", package]
    run = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert run.returncode == 0, "mypy found errors (exit %d):\n%s%s" % (run.returncode, run.stdout, run.stderr)
    # Every package was checked: one that mypy could not find would fail above, an empty one would pass unseen.
    assert "Success: no issues found in" in run.stdout
