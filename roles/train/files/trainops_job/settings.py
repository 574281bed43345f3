# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""This node's part of a job, as one typed record: the settings the train role writes to NAME.json
(templates/job.json.j2), read once, each key checked against its type, an unknown key refused (a role newer or older
than this program would otherwise be half obeyed). The defaults are the role's (defaults/main.yml): the role writes
every key, the defaults serve a record written by hand and the tests."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from . import typed


@dataclass(frozen=True)
class Settings:
    """Every key of NAME.json (train_<key> in the role, where it is a setting of the user's)."""

    # Who and where: the job, this node, the world of the first start and its spares (group cluster_spare), each node's
    # training address, the rendezvous master, the training user, the job's folder and this start's id.
    job: str
    node: str
    nodes: list[str]
    run_id: str
    job_dir: str
    user: str
    spares: list[str] = field(default_factory=list)
    addresses: dict[str, str] = field(default_factory=dict)
    master_addr: str = ""
    # How the command runs: under systemd or detached, inside the training image or on the host (the launcher), with
    # the container's extra options.
    supervisor: str = "systemd"
    in_image: bool = False
    launcher: list[str] = field(default_factory=lambda: ["/usr/local/bin/trainops-env"])
    run_opts: list[str] = field(default_factory=list)
    command: str = ""
    # Where checkpoints go and what a start resumes from ({dir, world, argument}).
    checkpoint_dir: str = ""
    resume: dict[str, Any] = field(default_factory=dict)
    # Stopping: the grace a rank has after SIGTERM, the whole stop's bound, a peer's failure's grace, the supervisor's
    # silence after which a part waiting for it ends.
    max_restarts: int = 0
    stop_grace: int = 10
    stop_timeout: int = 30
    fail_grace: int = 6
    supervisor_silence: int = 30
    # Stalls and failures: what the supervisor does, and its guards.
    on_stall: str = "report"
    on_failure: str = "stop"
    restarts_without_progress: int = 3
    # None: every node of the world (a restart on fewer is refused).
    min_nodes: int | None = None
    # Seconds a restart whose world cannot load the newest checkpoint waits for the nodes it lacks (0: refused at once).
    spare_wait: int = 0
    stall_seconds: float = 0.0
    stall_floor: float = 120.0
    stall_factor: float = 10.0
    max_auto_restarts: int = 2
    # What the ranks' NCCL and torch record for the sampler and a stall's diagnosis.
    flight_recorder_entries: int = 2000
    nccl_debug: str | None = "INFO"
    collective_timing: bool = True
    progress_pattern: str | None = None
    # The job's own input functions (train_input_functions): a rank waiting in one counts as waiting for its data.
    input_functions: list[str] = field(default_factory=list)
    # The global batch across a restart on fewer nodes ({keep: train_keep_global_batch, accumulation: the first start's,
    # overrides: the command takes LLaMA-Factory's key=value arguments}).
    batch: dict[str, Any] = field(default_factory=dict)
    # The stage (train_stage): {paths on shared storage, dir (each node's local copy), keep (after a stop), offline (the
    # command's model and data all staged: no rank goes to the hub), overrides ({key: local path} for LLaMA-Factory),
    # timeout (seconds a node waits for the first node's manifest)}.
    stage: dict[str, Any] = field(default_factory=dict)
    # A DeepSpeed checkpoint made loadable at another world size (convert.py): {command (train_checkpoint_convert: run in
    # the command's environment, an empty one never converts), timeout (seconds), deepspeed (the DeepSpeed config of a
    # LLaMA-Factory job, where the restarted command is told to load the conversion), optim (its config's)}.
    convert: dict[str, Any] = field(default_factory=lambda: {"command": "python3 -m deepspeed.checkpoint.ds_to_universal", "timeout": 1800})
    # train_action=scale's plan ({sizes, warmup, steps, timeout, samples_per_rank}), None for any other start.
    scale: dict[str, Any] | None = None
    # The job record the first node writes to the folder (job.json) before any node starts.
    record: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def read(cls, data: Any, where: str = "the job's settings") -> Settings:
        """The record of a decoded NAME.json; ValueError naming `where` and the key for a key unknown, missing or of
        another type."""
        return cls(**typed.checked(cls, data, where, unknown="the train role and the program on the node differ; run "
                                                             "train.yml again to install both"))

    def as_dict(self) -> dict[str, Any]:
        """The settings as NAME.json holds them."""
        return dataclasses.asdict(self)

    @property
    def least_nodes(self) -> int:
        """The fewest nodes a restart may run on (min_nodes, else every node of the world)."""
        return self.min_nodes if self.min_nodes is not None else len(self.nodes)
