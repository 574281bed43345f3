# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: checksum
short_description: Checksum of a file on the controller, computed inside the controller process
version_added: 0.1.0
author:
  - trainops.cluster maintainers (@trainops)
description:
  - Returns the hex digest of each file named in the terms, read in binary.
  - Runs in the controller process. M(ansible.builtin.stat) delegated to localhost gives the same digest, but
    starts a module process for it (about 0.5 s per task).
  - A relative path is searched like ansible.builtin.file looks up files (the role's C(files/), then the playbook's).
options:
  _terms:
    description: Paths of files on the controller.
    type: list
    elements: path
    required: true
  algorithm:
    description: A hash algorithm of Python's hashlib.
    type: str
    default: sha256
    choices: [sha1, sha256, sha512]
"""

EXAMPLES = r"""
- name: Rebuild when the source archive changes
  ansible.builtin.set_fact:
    source_id: "{{ lookup('trainops.cluster.checksum', '/srv/nccl-tests-2.19.6.tar.gz') }}"
"""

RETURN = r"""
_raw:
  description: The hex digest of each file, in the order of the terms.
  type: list
  elements: str
"""

import hashlib

from ansible.errors import AnsibleError, AnsibleLookupError
from ansible.plugins.lookup import LookupBase
from ansible.utils.hashing import secure_hash


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        hash_func = getattr(hashlib, self.get_option("algorithm"))
        digests = []
        for term in terms:
            path = self.find_file_in_search_path(variables, "files", term, ignore_missing=True)
            try:
                digest = secure_hash(path, hash_func) if path else None
            except AnsibleError as exc:
                raise AnsibleLookupError("checksum: cannot read %s: %s" % (path, exc.__cause__ or exc)) from exc
            if digest is None:
                raise AnsibleLookupError("checksum: no file %s on the controller" % term)
            digests.append(digest)
        return digests
