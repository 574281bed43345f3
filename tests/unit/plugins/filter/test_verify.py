# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The verify filters as roles/verify calls them (arguments as Jinja passes them)."""

from ansible_collections.trainops.cluster.plugins.filter import verify

SETTINGS = {"all_reduce_perf": "all_reduce_perf", "mpirun": "mpirun", "env_wrapper": "trainops-env", "python": "python3",
            "cpu_program": "cpu_allreduce.py", "min_bytes": 8, "max_bytes": "8G", "gpu_max_bytes": "128M", "iters": 20, "warmup": 5}


def test_step_yml_records_a_step_that_did_not_run_as_skipped():
    """step.yml: verify_step | combine({'skipped': reason}) | verify_judge({}, {}, {})."""
    step = verify.verify_plan(["n1", "n2"], {"n1": 1, "n2": 1}, SETTINGS)[3]
    verdict = verify.verify_judge(dict(step, skipped="not run: node pairs failed"), {}, {}, {})
    assert verdict["passed"] is None and verdict["verdict"] == "skipped" and verdict["skipped"] == "not run: node pairs failed"


def test_plan_takes_the_expected_gpus_and_the_facts():
    """main.yml: verify_plan(verify_gpus, verify_settings, verify_expect_gpus, verify_gpu_facts), null where unset."""
    steps = verify.verify_plan(["n1", "n2"], {"n1": 0, "n2": 0}, SETTINGS, "8", None)
    assert steps[0]["rung"] == "gpus" and steps[0]["problems"][0] == "n1 reports 0 GPUs, expected 8 (verify_expect_gpus)"
    assert verify.verify_plan(["n1", "n2"], {"n1": 0, "n2": 0}, SETTINGS, None, {})[-1]["rung"] == "cpu"


def test_judge_takes_the_user_threshold_as_jinja_passes_it():
    step = verify.verify_plan(["n1"], {"n1": 2}, SETTINGS)[1]
    output = {"rc": 0, "timed_out": False, "seconds": 1.0, "debug": None,
              "result": {"complete": True, "rows": [{"size": 8, "out_of_place": {"busbw": 5.0, "wrong": 0}, "in_place": None}],
                         "wrong_total": 0, "ranks": [{"rank": 0, "host": "n1"}, {"rank": 1, "host": "n1"}]}}
    verdict = verify.verify_judge(step, {"n1": output}, {}, {}, "0.5", {}, "10")
    assert verdict["verdict"] == "FAIL" and verdict["runs"][0]["reasons"] == ["busbw 5.0 GB/s < threshold 10.0 GB/s"]
