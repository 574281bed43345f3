#!/usr/bin/env python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The torchrun rung: each rank all-reduces a tensor holding its rank, checks the sum, then times an all-reduce.

Started by torchrun on every node, as users start their training:
  torchrun --nnodes=$NNODES --node_rank=$NODE_RANK --nproc_per_node=$NPROC_PER_NODE \
      --master_addr=$MASTER_ADDR --master_port=$MASTER_PORT trainops_allreduce.py [--bytes N] [--iters N]

Backend NCCL when the rank has a GPU, Gloo otherwise. Prints JSON lines prefixed "TRAINOPS " on stdout, the
protocol that parse_output() in plugins/module_utils/torchrun.py reads:
  {"event": "start", "rank": 0, "host": "node1", ...}      before the process group is formed
  {"event": "result", "rank": 0, "world_size": 6, "sum_ok": true, "busbw_gbps": 1.2, ...}
busbw follows nccl-tests' definition for all-reduce: algbw * 2 (n - 1) / n, algbw = bytes / time of one call.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import socket
import sys
import time

import torch
import torch.distributed as dist


def emit(event, **fields):
    # One write, newline included: torchrun --tee copies the log file as it grows, and print() writes the line and its
    # newline apart (unbuffered, as the launch runs), so a copy could end between them.
    sys.stdout.write("TRAINOPS " + json.dumps(dict(event=event, **fields), sort_keys=True) + "\n")
    sys.stdout.flush()


def arguments():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bytes", type=int, default=16 * 1024 * 1024, help="all-reduce size in bytes (float32)")
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--timeout", type=int, default=60, help="seconds a collective may wait for the others")
    return parser.parse_args()


def identity():
    """Who this rank is, from the variables torchrun sets, and where the launch environment says it runs."""
    env = os.environ
    return {
        "rank": int(env["RANK"]), "local_rank": int(env["LOCAL_RANK"]), "world_size": int(env["WORLD_SIZE"]),
        "node_rank": int(env.get("GROUP_RANK", env.get("NODE_RANK", -1))), "host": socket.gethostname(), "pid": os.getpid(),
        "master": "%s:%s" % (env.get("MASTER_ADDR"), env.get("MASTER_PORT")),
    }


def nccl_version():
    """The NCCL this process loaded: torch 2 gives (2, 21, 5), older ones 2708 or 21805."""
    version = torch.cuda.nccl.version()
    if isinstance(version, int):
        major, rest = divmod(version, 10000 if version >= 10000 else 1000)
        version = (major,) + divmod(rest, 100)
    return ".".join(map(str, version))


def timed_allreduce(tensor, iters, warmup, synchronize):
    for dummy in range(warmup):
        dist.all_reduce(tensor)
    synchronize()
    dist.barrier()
    start = time.perf_counter()
    for dummy in range(iters):
        dist.all_reduce(tensor)
    synchronize()
    return (time.perf_counter() - start) / iters


def main():
    args = arguments()
    me = identity()
    gpu = torch.cuda.is_available()
    backend = "nccl" if gpu else "gloo"
    launched = float(os.environ.get("TRAINOPS_LAUNCH_TIME") or 0)
    emit("start", backend=backend, torch=torch.__version__, **me)

    if gpu:
        torch.cuda.set_device(me["local_rank"])
    device = torch.device("cuda", me["local_rank"]) if gpu else torch.device("cpu")
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=args.timeout))
    joined = time.time()

    # Every element of every rank holds rank + 1: the sum is n (n + 1) / 2 everywhere, exact in float32.
    count = max(1, args.bytes // 4)
    checked = torch.full((count,), float(me["rank"] + 1), dtype=torch.float32, device=device)
    dist.all_reduce(checked)
    world = me["world_size"]
    wrong = int((checked != world * (world + 1) / 2).sum().item())

    # Zeros stay zeros however often they are summed, so the timed calls cannot overflow.
    synchronize = torch.cuda.synchronize if gpu else (lambda: None)
    seconds = timed_allreduce(torch.zeros(count, dtype=torch.float32, device=device), args.iters, args.warmup, synchronize)
    algbw = count * 4 / seconds / 1e9
    emit("result", backend=backend, wrong=wrong, sum_ok=wrong == 0, bytes=count * 4, seconds=seconds, algbw_gbps=algbw,
         busbw_gbps=algbw * 2 * (world - 1) / world, rendezvous_s=round(joined - launched, 3) if launched else None,
         interface=os.environ.get("NCCL_SOCKET_IFNAME" if gpu else "GLOO_SOCKET_IFNAME"),
         nccl=nccl_version() if gpu else None,
         device=torch.cuda.get_device_name(device) if gpu else "cpu", **me)
    # Every rank leaves the collectives together, and then the process ends without tearing its process group down:
    # torch 2.6's Gloo (Debian 13) hung in destroy_process_group on one rank of three, after this barrier, in 3 of 6
    # runs on loaded nodes (in 5 of 8 without the barrier), and the others' torchrun then waited for it to its limit.
    dist.barrier()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
