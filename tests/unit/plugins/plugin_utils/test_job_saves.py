# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A running job's checkpoints from its own files (plugin_utils/job_saves.py): the saves' share of the time with the
interval advised, the storage's end at this rate, and "No space left on device" named with the node and the path. The
listing is read from real files with their write times set (module_utils/_checkpoints.saves), as the first node's
report reads the job's checkpoint directory."""

from __future__ import annotations

import os

from ansible_collections.trainops.cluster.plugins.module_utils import _checkpoints
from ansible_collections.trainops.cluster.plugins.plugin_utils import job_saves

# LLaMA-Factory's Trainer directories: a save every 100 steps, 60 s apart, each file written over 12 s.
FILES = ("adapter_model.safetensors", "optimizer.pt", "rng_state_0.pth", "trainer_state.json")


def trainer_saves(root, count=3, every=60.0, seconds=12.0, size=250_000):
    for index in range(count):
        folder = root / ("checkpoint-%d" % (100 * (index + 1)))
        folder.mkdir()
        start = 1_000_000.0 + index * every
        for number, name in enumerate(FILES):
            path = folder / name
            path.write_bytes(b"x" * size)
            written = start + seconds * number / (len(FILES) - 1)
            os.utime(path, (written, written))
    return {"dir": str(root), "saves": _checkpoints.saves(_checkpoints.listing(str(root))), "free": 40_000_000}


def test_saves_that_take_a_fifth_of_the_time_are_said_with_the_interval_that_would_take_five_percent(tmp_path):
    found = job_saves.saves(trainer_saves(tmp_path))
    assert (found["saves"], found["seconds"], found["interval"], found["share"], found["every"]) == (3, 12.0, 60.0, 0.2, 100)
    assert found["said"][0] == ("checkpoints: saves take 20 % of the time (12 s each, one every 60 s): every 400 steps would "
                                "take 5 %, or save asynchronously")
    # 1 MB a save every 60 s into 40 MB free: full in 40 min.
    assert found["full_minutes"] == 40.0
    assert found["said"][1] == ("checkpoints: %s is full in about 40 min at this rate (40 MB free, a save of 1 MB every 60 s), "
                                "unless older saves are removed (save_total_limit)" % tmp_path)


def test_quick_saves_on_roomy_storage_say_nothing_and_one_save_measures_nothing(tmp_path):
    quick = trainer_saves(tmp_path, seconds=1.0)
    quick["free"] = 10 ** 12
    found = job_saves.saves(quick)
    assert found["share"] < job_saves.SHARE_SAID and found["said"] == [] and found["full_minutes"] > 60 * 24
    one = tmp_path / "one"
    one.mkdir()
    assert job_saves.saves(trainer_saves(one, count=1))["share"] is None
    assert job_saves.saves(None)["saves"] == 0


def test_single_file_saves_have_no_length_to_measure(tmp_path):
    for step in (5, 10):
        path = tmp_path / ("step-%06d.pt" % step)
        path.write_bytes(b"x" * 100)
        os.utime(path, (1000.0 + step, 1000.0 + step))
    found = job_saves.saves({"dir": str(tmp_path), "saves": _checkpoints.saves(_checkpoints.listing(str(tmp_path))), "free": None})
    assert (found["saves"], found["interval"], found["every"], found["seconds"], found["share"]) == (2, 5.0, 5, None, None)


def test_no_space_left_is_named_with_the_node_and_the_path():
    logs = {"node1": ["step 40 loss 0.5"],
            "node2": ["[rank1]: Traceback (most recent call last):",
                      "[rank1]: OSError: [Errno 28] No space left on device: '/mnt/shared/jobs/lf/checkpoints/checkpoint-40/optimizer.pt'"],
            "node3": ["RuntimeError: [enforce fail at inline_container.cc:595] . unexpected pos 64 vs 0: No space left on device"]}
    assert job_saves.no_space(logs) == [
        "node2: No space left on device writing /mnt/shared/jobs/lf/checkpoints/checkpoint-40/optimizer.pt (its log): free space "
        "there, or keep fewer checkpoints (save_total_limit), before a restart",
        "node3: No space left on device (its log): free space there, or keep fewer checkpoints (save_total_limit), before a restart"]
