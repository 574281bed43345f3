# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Training progress read from the output of the trainers people run multi-node: public logs of 13 frameworks
(tests/fixtures/progress: each <name>.log with <name>.json, its source and the training steps and losses a reader
labelled by hand, and what must not be read as one), and the reader's rules on lines made to show each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ansible_collections.trainops.cluster.plugins.module_utils._progress import POINTS_KEPT, Progress

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "progress"
LOGS = sorted(path.stem for path in FIXTURES.glob("*.log"))


def read(text, pattern=None):
    progress = Progress("node1", "run-1", pattern, clock=lambda: 0.0)
    progress.feed(text)
    return [[step, loss] for _at, step, loss in progress.record["points"]]


def test_the_public_logs_cover_the_frameworks_people_run_multi_node():
    frameworks = {json.loads((FIXTURES / (name + ".json")).read_text())["framework"] for name in LOGS}
    assert len(frameworks) >= 12, frameworks
    assert all(json.loads((FIXTURES / (name + ".json")).read_text())["source"].startswith("https://") for name in LOGS)


@pytest.mark.parametrize("name", LOGS)
def test_every_training_step_and_loss_of_a_public_log_is_read_and_nothing_else(name):
    labelled = json.loads((FIXTURES / (name + ".json")).read_text())
    assert read((FIXTURES / (name + ".log")).read_text(encoding="utf-8", errors="replace")) == labelled["points"]


@pytest.mark.parametrize("lines, points", [
    # An evaluation bar after the training bar (the Trainer's have no description) is no step.
    ([" 50%|█████     | 85/170 [01:00<01:00,  1.4it/s]", "***** Running Evaluation *****", "  0%|          | 0/72 [00:00<?, ?it/s]",
      " 99%|█████████▉| 71/72 [00:09<00:00,  7.1it/s]", "{'eval_loss': 1.3, 'epoch': 1.0}", " 51%|█████     | 86/170 [01:01<01:00,  1.4it/s]"],
     [[85, None], [86, None]]),
    # ... nor when no banner says so: a bar of another total than the training bar's.
    ([" 50%|█████     | 85/170 [01:00<01:00,  1.4it/s]", " 99%|█████████▉| 71/72 [00:09<00:00,  7.1it/s]"], [[85, None]]),
    # Loading, tokenizing and download bars, and a bar at 0 (nothing done yet), are no steps.
    (["Loading checkpoint shards: 100%|██████████| 4/4 [00:05<00:00,  1.25s/it]",
      "Running tokenizer on dataset (num_proc=16): 100%|██████████| 1000/1000 [00:02<00:00, 400 examples/s]",
      "model.safetensors:  45%|████▌     | 450M/1.00G [00:10<00:12, 45.0MB/s]", "  0%|          | 0/170 [00:00<?, ?it/s]"], []),
    # Capitalised and prefixed losses, a loss scale that is no loss, and a validation line.
    ([" iteration       10/    1000 | lm loss: 7.123456E+00 | loss scale: 65536.0 |", "Epoch 0 | Batch 11 | Loss: 2.5",
      "step 12: reduced_train_loss=2.25", " validation loss at iteration 12 | lm loss value: 6.5 |"],
     [[10, 7.123456], [11, 2.5], [12, 2.25]]),
    # nanoGPT: the iteration lines are steps, its evaluation line is not.
    (["iter 100: loss 3.4567, time 123.45ms, mfu 12.34%", "step 100: train loss 3.4567, val loss 3.5678",
      "iter 101: loss 3.4501, time 123.40ms, mfu 12.35%"], [[100, 3.4567], [101, 3.4501]]),
    # Ranks' lines run together behind their labels: each rank's number stays its own.
    (['[rank0]:step: 5  loss:  1.25[rank1]:step: 5  loss:  1.5', "[rank0]:step: 6  loss:  1.125"], [[5, 1.25], [6, 1.125]]),
    # Forms as their code prints them: fairseq's train_inner line, PyTorch's ImageNet example (per epoch: 1 x 5005 + 10)
    # and CIFAR tutorial, DeepSpeed-Chat's, OpenRLHF's bar, verl's key-value line, torchtitan in colour without a label.
    (["2024-01-01 10:00:00 | INFO | train_inner | epoch 001:    100 / 1000 loss=2.345, nll_loss=2.1, ppl=4.3, num_updates=100, lr=0.0005",
      "Epoch: [1][  10/5005]\tTime  0.512 ( 0.601)\tData  0.101 ( 0.203)\tLoss 6.9078e+00 (6.9082e+00)\tAcc@1   0.00 (  0.10)",
      "Test: [ 10/196]\tTime  0.2\tLoss 6.9 (6.9)", "[2,  2000] loss: 1.304",
      "Epoch: 0, Step: 3000, Rank: 0, loss = 2.25",
      "Train epoch [1/3]:  10%|#         | 3010/30100 [00:10<01:30, 1.00it/s, gpt_loss=2.125, lr=1e-05]",
      "step:3020 - actor/loss:0.5 - critic/score/mean:1.0",
      "\x1b[31mstep: 3030  \x1b[32mloss:  8.1234  \x1b[33mmemory: 1.41GiB(1.79%)\x1b[39m"],
     [[100, 2.345], [5015, 6.9078], [2000, 1.304], [3000, 2.25], [3010, 2.125], [3020, 0.5], [3030, 8.1234]]),
    # Settings that name steps are no steps.
    (["Gradient Accumulation steps = 8", "  Total optimization steps = 170", "max_steps: 100", "Training starts at step 1"], []),
    # The Trainer's closing metrics block (behind srun's label here) names the run's average loss, no step's; what
    # follows it is read again (a second training in the same log).
    ([" 50%|#####     | 5/10 [00:05<00:05,  1.0it/s]", "0: ***** train metrics *****", "0:   epoch                    =        1.0",
      "0:   train_loss               =     0.9123", "Saving the model", " 60%|######    | 6/10 [00:06<00:04,  1.0it/s]",
      "{'loss': 0.8, 'learning_rate': 1e-05, 'epoch': 1.2}"], [[5, None], [6, 0.8]]),
])
def test_forms_and_traps(lines, points):
    assert read("\n".join(lines)) == points


def test_a_bar_is_read_when_it_is_painted_not_at_the_next_line_end():
    progress = Progress("node1", "run-1", clock=lambda: 0.0)
    progress.feed("  Total optimization steps = 170\n")
    assert progress.peek("\r 10%|█         | 17/170 [00:35<05:03,  1.98s/it]") is True
    assert progress.record["step"] == 17
    assert progress.peek("\r 10%|█         | 17/1") is False  # cut mid-number: nothing read


def test_a_users_pattern_is_read_first():
    assert read("it=40 | J=0.5\nit=41 | J=0.25", r"it=(?P<step>\d+) \| J=(?P<loss>[\d.]+)") == [[40, 0.5], [41, 0.25]]


def test_a_restart_may_log_its_steps_again():
    assert read("step 5 loss 1.0\nstep 6 loss 0.9\nstep 5 loss 0.95\nRestarting worker group\nstep 5 loss 0.95") == [
        [5, 1.0], [6, 0.9], [5, 0.95]]


def test_a_long_history_is_thinned_not_cut():
    progress = Progress("node1", "run-1", clock=iter(range(100000)).__next__)
    for step in range(1, 3001):
        progress.feed("step %d" % step)
    points = progress.record["points"]
    assert len(points) <= POINTS_KEPT and points[0][1] == 1 and points[-1][1] == 3000
