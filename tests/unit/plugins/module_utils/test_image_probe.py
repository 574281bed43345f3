# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Reading the image probe's answer."""

import pytest

from ansible_collections.trainops.cluster.plugins.module_utils.image_probe import parse_image_probe, probe_argv


def test_the_last_json_line_is_the_answer_and_nccl_is_normalized():
    text = ('some image banner\n{"python": "3.11.2"}\n'
            '{"python": "3.13.5", "torch": {"version": "2.6.0", "cuda": "12.8", "nccl": 22705}, "torch_error": null,'
            ' "packages": {"transformers": null}, "llamafactory_unmet": null, "llamafactory_error": null}\n')
    assert parse_image_probe(text) == {"python": "3.13.5", "torch": {"version": "2.6.0", "cuda": "12.8", "nccl": "2.27.5"},
                                       "torch_error": None, "packages": {"transformers": None}, "llamafactory_unmet": None,
                                       "llamafactory_error": None}


def test_no_answer_is_an_error():
    with pytest.raises(ValueError, match="no result"):
        parse_image_probe("Traceback (most recent call last):\n")


def test_the_probe_runs_without_network_with_the_images_python():
    argv = probe_argv("/usr/bin/podman", "img@sha256:ab", "/opt/venv/bin/python", ["transformers"], ["--ulimit", "nofile=1:1"])
    assert argv[:8] == ["/usr/bin/podman", "run", "--rm", "--network", "none", "--ulimit", "nofile=1:1", "--entrypoint"]
    assert argv[8:11] == ["/opt/venv/bin/python", "img@sha256:ab", "-c"]
    assert argv[-1] == "transformers"
