# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
from ansible_collections.trainops.cluster.plugins.module_utils.hosts_file import BEGIN, END, render

ENTRIES = [{"ip": "10.72.0.11", "names": ["node1"]}, {"ip": "10.72.0.12", "names": ["node2.ml.example", "node2"]}]
BLOCK = "\n".join([BEGIN, "10.72.0.11\tnode1", "10.72.0.12\tnode2.ml.example node2", END]) + "\n"


def test_fresh_file_gets_block_after_existing_lines():
    text = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost\n"
    assert render(text, ENTRIES) == text + "\n" + BLOCK


def test_rerun_changes_nothing():
    once = render("127.0.0.1 localhost\n", ENTRIES)
    assert render(once, ENTRIES) == once


def test_own_name_on_127_0_1_1_is_removed():
    text = "127.0.0.1\tlocalhost\n127.0.1.1\tnode1.ml.example node1\n"
    out = render(text, ENTRIES)
    assert "127.0.1.1\tnode1.ml.example\n" in out  # the FQDN is not a cluster name here, so it stays
    assert "127.0.1.1\tnode1.ml.example node1" not in out


def test_loopback_line_loses_cluster_names_only():
    out = render("127.0.0.1 localhost node2 # installer\n", ENTRIES)
    assert out.startswith("127.0.0.1\tlocalhost # installer\n")


def test_conflicting_and_stale_entries_go():
    text = "10.71.0.12 node2\n10.72.0.11 node1\n" + BEGIN + "\n10.72.0.99\tnode9\n" + END + "\n"
    out = render(text, ENTRIES)
    assert "node9" not in out  # left the inventory
    assert "10.71.0.12" not in out  # mapped node2 to its management address
    assert out.startswith("10.72.0.11 node1\n")  # agrees with the block: kept as is


def test_comments_and_blank_lines_survive():
    text = "# static entries\n\n192.168.1.1 gateway\n"
    assert render(text, ENTRIES).startswith("# static entries\n\n192.168.1.1 gateway\n\n" + BEGIN)


def test_empty_file():
    assert render("", ENTRIES) == BLOCK
