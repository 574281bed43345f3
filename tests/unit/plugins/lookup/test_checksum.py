# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The checksum lookup through Ansible's plugin loader, as a template would call it."""

from __future__ import annotations

import hashlib

import pytest

from ansible.errors import AnsibleLookupError
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import lookup_loader


@pytest.fixture(name="lookup", scope="module")
def fixture_lookup():
    # Through the loader, which reads the options from the plugin's DOCUMENTATION as ansible-playbook does.
    return lookup_loader.get("trainops.cluster.checksum", loader=DataLoader(), templar=None)


def test_digests_of_binary_files_in_term_order(lookup, tmp_path):
    # More than one read block, and bytes that are not text.
    first = bytes(range(256)) * 4099
    (tmp_path / "a.tar.gz").write_bytes(first)
    (tmp_path / "b").write_bytes(b"")
    terms = [str(tmp_path / "a.tar.gz"), str(tmp_path / "b")]
    assert lookup.run(terms, variables={}) == [hashlib.sha256(first).hexdigest(), hashlib.sha256(b"").hexdigest()]


def test_algorithm_option(lookup, tmp_path):
    (tmp_path / "a").write_bytes(b"nccl")
    assert lookup.run([str(tmp_path / "a")], variables={}, algorithm="sha1") == [hashlib.sha1(b"nccl").hexdigest()]


def test_missing_file_names_the_path(lookup, tmp_path):
    with pytest.raises(AnsibleLookupError, match="no file .*/missing.tar.gz on the controller"):
        lookup.run([str(tmp_path / "missing.tar.gz")], variables={})


def test_a_directory_is_not_a_file(lookup, tmp_path):
    with pytest.raises(AnsibleLookupError, match="no file .* on the controller"):
        lookup.run([str(tmp_path)], variables={})


def test_unreadable_file_says_why(lookup, tmp_path, monkeypatch):
    (tmp_path / "a").write_bytes(b"x")

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    # Only the hashing code's open(), where the file is read.
    monkeypatch.setattr("ansible.utils.hashing.open", refuse, raising=False)
    with pytest.raises(AnsibleLookupError, match="cannot read .*/a: .*Permission denied"):
        lookup.run([str(tmp_path / "a")], variables={})
