# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Run a module as Ansible would on a node: its main() in the test process, or as processes of their own."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ansible.module_utils.testing import patch_module_args

# The collection as Ansible imports it: this checkout, linked into .collections/ansible_collections/trainops/cluster.
COLLECTIONS = Path(__file__).resolve().parents[3] / ".collections"


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


def start_module(module, args_file, **args):
    """The module as its own process (several at once, as on several nodes), its arguments in a file as Ansible hands
    them over: a Popen whose stdout is the JSON result."""
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    env = dict(os.environ, PYTHONPATH=str(COLLECTIONS))
    return subprocess.Popen([sys.executable, "-m", module.__name__, str(args_file)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
