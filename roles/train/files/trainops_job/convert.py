# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A DeepSpeed ZeRO checkpoint made loadable at another world size before a restart on fewer (or more) nodes: converted
to DeepSpeed's universal checkpoint (ds_to_universal: every parameter's fp32 weights and optimizer moments whole, in
global_stepN_universal/ beside the step's shards, and latest_universal naming it), and the restarted command told to
load it. The supervisor converts (train_checkpoint_convert, in the job's environment: the launcher of its command), or
says why it cannot; the runner tells each attempt that resumes from a converted checkpoint to load it.

Measured on the GPU test machine (tests/device/deepspeed, DeepSpeed 0.16.9, LLaMA-Factory 0.9.5, a LoRA under ZeRO-2):
written by 3 ranks and resumed by 2 from the conversion, the loss of steps 21-40 was within 0.8 % of the uninterrupted
run's (0.03 % on their mean); written with round_robin_gradients (LLaMA-Factory's example ZeRO-2 config sets it), the
same resume was 8-12 % above it at every step, the loss of the run's first steps: the conversion does not keep the order
that round robin gave the parameters at 3 ranks, and at 2 their weights come back in the wrong places. Such a checkpoint
is not converted."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from typing import Any

from . import records

# DeepSpeed's folder of a step's shards in checkpoint-N/, and the suffix of ds_to_universal's output folder beside it
# (layout() reads that one as universal).
_STEP_RE = re.compile(r"^global_step\d+$")
UNIVERSAL_SUFFIX = "_universal"


def step_folder(entries: list[dict[str, Any]], name: str) -> str | None:
    """DeepSpeed's global_stepN folder inside checkpoint `name` (assess's latest; listing's entries), or None."""
    found = {e["path"].split("/")[1] for e in entries if e["path"].startswith(name + "/") and e["path"].count("/") >= 2}
    steps = sorted((f for f in found if _STEP_RE.match(f)), key=lambda f: int(f[len("global_step"):]))
    return steps[-1] if steps else None


def deepspeed_config(path: str | None) -> tuple[dict[str, Any] | None, str | None]:
    """The job's DeepSpeed config (LLaMA-Factory's `deepspeed`), or (None, why it cannot be read); (None, None) for none."""
    if not path:
        return None, None
    if not os.path.isabs(path):
        return None, "its DeepSpeed config %s is a relative path (the restarted command could not be told where it is)" % path
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError) as exc:
        return None, "its DeepSpeed config %s cannot be read (%s)" % (path, exc)
    return (data, None) if isinstance(data, dict) else (None, "its DeepSpeed config %s is not a JSON object" % path)


def refusal(plan: dict[str, Any], shape: dict[str, Any], config: dict[str, Any] | None, in_image: bool) -> str | None:
    """Why the checkpoint laid out as `shape` (layout's) is not converted, or None: no conversion command
    (train_checkpoint_convert empty), a job inside its training image (the engine runs as root, the supervisor as the
    training user), or ZeRO-1/2 shards written with round_robin_gradients (see the module's note)."""
    if not plan.get("command"):
        return "train_checkpoint_convert is empty"
    if in_image:
        return "the job runs in its training image, which the supervisor (the training user) cannot start: convert it there by hand"
    zero = (config or {}).get("zero_optimization") or {}
    if shape.get("zero_stage") == "1/2" and zero.get("round_robin_gradients") in (True, "true"):
        return ("it was written with round_robin_gradients (%s), whose order of the parameters DeepSpeed's conversion does "
                "not keep: loaded by another number of ranks the weights would come back scrambled; set it false for the "
                "next run" % plan.get("deepspeed"))
    return None


def command(plan: dict[str, Any], folder: str, step: str) -> str:
    """The conversion's shell command for global_stepN of checkpoint folder `folder`. --inject_missing_state: a checkpoint
    written through the Hugging Face Trainer lacks the universal_checkpoint_info that Megatron-DeepSpeed adds."""
    source = os.path.join(folder, step)
    return "%s --input_folder %s --output_folder %s --inject_missing_state" % (
        plan["command"], _quoted(source), _quoted(source + UNIVERSAL_SUFFIX))


def _quoted(path: str) -> str:
    return "'%s'" % path.replace("'", "'\\''")


def universal_config(job: records.Job) -> str:
    """Where the copy of the job's DeepSpeed config that loads a universal checkpoint is written (the job's folder)."""
    return job.path(records.UNIVERSAL_CONFIG)


def write_universal_config(job: records.Job, config: dict[str, Any]) -> None:
    """The job's DeepSpeed config with checkpoint.load_universal on, for the attempts that resume from a conversion."""
    job.write(records.UNIVERSAL_CONFIG, dict(config, checkpoint=dict(config.get("checkpoint") or {}, load_universal=True)))


def convert(job: records.Job, folder: str, step: str) -> tuple[bool, float, str]:
    """Run the conversion through the job's launcher (its environment: the same Python and DeepSpeed as the command),
    bounded by the plan's timeout: (converted, seconds, the last line of its output where it failed)."""
    plan, started = job.conf.convert, time.monotonic()
    argv = list(job.conf.launcher) + ["sh", "-c", command(plan, folder, step)]
    # The training user's home, as the command's: DeepSpeed's import makes ~/.triton (the runner's HOME, root's, is not
    # the supervisor's to write: "PermissionError: [Errno 13] Permission denied: '/root/.triton'" on the GPU machine).
    env = dict(os.environ, **job.user_env())
    try:
        run = subprocess.run(argv, capture_output=True, text=True, timeout=int(plan.get("timeout") or 1800), check=False, cwd="/",
                             env=env)
    except subprocess.TimeoutExpired:
        return False, round(time.monotonic() - started, 1), "no end within %s s (train_checkpoint_convert_timeout)" % plan.get("timeout")
    except OSError as exc:
        return False, round(time.monotonic() - started, 1), str(exc)
    seconds = round(time.monotonic() - started, 1)
    if run.returncode == 0 and os.path.isdir(os.path.join(folder, step + UNIVERSAL_SUFFIX)):
        return True, seconds, ""
    # Its last line: a traceback's names the error.
    lines = [line.strip() for line in (run.stdout + run.stderr).splitlines() if line.strip()]
    return False, seconds, "exit status %d: %s" % (run.returncode, lines[-1] if lines else "no output")
