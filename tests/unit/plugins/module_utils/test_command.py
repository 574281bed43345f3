# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""run_watched: a command stopped at its limit, or at the ready limit while it is not ready, through run_command."""

import os
import signal
import subprocess
import time

import pytest

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.testing import patch_module_args
from ansible_collections.trainops.cluster.plugins.module_utils.command import run_watched


@pytest.fixture(name="module")
def module_fixture():
    with patch_module_args({}):
        yield AnsibleModule(argument_spec={})


def stopper(marker):
    """Ends the test's command the way the module's stop does: every process that carries its marker."""
    def stop():
        subprocess.run(["pkill", "-TERM", "-f", marker], check=False)
    return stop


def test_a_command_that_gets_ready_runs_to_its_end(module):
    rc, out, err, stopped = run_watched(module, ["sh", "-c", "echo ready; sleep 1; echo done >&2"], {}, 10,
                                        lambda: True, 0.5, stopper("never"))
    assert (rc, out, err, stopped) == (0, "ready\n", "done\n", None)


def test_a_command_that_never_gets_ready_is_stopped_at_the_ready_limit(module):
    start = time.monotonic()
    rc, out, dummy, stopped = run_watched(module, ["sh", "-c", "echo waiting; exec sleep 30.1"], {}, 20,
                                          lambda: False, 1, stopper("sleep 30.1"))
    assert stopped == "not ready" and rc == -signal.SIGTERM and out == "waiting\n"
    assert time.monotonic() - start < 4


def test_a_command_that_was_ready_once_is_not_stopped_as_never_ready(module):
    calls = []

    def ready_at_first():
        calls.append(1)
        return len(calls) == 1
    rc, dummy, dummy, stopped = run_watched(module, ["sh", "-c", "sleep 2"], {}, 10, ready_at_first, 1, stopper("never"))
    # Not asked again once it said yes, so not stopped at the ready limit although it would now say no.
    assert (rc, stopped) == (0, None) and calls == [1]


def test_the_command_is_stopped_at_the_limit_though_ready(module):
    start = time.monotonic()
    rc, dummy, dummy, stopped = run_watched(module, ["sh", "-c", "exec sleep 30.2"], {}, 1, lambda: True, 1, stopper("sleep 30.2"))
    assert stopped == "timeout" and rc == -signal.SIGTERM
    assert time.monotonic() - start < 4


def test_environment_reaches_the_command(module):
    assert run_watched(module, ["sh", "-c", "echo $TRAINOPS_X"], {"TRAINOPS_X": "42"}, 5, lambda: True, 5, stopper("x"))[1] == "42\n"
    assert "TRAINOPS_X" not in os.environ
