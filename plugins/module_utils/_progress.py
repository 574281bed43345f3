# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A training job's progress in its output: the training step and the training loss that each line names.

Node side: the job runner on the nodes (roles/train/files/trainops_job, which links this file) reads every line of a
job's output with it; standard library only. Read as the trainers people run multi-node print them (the public logs
in tests/fixtures/progress, each with its source):
- progress bars "12/100 [": the Hugging Face Trainer, LLaMA-Factory, axolotl, accelerate and ms-swift ("Train:"),
  Lightning's "Epoch 1:" and Composer's "train Epoch 0:" (counted per epoch: the step is epoch x total + count),
  torchtune's "1|25|Loss: 1.26:" (its step is the 25);
- log dicts and key-value lines: "{'loss': 1.2, ...}", ms-swift's 'global_step/max_steps': '10/100', NeMo's
  "global_step=99.0", Megatron-LM's "iteration 100/ 5000 | ... | lm loss: 7.1E+00", torchtitan's "step: 14  loss: 3.2",
  DeepSpeed's "step=10" and "steps: 10 loss: 2.3", nanoGPT's "iter 100: loss 3.45", Composer's "[batch=10/100]:" with
  "Train loss/train/total: 2.3" below it, Ray Train's "Training finished iteration 3" with its result table, and plain
  scripts' "Step [100/600], Loss: 0.23" or "Batch 100 | Loss: 2.3";
- the shipped training script's records ('TRAINOPS {"event": "step", ...}').
Behind any rank, host or logging label, in colour or not, with several ranks' lines run together. Only training counts:
a line of evaluation, validation, testing or sanity checking, and a bar of loading, tokenizing, mapping or downloading,
name no step and no loss; so does a bar without a description whose total is not the training bar's (the Trainer's
evaluation bars have none), and the Trainer's closing summary ("{'train_runtime': ..., 'train_loss': ...}" and its
"***** train metrics *****" block: train_loss there is the run's average). A user's own pattern
(train_progress_pattern: a regex with named groups step and loss) is tried first.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any, Callable

from ._labels import RANK_INSIDE_RE, split

POINTS_KEPT = 1000
_SEEN_KEPT = 100000
_FLOAT = r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?"
_RECORD = "TRAINOPS {"
_DIGIT_RE = re.compile(r"\d")
# Every form read has one of these: a line without them is passed over at once.
_WORTH_RE = re.compile(r"step|iter|batch|loss|epoch|\[|\|\d|TRAINOPS|total optim|val|test|sanity|predict|sav|ckpt", re.I)
_LINE_ENDS_RE = re.compile(r"[\r\n]")
_DECODER = json.JSONDecoder()
# A line of evaluation, validation, testing or a sanity check: no training step or loss in it.
_EVAL_RE = re.compile(r"\b(?:eval\w*|val|valid\w*|validat\w*|test|testing|predict\w*|sanity)\b", re.I)
# Lines about checkpoints and reports name steps and losses that are not a new step's (a file named
# "val_loss=1.26-step=10.ckpt", Ray's report of an epoch's average).
_SKIP_RE = re.compile(r"checkpoint|\bsav(?:e|ed|ing)\b|\.ckpt|TrainingReport", re.I)
# A bar: tqdm's "{desc}: {percentage}%|{bar}| {n}/{total} [{elapsed}<...".
_BAR_RE = re.compile(r"\b(\d+)(?:/(\d+)|it) \[")
_PERCENT_RE = re.compile(r"\s*\d{1,3}%\|")
# A repaint of the Trainer's bar as it is, nothing around it: read without the other patterns.
_PLAIN_BAR_RE = re.compile(r"^\s*\d{1,3}%\|[^|\[\]]*\|\s*(\d+)/(\d+) \[[^\]]*\]\s*$")
# A bar's description glued to what came before it ("val_loss=9.740Epoch 0: :   0%|"): a repaint that lost its line end.
_GLUED_HEAD_RE = re.compile(r"(?<=\S)(?=[A-Z][A-Za-z]*(?: [A-Za-z]+)*(?: \d+)?: :?\s*\d{1,3}%\|)")
_NOT_TRAINING_RE = re.compile(r"load|shard|token|map\b|download|generat|convert|extract|prepar|filter|process|sav|upload|"
                              r"fetch|split|merg|pack|dataset|writ|read|copy|build|compil|index|resolv|eval|valid|test", re.I)
_EPOCH_RE = re.compile(r"\bepoch\s+(\d+)(?![\d.])", re.I)
# Steps that name themselves, first match wins.
_EXPLICIT = (
    ("global_step/", re.compile(r"global_step/max_steps['\"]?:\s*['\"]?(\d+)/(\d+)")),  # ms-swift
    ("global_step", re.compile(r"(?<![\w/])global_step['\"]?\s*[:=]\s*(\d+)(?:\.0*)?(?![\d.])")),  # NeMo, log dicts (not DeepSpeed's timer's)
    ("|loss:", re.compile(r"(?:^|\s)\d+\|(\d+)\|Loss:")),  # torchtune: EPOCH|STEP|Loss
    ("iteration", re.compile(r"\biteration\s*[=:]?\s*(\d+)\s*/\s*(\d+)")),  # Megatron-LM, Megatron-DeepSpeed, NeMo 2
    ("[batch=", re.compile(r"^\s*(?:\[epoch=\d+\])?\[batch=(\d+)/\d+\]:\s*$")),  # Composer's console logger: a step's block
    ("num_updates", re.compile(r"\bnum_updates=(\d+)")),  # fairseq
)
# PyTorch's examples: ImageNet's "Epoch: [2][ 10/5005]" (counted per epoch), the CIFAR tutorial's "[2,  2000] loss:".
_EPOCH_BATCH_RE = re.compile(r"Epoch: \[(\d+)\]\[\s*(\d+)/(\d+)\]")
_TUTORIAL_RE = re.compile(r"^\[\s*\d+,\s*(\d+)\]\s+loss")
# Composer before 0.12 put "[batch=N/M]: " before each value, N the batch under way: its loss is the (N+1)th step's.
_COMPOSER_LINE_RE = re.compile(r"^\s*(?:\[epoch=\d+\])?\[batch=(\d+)/\d+\]:\s*\S")
# Ray Train's driver counts its reports: the step only of a job whose workers print none of their own.
_RAY_RE = re.compile(r"Training finished iteration (\d+)")
# PyTorch's examples: "Train Epoch: 1 [640/60000 (1%)]" counts samples within the epoch.
_SAMPLES_RE = re.compile(r"\bEpoch:?\s*(\d+)\s*\[(\d+)/(\d+)\b")
# "step 12", "Step: 12", "step=12", "steps: 12", "iter 100:", "Batch 100", "Step [100/600]".
_COUNTER_RE = re.compile(r"(?<![\w/])(?:steps?|iter(?:ation)?s?|batch(?:es)?)\b\s*([:=#]?)\s*\[?\s*(\d+)(\s*/\s*\d+|:)?(?![\d.])", re.I)
# A counter word after one of these is a setting or a count, not the step ("gradient accumulation steps 1").
_QUALIFIERS = {"total", "max", "num", "number", "warmup", "accumulation", "optimization", "logging", "save", "eval", "skipped",
               "nan", "per", "of", "at", "from", "every", "after", "before", "training", "remaining", "until", "to"}
_LOSS_RE = re.compile(r"((?:\b[A-Za-z][\w.-]*[ _])?loss(?:_step|/[\w/]+)?)['\"]?(?:\s*[:=]\s*|\s+)['\"]?(" + _FLOAT + r")(?![\w.])", re.I)
_NOT_LOSS_RE = re.compile(r"(?:^|[^a-z])(?:val|valid|validation|eval|test)(?:$|[^a-z])|eval", re.I)
# The Trainer's banner names the training bar's total; its closing summary's train_loss is an average, not a step's.
_TOTAL_RE = re.compile(r"Total optimization steps = ([\d,]+)")
# "Loss in epoch 3 = 0.66": a plain script's loss with its counter.
_LOSS_AT_RE = re.compile(r"\bloss\s+(?:in|at|for|of)\s+(?:epoch|step|iteration|iter|batch)\s+(\d+)\s*[:=]\s*(" + _FLOAT + ")", re.I)
# A line that says the trainer starts over: steps it logged before may come again.
_RESTART_RE = re.compile(r"restart", re.I)
_SUMMARY = "train_runtime"
# The Trainer's closing block (its log_metrics, which LLaMA-Factory and the Hugging Face examples call after training):
# "***** train metrics *****", then a "  key = value" row a figure ("  train_loss = 1.0481", the run's average, no step's).
_METRICS_BANNER_RE = re.compile(r"\*{3,}\s*\w+ metrics\s*\*{3,}")
_METRICS_ROW_RE = re.compile(r"^\s*[\w./-]+\s*=\s*\S+\s*$")


def _loss(text: str) -> float | None:
    for found in _LOSS_RE.finditer(text):
        if not _NOT_LOSS_RE.search(found.group(1)):
            return float(found.group(2))
    return None


def _counter(text: str, loss: float | None) -> int | None:
    for found in _COUNTER_RE.finditer(text):
        before = text[:found.start()].split()
        if before and before[-1].strip("_-,|([").lower() in _QUALIFIERS:
            continue
        if found.group(1) or found.group(3) or not text[:found.start()].strip(" |[>") or loss is not None:
            return int(found.group(2))
    return None


def _record(text: str) -> tuple[int | None, float | None]:
    """(step, loss) of the shipped script's step records in text."""
    step = loss = None
    start = text.find(_RECORD)
    while start >= 0:
        try:
            data, end = _DECODER.raw_decode(text, start + len(_RECORD) - 1)
        except ValueError:
            data, end = None, start + len(_RECORD)
        if isinstance(data, dict) and data.get("event") == "step" and isinstance(data.get("step"), int):
            step, loss = data["step"], data.get("loss") if isinstance(data.get("loss"), (int, float)) else None
        start = text.find(_RECORD, end)
    return step, loss


def _apart(text: str) -> list:
    """A segment's progress bars apart from what follows each (a log dict, a message, the next repaint where a log lost
    the carriage returns): each bar up to the end of its bracket, or up to the next bar glued to it."""
    cuts = {m.start() for m in _GLUED_HEAD_RE.finditer(text)} if text.count("%|") > 1 else set()
    for found in _BAR_RE.finditer(text):
        close = text.find("]", found.end())
        if close >= 0 and not any(found.end() < cut <= close for cut in cuts):
            cuts.add(close + 1)
    bounds = [0] + sorted(cuts) + [len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:]) if a < b]


class Reader:
    """Reads output segments (lines, or what a carriage return separates) one after another, keeping what the lines
    before tell of the next: the training bar's total, an evaluation under way, whose counter is the step."""

    def __init__(self, pattern: str | None = None):
        self.pattern = re.compile(pattern) if pattern else None
        self.total: int | None = None  # the training bar's total, once seen
        self.confirmed = False  # ... and known for the training's (the Trainer's banner, a loss after its bar)
        self.eval_totals: set[int] = set()
        self.evaluating = False  # a banner said evaluation: the next bar without a description is its
        self.stepped = False  # a step was read (Ray's report count is the step of a job whose workers print none)
        self.ray = False  # Ray's report count is the step: its workers' per-epoch bars interleave, out of order
        self.detached = False  # Ray's report count read, not the step: losses until the next step are not the step's
        self.validating = False  # a validation bar under way: Lightning 1.x's epoch bar counts its batches too
        self.epoch: int | None = None  # the epoch of the last epoch bar
        self.bar_total: int | str | None = None  # the total of the bar the last segment's step came from ("it" without one), or None
        self.dropped: int | None = None  # a total taken for the training bar's by mistake (its steps are not training's)
        self.summing_up = False  # the Trainer's closing metrics block under way: its rows are no step's figures

    def summary(self, segment: str) -> bool:
        """True for a line of the Trainer's closing metrics block: its banner, and the "key = value" rows after it up to
        the first other line. Read before anything else: its rows name no step, and a loss without a step would be taken
        for the last step's."""
        if "metrics *" in segment and _METRICS_BANNER_RE.search(segment):
            self.summing_up = True
            return True
        if self.summing_up and "=" in segment and _METRICS_ROW_RE.match(split(segment)[1]):
            return True
        self.summing_up = False
        return False

    def plain_bar(self, segment: str) -> int | None:
        """The step of a repaint of the training bar once known, read quickly; None: read the segment as usual."""
        found = _PLAIN_BAR_RE.match(segment) if self.total and not self.evaluating and not self.pattern else None
        if not found or int(found.group(2)) != self.total or found.group(1) == "0":
            return None
        self.bar_total, self.detached = self.total, False
        return int(found.group(1))

    def read(self, text: str) -> tuple[int | None, float | None]:
        """(step, loss) that one segment, its labels taken off, names; either may be None. Each pattern is tried only
        where a word of its is in the line: the job's output passes here line by line."""
        self.bar_total = None
        if self.pattern:
            found = self.pattern.search(text)
            if found:
                named = found.groupdict()
                return (int(named["step"]) if named.get("step") else None,
                        float(named["loss"]) if named.get("loss") else None)
        if _RECORD in text:
            return _record(text)
        low = text.lower()
        if ("checkpoint" in low or "sav" in low or "ckpt" in low or "trainingreport" in low) and _SKIP_RE.search(text):
            return None, None
        if ("val" in low or "test" in low or "predict" in low or "sanity" in low) and _EVAL_RE.search(text):
            found = _BAR_RE.search(text)
            # A banner (no figures in it: "***** Running Evaluation *****") announces the evaluation's bars.
            self.evaluating = self.evaluating or not _DIGIT_RE.search(text)
            # Lightning 1.x advances the epoch's bar through validation too, until the validation bar is full.
            self.validating = bool(found and found.group(2) and int(found.group(1)) < int(found.group(2)))
            return None, None
        if "Total optimization" in text:
            total = _TOTAL_RE.search(text)
            if total:
                self.total, self.confirmed = int(total.group(1).replace(",", "")), True
                return None, None
        loss = _loss(text) if "loss" in low and _SUMMARY not in low and not self.detached else None
        at = _LOSS_AT_RE.search(text) if "loss " in low else None
        step = int(at.group(1)) if at else self._step(text, low, loss)
        loss = float(at.group(2)) if at else loss
        if step is None and loss is not None and self.total is not None and not self.evaluating:
            self.confirmed = True  # a training loss after the bar: the bar is training's
        if step == 0 and (self.bar_total or loss is None):
            return None, loss  # nothing done yet (a bar at 0/M, a loader's "step=0")
        if step is not None:
            self.stepped, self.detached = self.stepped or not self.ray, False
        return step, loss

    def _step(self, text: str, low: str, loss: float | None) -> int | None:
        if "[batch=" in low:
            composer = _COMPOSER_LINE_RE.match(text)
            if composer and not text.rstrip().endswith("]:"):
                return int(composer.group(1)) + 1 if loss is not None else None
        if "global_step" in low or "|loss:" in low or "iteration" in low or "[batch=" in low or "num_updates" in low:
            for word, pattern in _EXPLICIT:
                matches = pattern.findall(text) if word in low else None
                if matches:  # the newest, where a log lost a bar's carriage returns
                    return int(matches[-1][0] if isinstance(matches[-1], tuple) else matches[-1])
        if "Training finished" in text:
            ray = _RAY_RE.search(text)
            if ray:
                self.ray = self.ray or not self.stepped
                # Not the step: the result table that follows repeats an earlier step's loss.
                self.detached = not self.ray
                return int(ray.group(1)) if self.ray else None
        if "Epoch: [" in text:
            found = _EPOCH_BATCH_RE.search(text)
            if found:
                return int(found.group(1)) * int(found.group(3)) + int(found.group(2))
        if text.startswith("[") and "loss" in low:
            found = _TUTORIAL_RE.match(text)
            if found:
                return int(found.group(1))
        if " [" in text:
            last = None
            for last in _BAR_RE.finditer(text):
                pass
            if last:
                return self._bar(text, last)
            samples = _SAMPLES_RE.search(text) if "poch" in low else None
            if samples:
                return max(0, int(samples.group(1)) - 1) * int(samples.group(3)) + int(samples.group(2))
        counted = _counter(text, loss) if "step" in low or "iter" in low or "batch" in low else None
        if counted is None and loss is not None and "epoch" in low:
            epoch = _EPOCH_RE.search(text)
            counted = int(epoch.group(1)) if epoch else None
        return counted

    def _bar(self, text: str, found: re.Match[str]) -> int | None:
        count, total = int(found.group(1)), int(found.group(2)) if found.group(2) else None
        head = text[:found.start()]
        percent = _PERCENT_RE.search(head) if "%|" in head else None
        desc = (head[:percent.start()] if percent else head).strip(" :|")
        if desc and _NOT_TRAINING_RE.search(desc):
            return None
        epoch = _EPOCH_RE.search(desc) if "poch" in desc else None
        if epoch:
            if int(epoch.group(1)) != self.epoch:
                self.epoch, self.validating = int(epoch.group(1)), False
            if self.ray or self.validating:
                return None
            return self._counted(int(epoch.group(1)) * total + count if total else count, total or "it")
        if total is None:
            return None  # a count without a total and no epoch: a loader's, a tokenizer's
        if self.evaluating and total != self.total:
            self.eval_totals.add(total)
            return None
        if total in self.eval_totals:
            return None
        self.evaluating = False
        if self.total is None:
            self.total = total
        elif total != self.total:
            if self.confirmed or total < self.total:
                return None
            # A longer bar than the one taken for training's, unconfirmed: that one was an evaluation's.
            self.eval_totals.add(self.total)
            self.dropped, self.total = self.total, total
        return self._counted(count, total)

    def _counted(self, step: int, total: int | str) -> int:
        self.bar_total = total
        return step


class Progress:
    """One node's progress: the last step, when it was logged, and a thinned history of (time, step, loss)."""

    def __init__(self, node: str, run_id: str, pattern: str | None = None, clock: Callable[[], float] = time.time,
                 record: dict[str, Any] | None = None):
        self.clock = clock
        self.reader = Reader(pattern)
        self.record = record or {"node": node, "run_id": run_id, "step": None, "step_at": None, "loss": None, "points": []}
        self.seen: set[int] = set()  # the steps read this attempt: another rank's line of one of them is no new step
        self.from_bars: dict[int | str, list[list[Any]]] = {}  # this attempt's points read from bars, by the bar's total

    def feed(self, text: str) -> bool:
        """Read lines (tqdm's carriage returns may be in them); True when they named a new training step."""
        new = False
        for segment in _LINE_ENDS_RE.split(text):
            new = self.segment(segment) or new
        return new

    def peek(self, partial: str) -> bool:
        """A segment still being written (no line end yet): a progress bar is read now, not at its next repaint."""
        return bool(_BAR_RE.search(partial)) and self.segment(partial)

    def segment(self, segment: str) -> bool:
        """Read one segment (a line, or what carriage returns separate in one); True when it named a new training step."""
        pieces = [segment]
        if "]:" in segment and segment.count("]:") > 1 or "pid=" in segment and segment.count("pid=") > 1:
            pieces = RANK_INSIDE_RE.split(segment)  # several ranks' lines run together
        if ("%|" in segment or "it [" in segment) and (not segment.rstrip().endswith("]") or segment.count("%|") > 1):
            pieces = [part for piece in pieces for part in _apart(piece)]
        if len(pieces) == 1:
            return self._piece(segment)
        new = False
        for piece in pieces:
            new = self._piece(piece) or new
        return new

    def _piece(self, segment: str) -> bool:
        if "estart" in segment and _RESTART_RE.search(segment):
            self.seen.clear()
        if (self.reader.summing_up or "metrics *" in segment) and self.reader.summary(segment):
            return False
        step, loss = self.reader.plain_bar(segment), None
        if step is None:
            if not _DIGIT_RE.search(segment):
                if "valuat" in segment:  # a banner: the Trainer's evaluation bars that follow have no description
                    self.reader.read(segment)
                return False
            if not self.reader.pattern and not _WORTH_RE.search(segment):
                return False  # no word any form has (most of a log: warnings, NCCL's lines, tracebacks)
            step, loss = self.reader.read(segment if _RECORD in segment else split(segment)[1])
        record, points = self.record, self.record["points"]
        if self.reader.dropped is not None:
            for point in self.from_bars.pop(self.reader.dropped, []):
                points.remove(point)
            self.reader.dropped = None
        if step is None or step in self.seen:
            # A log dict or table after its step's bar or header, or a bar repainted with its step's loss; another
            # rank's line of the same step keeps the loss printed first.
            if loss is not None and points and (step is None or step == points[-1][1] and (self.reader.bar_total or points[-1][2] is None)):
                record["loss"] = points[-1][2] = loss
            return False
        self.seen.add(step)
        if len(self.seen) > _SEEN_KEPT:
            self.seen = {s for s in self.seen if s > step - _SEEN_KEPT // 2}
        record.update(step=step, step_at=round(self.clock(), 3), loss=loss if loss is not None else record["loss"])
        points.append([record["step_at"], step, loss])
        if self.reader.bar_total:
            self.from_bars.setdefault(self.reader.bar_total, []).append(points[-1])
        if len(points) > POINTS_KEPT:
            # Every other point of the older half: a long job keeps its shape in a record of bounded size.
            half = POINTS_KEPT // 2
            record["points"] = points[:half:2] + points[half:]
        return True
