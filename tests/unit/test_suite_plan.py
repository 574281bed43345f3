# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The suite's budget (issue 47): scripts/plan-lanes splits the scenarios into two lanes from recorded times, each lane
in the order its images are ready; scripts/summarize-results writes suite.json (wall time, lanes, scenarios, steps,
the 15 slowest tests) and still ends with "N passed, N failed"; scripts/benchmark compares the wall time with 40 min."""

import json
import sys
from importlib.machinery import SourceFileLoader
from importlib.util import module_from_spec, spec_from_loader
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def load(name):
    """A script (no .py) as a module, without a __pycache__ beside it."""
    loader = SourceFileLoader(name.replace("-", "_"), str(SCRIPTS / name))
    module = module_from_spec(spec_from_loader(loader.name, loader))
    dont_write, sys.dont_write_bytecode = sys.dont_write_bytecode, True
    try:
        loader.exec_module(module)
    finally:
        sys.dont_write_bytecode = dont_write
    return module


planner = load("plan-lanes")
summary = load("summarize-results")

# What the scenarios need today (read from their inventories and prepare.yml, checked below).
NEEDS = {"bad_inventory": {"bookworm"}, "default": {"bookworm"}, "facts": {"bookworm", "trixie"},
         "train": {"bookworm", "trixie", "training"}}
LAST_CI = {"bad_inventory": 95, "facts": 449, "default": 1956, "train": 3709}


def test_the_needs_are_read_from_each_scenarios_inventory_and_prepare():
    assert {scenario: planner.needs_of(scenario) for scenario in NEEDS} == NEEDS
    assert planner.build_order({"training", "bookworm", "trixie"}) == ["bookworm", "trixie", "training"]


def test_a_scenario_of_trixie_nodes_without_the_training_image(tmp_path):
    (tmp_path / "new" / "inventory" / "group_vars").mkdir(parents=True)
    (tmp_path / "new" / "inventory" / "group_vars" / "testbed.yml").write_text("# testbed_suite: forky\ntestbed_suite: 'trixie'\n")
    (tmp_path / "new" / "prepare.yml").write_text("- hosts: all\n")
    assert planner.needs_of("new", tmp_path) == {"bookworm", "trixie"}


def test_the_last_ci_times_put_train_alone_and_the_rest_beside_it():
    """train (3709 s, after every image) alone ends sooner than with facts before it: facts fits in the other lane,
    after the two bookworm scenarios (the shorter first), once trixie is long built."""
    lanes = planner.plan(dict(LAST_CI), NEEDS)
    assert lanes == [["train"], ["bad_inventory", "default", "facts"]]
    ends = [planner.finish(lane, LAST_CI, NEEDS, planner.READY) for lane in lanes]
    assert ends == [planner.READY["training"] + 3709, 95 + 1956 + 449]


def test_facts_goes_before_train_where_it_only_fills_the_wait_for_the_training_image():
    """With default longer than train, facts costs train's lane nothing: it runs while the training image builds."""
    times = dict(LAST_CI, default=4500)
    ready = {"bookworm": 0, "trixie": 100, "training": 900}
    assert planner.plan(times, NEEDS, ready=ready) == [["bad_inventory", "default"], ["facts", "train"]]


def test_a_lanes_wait_for_an_image_counts():
    """t cannot start before its image, at 600 s: a (500 s) runs in that wait, and b gets the other lane. Without the
    wait t would take the empty lane and b would follow it there."""
    times = {"a": 500, "t": 400, "b": 300}
    needs = {"a": {"bookworm"}, "t": {"bookworm", "training"}, "b": {"bookworm"}}
    assert planner.plan(times, needs, ready={"bookworm": 0, "training": 600}) == [["a", "t"], ["b"]]
    assert planner.plan(times, needs, ready={"bookworm": 0, "training": 0}) == [["a"], ["b", "t"]]


def test_four_new_scenarios_of_equal_times_split_two_and_two(tmp_path):
    times = planner.load_times(["w", "x", "y", "z"], None, tmp_path / "none.json")
    lanes = planner.plan(times, {s: {"bookworm"} for s in times})
    assert sorted(len(lane) for lane in lanes) == [2, 2]
    assert sorted(sum(lanes, [])) == ["w", "x", "y", "z"]


def test_one_lane_runs_the_scenarios_whose_images_are_ready_first():
    (lane,) = planner.plan(dict(LAST_CI), NEEDS, lanes=1)
    assert lane == ["bad_inventory", "default", "facts", "train"]
    (lane,) = planner.plan({"train": 10, "facts": 20, "default": 30}, NEEDS, lanes=1)
    assert lane == ["default", "facts", "train"]


def test_a_scenario_without_a_recorded_time_counts_as_the_median(tmp_path):
    committed = tmp_path / "suite-times.json"
    committed.write_text(json.dumps(LAST_CI))
    times = planner.load_times(["default", "new"], None, committed)
    assert times == {"default": 1956, "new": (449 + 1956) / 2}


def test_the_last_runs_times_come_before_the_committed_ones(tmp_path):
    committed = tmp_path / "suite-times.json"
    committed.write_text(json.dumps(LAST_CI))
    previous = tmp_path / "previous-suite.json"
    previous.write_text(json.dumps({"wall_seconds": 4000, "scenarios": {"default": 4000, "new": 10}}))
    assert planner.load_times(["default", "train", "new"], previous, committed) == {"default": 4000, "train": 3709, "new": 10}
    # A run cut short leaves nothing or a broken file: the committed times then.
    previous.write_text("{")
    assert planner.load_times(["default"], previous, committed) == {"default": 1956}


def test_the_command_prints_two_lanes_from_the_previous_run(tmp_path, capsys):
    previous = tmp_path / "previous-suite.json"
    previous.write_text(json.dumps({"scenarios": {"bad_inventory": 5000, "default": 100, "facts": 100, "train": 100}}))
    assert planner.main(["--times", str(previous), "bad_inventory", "default", "facts", "train"]) == 0
    assert capsys.readouterr().out == "bad_inventory\ndefault facts train\n"
    assert planner.main(["bad_inventory"]) == 0
    assert capsys.readouterr().out == "bad_inventory\n\n"
    assert planner.main(["--images", "default", "train"]) == 0
    assert capsys.readouterr().out == "bookworm trixie training\n"


def test_record_merges_a_runs_times_into_the_committed_file(tmp_path):
    committed = tmp_path / "suite-times.json"
    committed.write_text(json.dumps(LAST_CI))
    run = tmp_path / "suite.json"
    run.write_text(json.dumps({"wall_seconds": 1, "scenarios": {"facts": 512.4, "new": 7}, "steps": {"unit": 200}}))
    planner.record(run, committed)
    assert json.loads(committed.read_text()) == dict(LAST_CI, facts=512, new=7)


def junit(path, cases):
    """A JUnit XML file as pytest writes it: (classname, name, seconds, failed)."""
    rows = "".join('<testcase classname="%s" name="%s" time="%.3f">%s</testcase>' % (c, n, t, '<failure message="x"/>' if f else "")
                   for c, n, t, f in cases)
    path.write_text('<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">%s</testsuite></testsuites>' % rows)


@pytest.fixture(name="output")
def fixture_output(tmp_path):
    """A tests/output of a run: the unit step's 20 cases (one failed), two scenarios in two lanes (one failed)."""
    junit(tmp_path / "unit.xml", [("tests.unit.train.test_runner", "test_%02d" % i, i, i == 3) for i in range(20)])
    junit(tmp_path / "molecule-default.xml", [("tests.test_9_doctor", "test_doctor[%s]" % ("x" * 200), 30.5, False)])
    (tmp_path / "steps").write_text("unit fail 230 1000 1230\nnode-image pass 98 1000 1098\n"
                                    "molecule-facts fail 300 1098 1398\nmolecule-default pass 2000 1098 3098\n")
    (tmp_path / "lanes").write_text("2 1098 1398 facts\n1 1098 3098 default\n")
    (tmp_path / "wall").write_text("900 1000 3100\n")
    (tmp_path / "playbooks.jsonl").write_text("".join(json.dumps({"scenario": "default", "test": "t", "playbook": p, "rc": 0, "seconds": s}) + "\n"
                                                      for p, s in [("doctor.yml", 20.4), ("site.yml", 90), ("doctor.yml", 21)]))
    # molecule's own lines as scripts/test stamped them, its colours kept; the recap at its end opens nothing.
    said = ["destroy: \x1b[36mExecuting", "destroy: \x1b[32mExecuted: Successful", "\x1b[33mconverge\x1b[0m: \x1b[36mExecuting\x1b[0m",
            "\x1b[33mconverge\x1b[0m: \x1b[32mExecuted: Successful\x1b[0m", "verify: Executing Testinfra tests found in x",
            "verify: Executing", "verify: Executed: Successful", "destroy: Executing", "destroy: Executed: Successful",
            "converge: Executed: Successful"]
    stamps = [1098, 1102, 1102, 1400, 1400, 1400, 3090, 3090, 3097, 3097]
    (tmp_path / "phases").write_text("".join("%d default %s\n" % (t, line) for t, line in zip(stamps, said)))
    return tmp_path


def test_the_summary_writes_suite_json_and_ends_with_the_counts(output, capsys):
    assert summary.main([str(output)]) == 1
    printed = capsys.readouterr().out.splitlines()
    # unit: 19 cases passed, 1 failed; node-image passed; facts failed without cases; default's one case passed.
    assert printed[-1] == "21 passed, 2 failed"
    assert "suite 2200 s wall, 36.7 min (bootstrap 100 s)" in printed
    assert "lane 1   2000 s  default" in printed and "lane 2    300 s  facts" in printed
    # Where a scenario's time went: its playbook runs, those that took the most first.
    assert "default: destroy 11 s, converge 298 s, verify 1690 s" in printed
    assert "default: 3 playbook runs, 131 s (site.yml 1x 90 s, doctor.yml 2x 41 s)" in printed
    suite = json.loads((output / "suite.json").read_text())
    assert suite["wall_seconds"] == 2200 and suite["bootstrap_seconds"] == 100
    assert suite["lanes"] == {"1": {"seconds": 2000, "scenarios": ["default"]}, "2": {"seconds": 300, "scenarios": ["facts"]}}
    # Only what passed plans the next run: a failed scenario's time says little.
    assert suite["scenarios"] == {"default": 2000}
    assert suite["steps"] == {"unit": 230, "node-image": 98, "molecule-facts": 300, "molecule-default": 2000}


def test_the_summary_says_how_busy_the_cpus_were(output, capsys):
    # /proc/stat's first line as scripts/test sampled it: user nice system idle iowait irq softirq steal guest guest_nice.
    ticks = [(1000, (100, 0, 50, 850, 0)), (1300, (400, 100, 150, 1150, 0)), (1600, (800, 100, 250, 1250, 200)),
             (1700, (900, 100, 300, 1250, 250))]
    (output / "cpu").write_text("".join("%d cpu  %s 0 0 0 0 0\n" % (t, " ".join(map(str, v))) for t, v in ticks) + "1710 cpu 1\n")
    summary.main([str(output)])
    # The whole run: 1150 of 1800 ticks busy (64 %), 100 niced (6 %); the periods from 1000 to 1300, 1300 to 1600, then
    # the rest: 500 of 800, 500 of 800, 150 of 200.
    assert "CPU busy 64 % of the run (niced 6 %); by 5 min: 62 62 75" in capsys.readouterr().out.splitlines()
    assert json.loads((output / "suite.json").read_text())["cpu"]["busy_by_period"] == [62, 62, 75]


def test_the_summary_lists_the_15_slowest_tests(output, capsys):
    summary.main([str(output), "--json-only"])
    assert capsys.readouterr().out == ""
    slowest = json.loads((output / "suite.json").read_text())["slowest"]
    assert [case["seconds"] for case in slowest] == [30.5] + [float(i) for i in range(19, 5, -1)]
    assert slowest[1] == {"test": "train.test_runner::test_19", "seconds": 19.0, "step": "unit"}
    assert slowest[0]["test"].startswith("test_9_doctor::test_doctor[xxx") and len(slowest[0]["test"]) == summary.NAME_WIDTH


def test_the_planner_reads_the_summarys_suite_json(output, tmp_path):
    summary.main([str(output), "--json-only"])
    times = planner.load_times(["default", "facts"], output / "suite.json", tmp_path / "none.json")
    assert times == {"default": 2000, "facts": 2000}


def test_old_steps_lines_without_start_and_end_still_count(tmp_path, capsys):
    (tmp_path / "steps").write_text("sanity pass 137\nansible-lint fail 97\n")
    assert summary.main([str(tmp_path)]) == 1
    assert capsys.readouterr().out.splitlines()[-1] == "1 passed, 1 failed"
    assert json.loads((tmp_path / "suite.json").read_text())["wall_seconds"] is None


def test_benchmark_gives_the_suites_wall_time_against_40_minutes(output, tmp_path):
    benchmark = load("benchmark")
    summary.main([str(output), "--json-only"])
    assert benchmark.suite_budget(output / "suite.json").splitlines() == [
        "suite wall time 2200 s (36.7 min), target 2400 s: 0.92", "  lane 1: 2000 s  default", "  lane 2: 300 s  facts"]
    (output / "wall").write_text("0 100 3000\n")
    summary.main([str(output), "--json-only"])
    assert benchmark.suite_budget(output / "suite.json").splitlines()[0] == "suite wall time 3000 s (50.0 min), target 2400 s: 1.25 OVER"
    assert benchmark.suite_budget(tmp_path / "absent.json") == "no %s: scripts/test writes it at the end of a run" % (tmp_path / "absent.json")
