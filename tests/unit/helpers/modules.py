# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Run a module's main() in the test process, as Ansible would on a node."""

import json

import pytest

from ansible.module_utils.testing import patch_module_args


def script(path, body):
    """An executable /bin/sh script at path (its directory made): a fake of the command a module runs."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return str(path)


def run_module(module, capsys, **args):
    """The module's JSON result for these arguments (exit_json and fail_json both end in SystemExit)."""
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            module.main()
    return json.loads(capsys.readouterr().out)
