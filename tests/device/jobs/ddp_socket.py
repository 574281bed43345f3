# SPDX-License-Identifier: GPL-3.0-or-later
"""Two ranks of DDP on the GPU test machine's one GPU, each told it is on a host of its own (NCCL_HOSTID), so that NCCL
connects them as two nodes do: through its network transport (sockets: the machine has no RDMA). A step logs every 20
steps for the runner's progress reader; it runs until killed or for TRAINOPS_TEST_SECONDS,
and rank 0 prints its steps a second at the end."""

import os
import time

import torch
import torch.distributed as dist

rank = int(os.environ["RANK"])
os.environ["NCCL_HOSTID"] = "trainops-test-host-%d" % rank  # read by NCCL at its init: two "hosts", one GPU
torch.cuda.set_device(0)
dist.init_process_group("nccl")
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4096, 4096).cuda(), device_ids=[0])
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
batch = torch.randn(256, 4096, device="cuda")
started = time.time()
deadline = started + float(os.environ.get("TRAINOPS_TEST_SECONDS", "60"))
step = 0
while time.time() < deadline:
    step += 1
    loss = model(batch).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if rank == 0 and step % 20 == 0:
        print("step %d loss %.4f" % (step, loss.item()), flush=True)
if rank == 0:
    print("steps %d in %.2f s: %.2f steps/s" % (step, time.time() - started, step / (time.time() - started)), flush=True)
dist.destroy_process_group()
