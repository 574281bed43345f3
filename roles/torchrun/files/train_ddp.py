#!/usr/bin/env python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A short distributed training run that checkpoints to shared storage and resumes: a template for real jobs.

  torchrun --nnodes=$NNODES --node_rank=$NODE_RANK --nproc_per_node=$NPROC_PER_NODE \
      --master_addr=$MASTER_ADDR --master_port=$MASTER_PORT train_ddp.py --checkpoint-dir /mnt/shared/ckpt [--resume [auto]]

A small regression model on synthetic data, wrapped in DistributedDataParallel (--hidden widens it: its gradients are
all-reduced every step, so a wide one loads the links between nodes). Every rank draws its own batch
from a generator seeded by (seed, step, rank), so a resumed run sees exactly the batches an unbroken one would
have seen, and ranks that stopped synchronising would end with different parameters.

Each rank's batches come through torch's DataLoader, as a real job's do (--load-seconds makes it wait for each, as a
slow dataset would; --data makes it read --read-kb KiB of a dataset file for each, every rank its own part, past the
page cache (O_DIRECT) as a dataset larger than the node's memory is read; the batch stays the generator's).
Rank 0 saves model, optimizer and step every --save-every steps as step-NNNNNN.pt (--checkpoint-mb pads it to a real
model's size; --keep leaves only the newest files), written to a temporary name and renamed, so a file with its final
name is always complete; --resume loads the newest one. After each save one rank per node reads the file back (proving
that every node sees the shared storage) and reports its hash.

Prints JSON lines prefixed "TRAINOPS " on stdout (parse_output() in plugins/module_utils/torchrun.py):
  {"event": "start", "rank": 1, "host": "node2", "resume": false}                      (every rank, at its start)
  {"event": "step", "step": 12, "loss": 0.31}                      the loss averaged over all ranks (rank 0)
  {"event": "checkpoint", "step": 30, "path": ..., "sha256": ..., "eval_loss": 0.2}    (rank 0, after a save)
  {"event": "checkpoint_read", "step": 30, "sha256": ..., "host": "node2"}             (local rank 0 of each node)
  {"event": "resumed", "step": 30, "eval_loss": 0.2, "stored_eval_loss": 0.2}          (rank 0, after --resume)
  {"event": "done", "rank": 1, "step": 40, "params_sha256": ...}                       (every rank)
"""

from __future__ import annotations

import argparse
import datetime
import glob
import hashlib
import json
import mmap
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset

FEATURES = 16


def emit(event, **fields):
    # One write, newline included: torchrun --tee copies the log file as it grows, and print() writes the line and its
    # newline apart (unbuffered, as the launch runs), so a copy could end between them.
    sys.stdout.write("TRAINOPS " + json.dumps(dict(event=event, **fields), sort_keys=True) + "\n")
    sys.stdout.flush()


def arguments():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint-dir", required=True, help="a directory on shared storage, the same on every node")
    parser.add_argument("--steps", type=int, default=40, help="train until this step")
    parser.add_argument("--stop-at", type=int, default=None, help="stop after this step (to resume later)")
    parser.add_argument("--save-every", type=int, default=10)
    parser.add_argument("--resume", nargs="?", const="yes", choices=["yes", "auto"],
                        help="continue from the newest checkpoint (auto: if there is one, else start at step 1)")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--step-seconds", type=float, default=0.0, help="sleep after each step (tests stop a run midway)")
    parser.add_argument("--timeout", type=int, default=60, help="seconds a collective may wait for the others")
    parser.add_argument("--load-seconds", type=float, default=0.0, help="the data loader's wait for each batch")
    parser.add_argument("--data", default=None, help="a dataset file each batch is also read from (--read-kb a rank a step)")
    parser.add_argument("--read-kb", type=int, default=256, help="KiB of --data each rank reads for each batch")
    parser.add_argument("--checkpoint-mb", type=int, default=0, help="pad each checkpoint with this many MiB")
    parser.add_argument("--keep", type=int, default=0, help="keep only the newest this many checkpoints (0: all)")
    parser.add_argument("--hidden", type=int, default=32,
                        help="the hidden layer's width: about 18 parameters each, all-reduced every step")
    return parser.parse_args()


def batch(seed, step, rank, size, device):
    """Inputs and targets of one rank's batch at one step: y = x . w + 0.1 noise, w fixed by the seed."""
    weights = torch.randn(FEATURES, 1, generator=torch.Generator().manual_seed(seed))
    generator = torch.Generator().manual_seed(seed * 1_000_003 + step * 1_009 + rank)
    inputs = torch.randn(size, FEATURES, generator=generator)
    targets = inputs @ weights + 0.1 * torch.randn(size, 1, generator=generator)
    return inputs.to(device), targets.to(device)


class Batches(Dataset):
    """A rank's batch of each step, by step: the DataLoader reads them in the order of the steps still to come."""

    def __init__(self, args, rank, world):
        self.args, self.rank, self.world = args, rank, world

    def __len__(self):
        return self.args.steps + 1

    def __getitem__(self, step):
        time.sleep(self.args.load_seconds)
        if self.args.data:
            read_past_cache(self.args.data, (step * self.world + self.rank) * self.args.read_kb * 1024, self.args.read_kb * 1024)
        return batch(self.args.seed, step, self.rank, self.args.batch, torch.device("cpu"))


def read_past_cache(path, offset, size):
    """Read size bytes of path from offset (wrapping at its end) from the storage itself, as a dataset larger than the
    node's memory is read every epoch: O_DIRECT where the file system takes it (into a page-aligned buffer, at 4 KiB
    boundaries), else a plain read with the range's cached pages dropped first (POSIX_FADV_DONTNEED)."""
    size = max(size // 4096, 1) * 4096
    try:
        handle = os.open(path, os.O_RDONLY | os.O_DIRECT)
    except OSError:
        handle = os.open(path, os.O_RDONLY)
    try:
        offset = offset % max(os.fstat(handle).st_size - size, 1) // 4096 * 4096
        os.posix_fadvise(handle, offset, size, os.POSIX_FADV_DONTNEED)
        os.preadv(handle, [mmap.mmap(-1, size)], offset)
    finally:
        os.close(handle)


def sha256_file(path):
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def params_sha256(model):
    digest = hashlib.sha256()
    for tensor in model.state_dict().values():
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def newest_checkpoint(directory):
    """The newest complete checkpoint: only finished files carry the final name step-NNNNNN.pt."""
    found = sorted(glob.glob(os.path.join(directory, "step-*.pt")))
    return found[-1] if found else None


def evaluate(model, args, device):
    """The loss on a fixed batch that no step trains on: the same number before a save and after a resume."""
    inputs, targets = batch(args.seed, -1, 0, 256, device)
    with torch.no_grad():
        return nn.functional.mse_loss(model(inputs), targets).item()


def save(model, optimizer, step, args, device):
    path = os.path.join(args.checkpoint_dir, "step-%06d.pt" % step)
    eval_loss = evaluate(model, args, device)
    if dist.get_rank() == 0:
        state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step, "eval_loss": eval_loss}
        if args.checkpoint_mb:
            state["padding"] = torch.zeros(args.checkpoint_mb << 20, dtype=torch.uint8)
        torch.save(state, path + ".tmp")
        os.replace(path + ".tmp", path)
        for old in sorted(glob.glob(os.path.join(args.checkpoint_dir, "step-*.pt")))[:-args.keep] if args.keep else []:
            os.remove(old)
        emit("checkpoint", step=step, path=path, sha256=sha256_file(path), eval_loss=eval_loss)
    dist.barrier()
    if int(os.environ["LOCAL_RANK"]) == 0:
        torch.load(path, map_location="cpu")
        emit("checkpoint_read", step=step, sha256=sha256_file(path), host=socket.gethostname(), rank=dist.get_rank())


def main():
    args = arguments()
    gpu = torch.cuda.is_available()
    local_rank = int(os.environ["LOCAL_RANK"])
    if gpu:
        torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank) if gpu else torch.device("cpu")
    emit("start", rank=int(os.environ["RANK"]), host=socket.gethostname(), resume=args.resume)
    dist.init_process_group("nccl" if gpu else "gloo", timeout=datetime.timedelta(seconds=args.timeout))
    rank, world = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(args.seed)  # the same initial weights on every rank (DDP also broadcasts rank 0's)
    module = nn.Sequential(nn.Linear(FEATURES, args.hidden), nn.Tanh(), nn.Linear(args.hidden, 1)).to(device)
    model = DistributedDataParallel(module, device_ids=[local_rank] if gpu else None)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)

    step = 0
    path = newest_checkpoint(args.checkpoint_dir) if args.resume else None
    if args.resume == "yes" and path is None:
        raise SystemExit("--resume: no checkpoint in %s" % args.checkpoint_dir)
    if path:
        state = torch.load(path, map_location=device)
        module.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        step = state["step"]
        if rank == 0:
            emit("resumed", step=step, path=path, eval_loss=evaluate(module, args, device), stored_eval_loss=state["eval_loss"])

    last = min(args.steps, args.stop_at or args.steps)
    loader = iter(DataLoader(Batches(args, rank, world), batch_size=None, sampler=range(step + 1, last + 1)))
    while step < last:
        step += 1
        inputs, targets = (tensor.to(device) for tensor in next(loader))
        loss = nn.functional.mse_loss(model(inputs), targets)
        optimizer.zero_grad()
        loss.backward()  # DDP averages the gradients of all ranks here
        optimizer.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        if rank == 0:
            emit("step", step=step, loss=mean.item() / world)
        if step % args.save_every == 0 or step == last:
            save(module, optimizer, step, args, device)
        time.sleep(args.step_seconds)

    emit("done", rank=rank, host=socket.gethostname(), step=step, params_sha256=params_sha256(module))
    # As in trainops_allreduce.py: every rank past this barrier, the process ends without the process group's
    # teardown, in which torch 2.6's Gloo hung. The checkpoints are written and closed by then.
    dist.barrier()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
