# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What holds a running job back, as one table: a row per performance class (its word, where a rank's stack shows it,
the share at which it is named, what the ranks do, the advice), the order in which the classes are tried, and the
words of a job that nothing held back (healthy), of one whose scaling the classes do not explain, and of one that was
not judged.

Node side: the job runner links this file (roles/train/files/trainops_job/_perf_classes.py): perf.place reads where a
stack is from PLACES, judge.bottleneck tries RULES in their order and words each class from its row. The controller
(plugins/plugin_utils/jobs.py, job_bandwidth.py) reads the same words from here. A new class is a row here, a rule
where it ranks, the judge of its scope in judge.py, and a test on a recorded window. Standard library only.
"""

from __future__ import annotations

from typing import NamedTuple


class PerfClass(NamedTuple):
    """A performance class: `name` the word status, the page and the events show; `place` the word perf.place gives a
    rank's stack sample when the class holds it ("": not read from stacks); `files` the source files whose frames
    put a sample there, `functions` a pattern of the function names that do (searched in every frame's name; "": none);
    `bound` the share of a node's samples at which the class is named; `doing` what the ranks do, `advice` what to try,
    `in_place` where a straggler's ranks are when this place holds them."""

    name: str
    place: str
    files: tuple[str, ...]
    functions: str
    bound: float | None
    doing: str
    advice: str
    in_place: str = ""


CHECKPOINT = PerfClass(
    "checkpoint-bound", "checkpoint",
    ("torch/serialization.py", "torch/distributed/checkpoint/", "safetensors/", "deepspeed/runtime/checkpoint_engine/"),
    # A function named save... (the ranks waiting at the barrier inside a trainer's save count with it).
    r"(?:^|_)save(?:$|_)",
    # A save is short and rare: a quarter of the samples already stretches the run.
    0.25, "save or load checkpoints", "save less often, or asynchronously (torch.distributed.checkpoint.async_save)",
    "checkpoints' saves and loads")
INPUT = PerfClass(
    # torch's DataLoader, Hugging Face datasets, Megatron's datasets, webdataset.
    "input-bound", "input", ("torch/utils/data/", "/datasets/", "webdataset/"), "",
    0.4, "wait for their data", "stage the data on each node's local disk, or give the data loader more workers (num_workers)",
    "the data loader")
# Neither compute, a collective nor a place above: the ranks sleep or wait in code the table does not know (a loader of
# the job's own, as nanoGPT's get_batch; a download; a lock). perf keeps the frame each such look waits in (the
# innermost of the job's own code) and the class is said with it: what to look at is that frame.
ELSEWHERE = PerfClass(
    "wait-bound", "other", (), "",
    # Most of the time (the field's case: 70 %): a healthy step has some of it (a log line, a host-side wait).
    0.6, "wait outside compute, collectives and checkpoint I/O",
    "the input path? a loader of the job's own: give its function in train_input_functions to have its waits counted as "
    "input (and stage its data on each node's local disk), else look at what that frame waits for",
    "code outside compute and collectives")
# Its files are torch's collectives' (trainops_job.verdict.COLLECTIVE_FILES, DDP's backward: perf.place reads them).
COMMUNICATION = PerfClass(
    "communication-bound", "collective", (), "",
    # Ranks of a healthy data-parallel job spend a good part of a step in all-reduce: only most of it is a bound.
    0.6, "wait in collectives",
    "compare the job's interface with the ladder's figures (verify.yml); fewer, larger all-reduces (gradient "
    "accumulation) send less often")
# Named by its figures (busy shares, GPU clocks, NCCL's times), not by a place in the stack: judge.straggler words it.
STRAGGLER = PerfClass("straggler", "", (), "", None, "are waited for by the others", "")
# No class reached its bound, and every node's stacks were judged.
HEALTHY = PerfClass("healthy", "", (), "", None, "nothing held it back", "")
# A size judged healthy whose nodes each add less than UNEXPLAINED_EFFICIENCY of the smallest size's throughput: the
# classes do not see what holds it back (jobs.scale_table).
UNEXPLAINED = PerfClass(
    "unexplained", "", (), "", None, "no class reached its bound (input, checkpoints, collectives, a straggler)",
    "look at what the ranks share (one GPU or CPU time-shared between nodes' ranks, a host's memory bandwidth) and at "
    "the job's own scaling (a fixed global batch split over more ranks does less work a step)")
UNEXPLAINED_EFFICIENCY = 0.5
# Said where no window could be judged (no stacks, too few looks, the rendezvous): never read as healthy.
NOT_JUDGED = "not judged"

# The classes perf.place finds in a rank's stack, in the order it looks (a save inside the data loader's worker is a
# save); the rest of a sample is a collective, compute or other.
PLACES = (CHECKPOINT, INPUT)
CLASSES = (CHECKPOINT, INPUT, ELSEWHERE, COMMUNICATION, STRAGGLER, HEALTHY, UNEXPLAINED)

# Where a class is judged: every node's ranks reach its bound (EVERY), one node's do (ONE), the straggler from the
# ranks' busy shares (BUSY), from the GPUs' clocks (GPU_CLOCKS), from NCCL's own times (NCCL_TIMES); the network
# where every node's ranks wait in collectives, by their stacks or NCCL's times, with what the links carry (NETWORK).
EVERY = "every node"
ONE = "one node"
BUSY = "busy shares"
GPU_CLOCKS = "GPU clocks"
NCCL_TIMES = "NCCL's times"
NETWORK = "every node, the network"
# Bytes waiting in a node's training sockets (perf's queued_kb, KiB on average over a window) from which the network is
# said to hold a communication-bound job's sends: the node program's judge names a slow link above it; under it on every
# node, status says that ranks which send little wait on each other, not on the network (job_bandwidth).
QUEUED_KB = 256


class Rule(NamedTuple):
    """A step of judge.bottleneck: the class, where it is judged, and why it comes at its place."""

    kind: PerfClass
    scope: str
    why: str


# The precedence: judge.bottleneck tries these in order and says the first that holds.
RULES = (
    Rule(CHECKPOINT, EVERY, "the rank that saves is busy while the others wait for it: alone it would read as a straggler"),
    Rule(INPUT, EVERY, "every node waits for its data: the same reason"),
    Rule(ELSEWHERE, EVERY, "every node waits in code the table does not know (its own loader): the same reason"),
    Rule(STRAGGLER, BUSY, "one node's ranks busy while the others wait: where its ranks are in a place, said too"),
    Rule(CHECKPOINT, ONE, "one node's saves: its GPUs idle while it writes, which must not read as a slow GPU"),
    Rule(INPUT, ONE, "one node's data: the same reason"),
    Rule(ELSEWHERE, ONE, "one node's own wait: the same reason"),
    Rule(STRAGGLER, GPU_CLOCKS, "a GPU rank's busy share says nothing (it spins in CUDA's calls): its clocks do"),
    Rule(STRAGGLER, NCCL_TIMES, "the node whose ranks spend the least of their time in NCCL's collectives"),
    Rule(COMMUNICATION, NETWORK, "last: only where every node's ranks wait in collectives is it the network; some "
         "nodes' waiting alone is a wait for the others (the stall's diagnosis names it)"),
)
