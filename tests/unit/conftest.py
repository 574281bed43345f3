# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Import the collection through Ansible's collection finder, as ansible-test units and ansible-playbook do, so that
Ansible's plugin loaders (with the options each plugin documents) find trainops.cluster's plugins too."""

from __future__ import annotations

import os

from ansible.utils.collection_loader import AnsibleCollectionConfig
from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder

# ansible-test units installs its own finder first.
if AnsibleCollectionConfig.collection_finder is None:
    _AnsibleCollectionFinder(paths=[os.path.join(os.path.dirname(__file__), "..", "..", ".collections")])._install()
