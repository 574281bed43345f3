# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: packed
short_description: A directory of the controller packed into one zip archive, the same bytes for the same files
version_added: 0.1.0
author:
  - trainops.cluster maintainers (@trainops)
description:
  - Packs each directory named in the terms (a Python package, say) into one zip archive in O(dest), the directory's
    name at the top of every entry, and returns the archive's path. Python imports a package from a zip archive on its
    path (zipimport), so a node runs it from the one file.
  - The archive holds every regular file under the directory (a link is read as the file it points to), byte for byte,
    in name order, stored uncompressed with a fixed date and mode, C(__pycache__) and C(.pyc) left out. The same files
    give the same bytes on any controller, so M(ansible.builtin.copy) sends it only where a node's copy differs, one
    checksum per node instead of one round trip per file (35 files took 28 s of every start; the archive about 1 s).
  - The archive is written (atomically) where it is missing, so several forks packing at once are safe.
  - A relative path is searched like ansible.builtin.file looks up files (the role's C(files/), then the playbook's).
options:
  _terms:
    description: Directories on the controller.
    type: list
    elements: path
    required: true
  dest:
    description: The directory the archives are written to (created if missing), each named after its directory and
      its digest (C(trainops_job-0123abcd4567ef89.zip)), so two checkouts of different files never share one archive.
    type: path
    required: true
"""

EXAMPLES = r"""
- name: Install the node program
  ansible.builtin.copy:
    src: "{{ lookup('trainops.cluster.packed', 'trainops_job', dest='~/.cache/trainops') }}"
    dest: /opt/trainops/lib/trainops_job.zip
    mode: "0644"
"""

RETURN = r"""
_raw:
  description: The path of each archive, in the order of the terms.
  type: list
  elements: path
"""

import hashlib
import io
import os
import tempfile
import zipfile

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

# zip's earliest date: every entry carries it, so the archive depends on the files' bytes alone.
_EPOCH = (1980, 1, 1, 0, 0, 0)


def pack(directory: str) -> bytes:
    """The archive of directory: its files under its own name, in name order, stored, dated _EPOCH, mode 0644."""
    top = os.path.basename(os.path.normpath(directory))
    names = []
    for root, dirs, files in os.walk(directory, followlinks=True):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        names += [os.path.join(root, f) for f in files if not f.endswith(".pyc")]
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as archive:
        for path in sorted(names, key=lambda p: os.path.relpath(p, directory)):
            entry = zipfile.ZipInfo("%s/%s" % (top, os.path.relpath(path, directory).replace(os.sep, "/")), _EPOCH)
            entry.external_attr = 0o100644 << 16
            with open(path, "rb") as source:
                archive.writestr(entry, source.read())
    return out.getvalue()


def write_if_changed(path: str, data: bytes) -> None:
    """Writes data to path through a file of its own in the same directory, renamed into place, unless path holds it."""
    try:
        with open(path, "rb") as current:
            if current.read() == data:
                return
    except FileNotFoundError:
        pass
    handle, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=os.path.dirname(path))
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        dest = os.path.expanduser(self.get_option("dest"))
        paths = []
        for term in terms:
            directory = self.find_file_in_search_path(variables, "files", term, ignore_missing=True)
            if not directory or not os.path.isdir(directory):
                raise AnsibleLookupError("packed: no directory %s on the controller (searched like ansible.builtin.file)" % term)
            try:
                os.makedirs(dest, exist_ok=True)
                data = pack(directory)
                path = os.path.join(dest, "%s-%s.zip" % (os.path.basename(os.path.normpath(directory)), hashlib.sha256(data).hexdigest()[:16]))
                write_if_changed(path, data)
            except OSError as exc:
                raise AnsibleLookupError("packed: cannot pack %s into %s: %s" % (directory, dest, exc)) from exc
            paths.append(path)
        return paths
