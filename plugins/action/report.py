# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""trainops.cluster.report: write a file on the controller from inside the controller process.

No module runs and the target is never contacted, so a report costs milliseconds instead of a module process
(about 0.3-0.5 s for ansible.builtin.copy with delegate_to: localhost). Documentation: plugins/modules/report.py.
"""

from __future__ import annotations

import os
import stat
import tempfile

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_bytes, to_native
from ansible.plugins.action import ActionBase

ARGUMENT_SPEC = {
    "dest": {"type": "path", "required": True},
    "content": {"type": "str", "required": True},
    "mode": {"type": "raw", "default": "0644"},
}
DIR_MODE = 0o755


def parse_mode(mode):
    """An octal mode as tasks write it: '0644' or '644', or the int that YAML makes of an unquoted 0644."""
    if isinstance(mode, int) and not isinstance(mode, bool):
        value = mode
    else:
        try:
            value = int(str(mode), 8)
        except ValueError:
            raise ValueError("mode must be an octal number such as '0644', not %r" % (mode,)) from None
    if not 0 <= value <= 0o7777:
        raise ValueError("mode %r is out of range (0000-7777)" % (mode,))
    return value


def pending(dest, data, mode):
    """What makes dest hold data with mode: {'write': content missing or different, 'chmod': only the mode differs}."""
    try:
        info = os.stat(dest)
    except FileNotFoundError:
        return {"write": True, "chmod": False}
    if stat.S_ISDIR(info.st_mode):
        raise IsADirectoryError("dest is a directory")
    same = info.st_size == len(data)
    if same:
        with open(dest, "rb") as handle:
            same = handle.read() == data
    return {"write": not same, "chmod": same and stat.S_IMODE(info.st_mode) != mode}


def make_parents(path, mode=DIR_MODE):
    """Create the missing directories above path, each with mode whatever the umask."""
    missing = []
    parent = os.path.dirname(path)
    while not os.path.isdir(parent):
        missing.append(parent)
        parent = os.path.dirname(parent)
    for directory in reversed(missing):
        try:
            os.mkdir(directory)
        except FileExistsError:
            # Another fork writing a sibling file (one log per host) made it first.
            continue
        os.chmod(directory, mode)


def replace(dest, data, mode):
    """Write a temporary file next to dest and rename it over dest, so a reader never sees half a file."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(dest), prefix=".%s." % os.path.basename(dest))
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, dest)
    except OSError:
        os.unlink(tmp)
        raise


def ensure(dest, content, mode, check_mode=False):
    """Make dest (a controller path) hold content with mode; in check mode only say whether that would change it.

    Returns {'changed', 'dest' (absolute), 'size' (bytes of content)}.
    """
    dest = os.path.abspath(dest)
    data = to_bytes(content, errors="surrogate_or_strict")
    todo = pending(dest, data, mode)
    if not check_mode:
        if todo["write"]:
            make_parents(dest)
            replace(dest, data, mode)
        elif todo["chmod"]:
            os.chmod(dest, mode)
    return {"changed": todo["write"] or todo["chmod"], "dest": dest, "size": len(data)}


class ControllerFile(ActionBase):
    """An action that writes one file on the controller (see ensure) and never contacts the target.

    Subclasses give ARGUMENT_SPEC and produce(args) -> (dest, content, mode, more results); a failure to produce or
    write the file fails the task naming the file."""

    TRANSFERS_FILES = False
    # Everything happens on the controller: no connection to the target is opened.
    _requires_connection = False
    ARGUMENT_SPEC = {}

    def produce(self, args):
        raise NotImplementedError

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        args = self.validate_argument_spec(argument_spec=self.ARGUMENT_SPEC)[1]
        dest = args.get("dest")
        try:
            dest, content, mode, more = self.produce(args)
            result.update(ensure(dest, content, mode, self._task.check_mode), **more)
        except (OSError, ValueError) as e:
            raise AnsibleActionFail("%s: %s" % (dest, to_native(e))) from e
        return result


class ActionModule(ControllerFile):
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def produce(self, args):
        return args["dest"], args["content"], parse_mode(args["mode"]), {}
