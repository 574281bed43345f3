# SPDX-License-Identifier: GPL-3.0-or-later
"""DDP across the namespace nodes of tests/device/nodes/cluster, a rank a node on the GPU test machine's one GPU, NCCL
between them over its sockets on the nodes' training interface. Each step multiplies TRAINOPS_TEST_GEMMS bf16 8192 x
8192 matrices (the step's compute), then runs a 4096 x 4096 layer forward and back, so DDP all-reduces its weight's
gradients (64 MiB, fp32: nccl-tests' largest size at verify_max_bytes=64M). On the node named by
TRAINOPS_TEST_SLOW_NODE the rank multiplies TRAINOPS_TEST_SLOW_FACTOR times as many: a GPU that computes slower, the
straggler the other ranks wait for in the all-reduce. Every rank logs each step ('step N loss X', the runner's
progress reader) and runs until stopped."""

import os
import socket

import torch
import torch.distributed as dist

torch.cuda.set_device(0)
dist.init_process_group("nccl")
slow = socket.gethostname() == os.environ.get("TRAINOPS_TEST_SLOW_NODE")
gemms = int(os.environ.get("TRAINOPS_TEST_GEMMS", "2")) * (int(os.environ.get("TRAINOPS_TEST_SLOW_FACTOR", "40")) if slow else 1)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4096, 4096).cuda(), device_ids=[0])
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
batch = torch.randn(256, 4096, device="cuda")
a = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
b = torch.randn_like(a)
print("rank %d on %s: %d GEMMs a step%s" % (dist.get_rank(), socket.gethostname(), gemms, " (the slow node)" if slow else ""), flush=True)
step = 0
while True:
    step += 1
    for _ in range(gemms):
        torch.mm(a, b)
    loss = model(batch).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print("step %d loss %.4f" % (step, loss.item()), flush=True)
