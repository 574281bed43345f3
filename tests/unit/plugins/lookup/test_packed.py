# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The packed lookup through Ansible's plugin loader, as the train role's install calls it: the same bytes for the same
files, the node program importable from the archive, a missing directory named."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from ansible.errors import AnsibleLookupError
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import lookup_loader

NODE_PROGRAM = Path(__file__).resolve().parents[4] / "roles" / "train" / "files" / "trainops_job"


@pytest.fixture(name="lookup", scope="module")
def fixture_lookup():
    return lookup_loader.get("trainops.cluster.packed", loader=DataLoader(), templar=None)


def package(root: Path, name: str = "pkg") -> Path:
    (root / name / "sub").mkdir(parents=True)
    (root / name / "__init__.py").write_text("")
    (root / name / "sub" / "__init__.py").write_text("")
    (root / name / "core.py").write_text("ANSWER = 42\n")
    (root / name / "__pycache__").mkdir()
    (root / name / "__pycache__" / "core.cpython-313.pyc").write_bytes(b"\0")
    (root / "elsewhere.py").write_text("LINKED = True\n")
    (root / name / "linked.py").symlink_to(root / "elsewhere.py")
    return root / name


def test_the_same_files_give_the_same_archive_whatever_their_dates(lookup, tmp_path):
    source = package(tmp_path / "a")
    [first] = lookup.run([str(source)], variables={}, dest=str(tmp_path / "cache"))
    data = Path(first).read_bytes()
    os.utime(source / "core.py", (0, 0))
    Path(first).unlink()
    assert lookup.run([str(source)], variables={}, dest=str(tmp_path / "cache")) == [first]
    assert Path(first).read_bytes() == data and Path(first).name.startswith("pkg-")
    names = zipfile.ZipFile(first).namelist()
    # The links read as their files, the compiled files left out, in name order.
    assert names == ["pkg/__init__.py", "pkg/core.py", "pkg/linked.py", "pkg/sub/__init__.py"]
    assert zipfile.ZipFile(first).read("pkg/linked.py") == b"LINKED = True\n"


def test_other_files_give_another_archive(lookup, tmp_path):
    source = package(tmp_path / "a")
    [first] = lookup.run([str(source)], variables={}, dest=str(tmp_path / "cache"))
    (source / "core.py").write_text("ANSWER = 43\n")
    [second] = lookup.run([str(source)], variables={}, dest=str(tmp_path / "cache"))
    assert second != first and Path(first).exists() and Path(second).exists()


def test_the_node_program_runs_from_its_archive(lookup, tmp_path):
    # As /usr/local/bin/trainops-job starts it on a node: the archive first on the path, its command line's usage.
    [archive] = lookup.run([str(NODE_PROGRAM)], variables={}, dest=str(tmp_path))
    run = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); import trainops_job.cli, trainops_job.runner as r;"
                          " print(trainops_job.cli.__file__); print(r.PACKAGE_DIR)", archive],
                         capture_output=True, text=True, check=False, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [os.path.join(archive, "trainops_job", "cli.py"), archive]
    # Its helpers start as python3 -m trainops_job with the archive as PYTHONPATH.
    helper = subprocess.run([sys.executable, "-m", "trainops_job"], env=dict(os.environ, PYTHONPATH=archive), capture_output=True,
                            text=True, check=False, cwd=tmp_path)
    assert "report" in helper.stdout + helper.stderr, helper


def test_a_missing_directory_is_named(lookup, tmp_path):
    with pytest.raises(AnsibleLookupError, match="no directory .*/missing on the controller"):
        lookup.run([str(tmp_path / "missing")], variables={}, dest=str(tmp_path))
