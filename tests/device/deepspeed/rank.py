# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""One torchrun rank of a LLaMA-Factory run when every rank shares the one GPU of the test machine.

  torchrun --nproc-per-node N rank.py CONFIG.yaml [key=value ...]   LLaMA-Factory's train (what launcher.py runs)
  torchrun --nproc-per-node N rank.py --allreduce                   NCCL check: one all-reduce, rank sums printed

NCCL refuses two ranks of one host on one GPU ("Duplicate GPU detected"): each rank gets its own NCCL_HOSTID, so NCCL
takes them for different hosts (network transport, NCCL_SOCKET_IFNAME from the caller). Every rank uses cuda:0, so
LOCAL_RANK is set to 0 before transformers, accelerate or DeepSpeed read it (they pick the device from it).

DS_DROP_EMPTY_PARAM_GROUPS=1: transformers' Trainer.create_optimizer drops its empty parameter groups before the LR
scheduler is made on it. With LoRA the no-weight-decay group is empty; DeepSpeed drops it from the optimizer it is given
(engine._configure_basic_optimizer) after Hugging Face made its scheduler with two base learning rates, and torch 2.11's
LRScheduler._update_lr zips them strictly: "ValueError: zip() argument 2 is longer than argument 1" at the first step.
"""

import os
import sys

rank = os.environ.get("RANK", "0")
os.environ["NCCL_HOSTID"] = "lf-rank-%s" % rank
os.environ["TORCHRUN_LOCAL_RANK"] = os.environ.get("LOCAL_RANK", "")
os.environ["LOCAL_RANK"] = "0"

if len(sys.argv) > 1 and sys.argv[1] == "--allreduce":
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(0)
    dist.init_process_group("nccl")
    t = torch.full((1024,), float(dist.get_rank() + 1), device="cuda")
    dist.all_reduce(t)
    n = dist.get_world_size()
    nccl = ".".join(map(str, torch.cuda.nccl.version()))
    print("allreduce rank %d/%d sum %s expected %s nccl %s" % (dist.get_rank(), n, t[0].item(), n * (n + 1) / 2, nccl), flush=True)
    dist.destroy_process_group()
    sys.exit(0 if t[0].item() == n * (n + 1) / 2 else 1)

if os.environ.get("DS_DROP_EMPTY_PARAM_GROUPS") == "1":
    import transformers

    _create_optimizer = transformers.Trainer.create_optimizer

    def create_optimizer(self):
        optimizer = _create_optimizer(self)
        optimizer.param_groups[:] = [group for group in optimizer.param_groups if group["params"]]
        return optimizer

    transformers.Trainer.create_optimizer = create_optimizer

from llamafactory.train.tuner import run_exp  # noqa: E402  after the environment above

run_exp()
