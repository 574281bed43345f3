# SPDX-License-Identifier: GPL-3.0-or-later
"""Runs a script (argv[1], its arguments after it) as a rank that NCCL takes for a host of its own on the GPU test
machine's one GPU (NCCL_HOSTID per rank, every rank on GPU 0): the ladder's all-reduce rung (trainops_allreduce.py)
measured over the same sockets as tests/device/jobs/ddp_socket.py's job, without a change to either."""

import os
import runpy
import sys

os.environ["NCCL_HOSTID"] = "trainops-test-host-%s" % os.environ["RANK"]
os.environ["LOCAL_RANK"] = "0"
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
