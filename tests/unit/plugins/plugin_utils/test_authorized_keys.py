# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""After a key rotation the old cluster key is found; the user's own keys and the current one are not."""

from ansible_collections.trainops.cluster.plugins.plugin_utils.authorized_keys import stale

NEW = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAINEWNEWNEW train@demo"
OLD = 'from="10.96.0.0/24" ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOLDOLDOLD train@demo'
MINE = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMINEMINE alice@laptop"
CURRENT = 'from="10.96.0.0/24" ' + NEW


def test_the_old_cluster_key_is_stale_and_nothing_else():
    text = "\n".join(["# keys", MINE, OLD, CURRENT, "", "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ train@demo-old"]) + "\n"
    assert stale(text, NEW) == [OLD]


def test_nothing_to_do():
    assert stale("", NEW) == [] and stale(None, NEW) == []
    assert stale(CURRENT + "\n" + MINE + "\n", NEW) == []
    # A key without a comment cannot be told apart from the user's own: nothing is removed.
    assert stale(OLD + "\n", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAINEWNEWNEW") == []
