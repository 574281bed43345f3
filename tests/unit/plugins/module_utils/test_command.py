# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""run_watched: a command stopped at its limit, or at the ready limit when its ready line never comes."""

import time

from ansible_collections.trainops.cluster.plugins.module_utils.command import run_watched


def test_a_command_that_gets_ready_runs_to_its_end():
    rc, output, stopped = run_watched(["sh", "-c", "echo ready; sleep 1; echo done >&2"], {}, 10, "^ready", 0.5)
    assert (rc, stopped) == (0, None) and output == "ready\ndone\n"


def test_a_command_that_never_gets_ready_is_stopped_at_the_ready_limit():
    start = time.monotonic()
    rc, output, stopped = run_watched(["sh", "-c", "echo waiting; sleep 30"], {}, 20, "^ready", 1)
    assert stopped == "not ready" and rc < 0 and output == "waiting\n"
    assert time.monotonic() - start < 3


def test_the_whole_group_is_stopped_at_the_limit():
    start = time.monotonic()
    # The child ignores SIGTERM: only the SIGKILL that follows ends it, and the pipe it holds closes.
    rc, output, stopped = run_watched(["sh", "-c", "echo ready; (trap '' TERM; sleep 30) & wait"], {"X": "1"}, 1, "^ready", 1)
    assert stopped == "timeout" and output.startswith("ready")
    assert time.monotonic() - start < 6


def test_environment_reaches_the_command():
    assert run_watched(["sh", "-c", "echo $TRAINOPS_X"], {"TRAINOPS_X": "42"}, 5, "42", 5)[1] == "42\n"
