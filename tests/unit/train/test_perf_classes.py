# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The performance classes as one table (plugins/module_utils/_perf_classes.py): every class recorded on the train
cluster is named from its row with its row's words, the rules keep their order, a new row is a new class without a
change to the judge, and no other code spells a class's word."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import recorded_windows
from test_defined_once import literals

from trainops_job import _perf_classes as classes
from trainops_job import judge, perf

FIXTURES = Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "train"
# The recorded job folders (tests/fixtures/train) of the classes a live job on the train cluster showed.
RECORDED = {"input-bound": classes.INPUT, "checkpoint-bound": classes.CHECKPOINT, "slow-link": classes.COMMUNICATION,
            "straggler": classes.STRAGGLER}


@pytest.mark.parametrize("folder", sorted(RECORDED))
def test_each_recorded_class_is_named_with_its_rows_words(folder):
    row = RECORDED[folder]
    perfs, now = recorded_windows(FIXTURES / folder / "job")
    found = judge.bottleneck(perfs, now, max(window["attempt"] for window in perfs.values()))
    assert found and found["kind"] == row.name, found
    assert found["text"].startswith(row.name + ": ")
    if row.place:
        assert row.doing in found["text"] and row.advice in found["text"], found["text"]


def test_the_rules_name_every_class_and_each_scope_once_per_class():
    assert {rule.kind for rule in classes.RULES} == {classes.CHECKPOINT, classes.INPUT, classes.ELSEWHERE, classes.STRAGGLER,
                                                     classes.COMMUNICATION}
    assert len({(rule.kind, rule.scope) for rule in classes.RULES}) == len(classes.RULES)
    # Every node's saves or data come before the straggler (the saving rank is busy while the others wait); one node's
    # before a slow GPU (its GPUs idle while it waits); the network last.
    order = [(rule.kind.name, rule.scope) for rule in classes.RULES]
    assert order.index(("checkpoint-bound", classes.EVERY)) < order.index(("straggler", classes.BUSY)) < order.index(
        ("input-bound", classes.ONE)) < order.index(("straggler", classes.GPU_CLOCKS)) < order.index(("communication-bound", classes.NETWORK))
    # A wait in the job's own code comes after the known places (a declared or known loader is input, a save a save).
    assert order.index(("input-bound", classes.EVERY)) < order.index(("wait-bound", classes.EVERY))
    assert order.index(("input-bound", classes.ONE)) < order.index(("wait-bound", classes.ONE))
    # Every place class is found in a stack and has a bound to be named at.
    assert all(row.place and row.files and row.bound for row in classes.PLACES)


def test_a_new_row_is_a_new_class(monkeypatch):
    """A tokenizer's frames as a class of their own: a row and its rules, nothing else."""
    tokenizing = classes.PerfClass("tokenizer-bound", "tokenizer", ("tokenizers/",), r"(?:^|_)tokeni[sz]e", 0.5,
                                   "tokenize their text", "tokenize once before the run (tokenized_path)", "the tokenizer")
    monkeypatch.setattr(classes, "PLACES", classes.PLACES + (tokenizing,))
    monkeypatch.setattr(classes, "RULES", (classes.Rule(tokenizing, classes.EVERY, "a test's"),) + classes.RULES)

    def stack(name: str, filename: str) -> list:  # py-spy's dump: threads, their frames innermost first
        return [{"thread_name": "MainThread", "frames": [{"name": name, "filename": filename, "line": 1}]}]

    assert perf.place(stack("encode_batch", "/usr/lib/python3/dist-packages/tokenizers/implementations/base.py"), "R") == "tokenizer"
    assert perf.place(stack("tokenize_batch", "/work/train.py"), "S") == "tokenizer"
    assert perf.place(stack("forward", "/work/train.py"), "R") == "compute"
    window = {"at": 100.0, "seconds": 10.0, "attempt": 0, "ranks": {"0": {"busy": 0.9, "cpu": 0.9, "places": {"tokenizer": 4, "compute": 1}}}}
    found = judge.bottleneck({"node1": window, "node2": window}, 105.0, 0)
    assert found["kind"] == "tokenizer-bound" and found["node"] is None, found
    assert found["text"].startswith("tokenizer-bound: every node's ranks tokenize their text 80 % of the time (node1 80 %, node2 80 %)")
    assert found["text"].endswith("tokenize once before the run (tokenized_path)")


def test_no_other_code_spells_a_class_word():
    words = {row.name for row in classes.CLASSES}
    home = {"_perf_classes.py"}
    spelled = [(path.name, text) for path, text in literals() if path.name not in home and (
        text in words or any(re.match(re.escape(word) + r"\b[:( ]", text) for word in words))]
    assert spelled == []
