# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Where each rank's time goes (trainops_job.perf): real processes sampled as the runner samples a node's ranks, and
the straggler named from every node's windows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from trainops_job import judge, perf

# Run ids of this test process alone: the sampler reads every process of the machine, and another suite's ranks (a
# second checkout's tests running beside) must not count as this one's.
RUN = "r1-%d" % os.getpid()
OTHER_RUN = "r2-%d" % os.getpid()

BUSY = "while True: pass"
WAITS = "import time\nwhile True: time.sleep(0.05)"


def rank(code: str, number: int, node: str = "node1", run_id: str = RUN) -> subprocess.Popen:
    env = dict(os.environ, TRAINOPS_RUN_ID=run_id, TRAINOPS_NODE=node, RANK=str(number), LOCAL_RANK=str(number))
    return subprocess.Popen([sys.executable, "-c", code], env=env)


def test_a_rank_that_computes_is_busy_and_one_that_waits_is_not():
    ranks = [rank(BUSY, 0), rank(WAITS, 1), rank(BUSY, 2, node="node2"), rank(BUSY, 3, run_id=OTHER_RUN)]
    try:
        sampler = perf.Sampler(RUN, "node1")
        time.sleep(0.3)
        for dummy in range(20):
            sampler.sample()
            time.sleep(0.1)
        window = sampler.window()
    finally:
        for process in ranks:
            process.kill()
            process.wait()
    # This node's ranks of this run alone: another node's (namespace nodes share /proc) and another run's are not.
    assert sorted(window["ranks"]) == ["0", "1"]
    assert window["ranks"]["0"]["busy"] >= 0.8 and window["ranks"]["1"]["busy"] <= 0.3, window
    assert window["ranks"]["0"]["cpu"] > window["ranks"]["1"]["cpu"], window
    assert 1.5 < window["seconds"] < 10 and not sampler.samples and window["first"]
    assert sampler.window()["first"] is False


def window(busy: list, at: float = 100.0, attempt: int = 0) -> dict:
    return {"at": at, "seconds": 10.0, "attempt": attempt, "ranks": {str(i): {"busy": b, "cpu": b} for i, b in enumerate(busy)}}


def test_the_node_the_others_wait_for_is_named_with_its_figures():
    # node3 at a fifth of a core: its rank busy the whole step, the others waiting for it at the all-reduce.
    perfs = {"node1": window([0.2]), "node2": window([0.25]), "node3": window([0.97])}
    found = judge.straggler(perfs, 105.0, 0)
    assert found == {"node": "node3", "busy": 0.97, "others": 0.225, "ratio": 4.31, "text": (
        "straggler: node3's ranks are busy 97 % of the time, the other nodes' 22 % (they wait for it); it computes at least "
        "4.3x longer per step")}


def test_no_straggler_when_every_node_is_as_busy_or_the_figures_are_stale():
    assert judge.straggler({"node1": window([0.9, 0.95]), "node2": window([0.92]), "node3": window([0.97])}, 105.0, 0) is None
    assert judge.straggler({"node1": window([0.3]), "node2": window([0.35]), "node3": window([0.6])}, 105.0, 0) is None
    slow = {"node1": window([0.2]), "node2": window([0.25]), "node3": window([0.97])}
    # Windows older than three, or of an earlier attempt, are not judged; nor is one node alone.
    assert judge.straggler(slow, 135.5, 0) is None and judge.straggler(slow, 105.0, 1) is None
    # Nor an attempt's first window: its start (imports, the rendezvous) is in it.
    assert judge.straggler(dict(slow, node3=dict(slow["node3"], first=True)), 105.0, 0) is None
    assert judge.straggler({"node1": window([0.97])}, 105.0, 0) is None


def test_the_runner_writes_each_windows_shares_to_the_nodes_perf_record(cluster):
    [node] = cluster("RANK=0 LOCAL_RANK=0 exec %s -c 'while True: pass'" % sys.executable)
    assert node.run("start").returncode == 0
    path = node.file("perf")
    deadline = time.monotonic() + 30
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    record = json.loads(path.read_text())
    assert (record["run_id"], record["node"], record["attempt"]) == (node.conf["run_id"], "node1", 0)
    assert list(record["ranks"]) == ["0"] and record["ranks"]["0"]["busy"] >= 0.8 and record["seconds"] >= perf.WINDOW, record
    assert node.report()["records"]["node1.perf.json"] == "record"


FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures")


def stack_of(name: str, node: str | None = None) -> list:
    """A rank's py-spy dump: a stall's diagnosis (tests/fixtures/stall) or a recording of its own."""
    if node:
        with open(os.path.join(FIXTURES, "stall", name, node + ".diagnosis.json") if name else
                  os.path.join(FIXTURES, "stall", node + ".diagnosis.json")) as handle:
            return next(p["stack"] for p in json.load(handle)["processes"] if p.get("stack"))
    with open(os.path.join(FIXTURES, name)) as handle:
        return json.load(handle)


def test_where_a_ranks_main_thread_is_from_its_recorded_stack():
    # The CPU cluster's ranks waiting for a stopped peer: in DDP's backward (the gradient all-reduce runs under it).
    waiting = stack_of("", "node1")
    assert perf.place(waiting, "S") == "collective" and perf.place(waiting, "R") == "compute"
    # The H100's GPU rank spins in torch.cuda.synchronize for its kernels (tests/device/bin/device-perf) ...
    assert perf.place(stack_of("gpu/perf/py-spy-gpu-rank.json"), "R") == "compute"
    # ... and the H200's rank 0 waiting for a stopped peer's NCCL all-reduce spins too, in its own code: on a GPU a wait
    # for NCCL reads as compute (the limit docs/training.md names).
    assert perf.place(stack_of("h200", "gpu1"), "R") == "compute"
    assert perf.place(None, "S") == "other" and perf.place([], "R") == "compute"
    # A rank stopped (SIGSTOP) inside DDP's backward waits in no collective: the others wait for it.
    assert perf.place(stack_of("", "node1"), "T") == "stopped" and perf.place(stack_of("", "node1"), "S") == "collective"


def places(counts: dict, busy: float = 0.3, at: float = 100.0) -> dict:
    return {"at": at, "seconds": 10.0, "attempt": 0, "ranks": {"0": {"busy": busy, "cpu": busy, "places": counts}}}


def test_the_bottleneck_is_the_straggler_first_then_the_class_the_stacks_show():
    slow = {"node1": places({"collective": 5}, 0.2), "node2": places({"collective": 5}, 0.25),
            "node3": places({"compute": 5}, 0.97)}
    assert judge.bottleneck(slow, 105.0, 0)["kind"] == "straggler"
    # Stacks read, but one node's window not there yet: nothing judged, not even the straggler (rank 0 busy saving a
    # checkpoint would be called one before the others' windows show them waiting in its save).
    assert judge.bottleneck(dict(slow, node2=None), 105.0, 0) is None
    assert judge.straggler(dict(slow, node2=None), 105.0, 0)["node"] == "node3"
    # The straggler computing its batches in the data loader (molecule train's at a fifth of a core): said with it.
    loading = dict(slow, node3=places({"input": 3, "compute": 2}, 0.97))
    found = judge.bottleneck(loading, 105.0, 0)
    assert found["kind"] == "straggler" and found["text"].endswith("longer per step; 60 % of its ranks' time is in the data loader")
    # One node's ranks wait for their data, the others for it in the all-reduce: that node, input-bound.
    loader = {"node1": places({"collective": 4, "compute": 1}), "node2": places({"input": 4, "other": 1}),
              "node3": places({"collective": 5})}
    found = judge.bottleneck(loader, 105.0, 0)
    assert found["kind"] == "input-bound" and found["node"] == "node2" and found["share"] == 0.8, found
    assert found["text"].startswith("input-bound: node2's ranks wait for their data 80 % of the time (node1 0 %, node2 80 %, "
                                    "node3 0 %); stage the data"), found
    # Every node's ranks in the checkpoint's save: no one node named.
    saving = {n: places({"checkpoint": 3, "compute": 2}) for n in ("node1", "node2")}
    found = judge.bottleneck(saving, 105.0, 0)
    assert found["kind"] == "checkpoint-bound" and found["node"] is None, found
    assert found["text"].startswith("checkpoint-bound: every node's ranks save or load checkpoints 60 % of the time"), found
    # Rank 0 busy with the save while the others wait for it at the barrier in it (molecule train's saving job): the
    # class, not a straggler.
    saving = {"node1": places({"checkpoint": 4, "compute": 1}, 1.0), "node2": places({"checkpoint": 3, "collective": 1}, 0.3),
              "node3": places({"checkpoint": 4}, 0.2)}
    found = judge.bottleneck(saving, 105.0, 0)
    assert found["kind"] == "checkpoint-bound" and found["text"].startswith(
        "checkpoint-bound: every node's ranks save or load checkpoints 75-100 % of the time (node1 80 %, node2 75 %, node3 100 %)"), found
    # Waiting in collectives with no straggler: communication-bound, with what the training interface carries.
    waiting = {n: dict(places({"collective": 4, "compute": 1}), net={"interface": "eth1", "rx_mbps": 11.9, "tx_mbps": 12.34})
               for n in ("node1", "node2")}
    # A rank stopped on node2 (molecule train's stall: SIGSTOP): node1's and node3's wait in the all-reduce for it, not for
    # the network.
    stopped = dict(waiting, node2=places({"stopped": 5}, 0.0), node3=waiting["node1"])
    assert judge.bottleneck(stopped, 105.0, 0) is None
    caught = dict(waiting, node2=places({"stopped": 5}, 0.0), node3=waiting["node1"])
    assert judge.bottleneck(caught, 105.0, 0) is None and not judge.judged(caught, 105.0, 0)
    found = judge.bottleneck(waiting, 105.0, 0)
    assert found["kind"] == "communication-bound" and found["text"].endswith(
        "; the training interface carries node1 12.3 MB/s out, 11.9 in (eth1), node2 12.3 MB/s out, 11.9 in (eth1)"), found


def test_no_bottleneck_below_the_bounds_with_too_few_looks_or_stale_windows():
    assert judge.bottleneck({n: places({"compute": 3, "other": 2, "input": 1}) for n in ("node1", "node2")}, 105.0, 0) is None
    few = {n: places({"input": judge.MIN_LOOKS - 1}) for n in ("node1", "node2")}
    assert judge.bottleneck(few, 105.0, 0) is None and judge.shares(few, 105.0, 0) is None
    loader = {n: places({"input": 5}) for n in ("node1", "node2")}
    assert judge.bottleneck(loader, 135.5, 0) is None and judge.bottleneck(loader, 105.0, 1) is None
    # Not before every node's window is there with its looks (the first ones end apart), and never "every node" for some.
    assert judge.bottleneck(dict(loader, node3=None), 105.0, 0) is None
    assert judge.bottleneck(dict(loader, node3=places({"input": 2})), 105.0, 0) is None
    # A node whose stacks were not read (its root lacks CAP_SYS_PTRACE) does not hold the others' judgment back.
    assert judge.bottleneck(dict(loader, node3=window([0.1])), 105.0, 0)["node"] == "node1"
    assert judge.bottleneck(dict(loader, node3=places({"compute": 5})), 105.0, 0)["node"] == "node1"
    # No stacks read (no py-spy, or ptrace denied): nothing to class.
    assert judge.bottleneck({n: window([0.3]) for n in ("node1", "node2")}, 105.0, 0) is None


def test_the_sampler_looks_at_the_stacks_once_in_stack_every_seconds():
    ranks = [rank("import time\ntime.sleep(60)", 0)]  # asleep at every look: its state S
    now = [1000.0]
    looked = []

    def stack(pid):
        looked.append(pid)
        return stack_of("", "node1"), None

    try:
        time.sleep(0.3)
        sampler = perf.Sampler(RUN, "node1", clock=lambda: now[0], stack=stack)
        for dummy in range(20):
            sampler.sample()
            now[0] += 0.5
        window = sampler.window()
    finally:
        for process in ranks:
            process.kill()
            process.wait()
    looks = int(10 / perf.STACK_EVERY)
    assert looked == [ranks[0].pid] * looks, looked
    # The recorded stack is DDP's backward; the rank sleeps (S) as each dump ends: waiting in the all-reduce.
    assert window["ranks"]["0"]["places"] == {"collective": looks}, window


def test_a_stack_not_read_is_said_in_the_window():
    ranks = [rank("import time\ntime.sleep(60)", 0)]
    try:
        time.sleep(0.3)
        sampler = perf.Sampler(RUN, "node1", clock=lambda: 1000.0, stack=lambda pid: (None, "Permission denied (os error 13)"))
        sampler.sample()
        window = sampler.window()
    finally:
        ranks[0].kill()
        ranks[0].wait()
    assert "places" not in window["ranks"]["0"] and window["stacks_unread"] == "Permission denied (os error 13)", window


def test_the_training_interfaces_bytes_are_counted_in_the_ranks_network_namespace():
    # lo stands for the training interface (GLOO_SOCKET_IFNAME, as launch.env sets it): the rank sends 2 MB a look.
    code = ("import socket, time\nserver = socket.socket(); server.bind(('127.0.0.1', 0)); server.listen(1)\n"
            "client = socket.create_connection(server.getsockname()); peer, _ = server.accept()\n"
            "while True:\n    client.sendall(b'x' * 2000000); got = 0\n"
            "    while got < 2000000: got += len(peer.recv(1 << 20))\n    time.sleep(0.1)\n")
    env = dict(os.environ, TRAINOPS_RUN_ID=RUN, TRAINOPS_NODE="node1", RANK="0", LOCAL_RANK="0", GLOO_SOCKET_IFNAME="lo")
    process = subprocess.Popen([sys.executable, "-c", code], env=env)
    try:
        time.sleep(0.5)
        sampler = perf.Sampler(RUN, "node1")
        for dummy in range(6):
            sampler.sample()
            time.sleep(0.5)
        window = sampler.window()
    finally:
        process.kill()
        process.wait()
    # About 2 MB every 0.1 s, each way on lo (other processes may add to lo: at least, not exactly).
    assert window["net"]["interface"] == "lo" and window["net"]["tx_mbps"] > 4 and window["net"]["rx_mbps"] > 4, window
    assert perf.interface_of([b"NCCL_SOCKET_IFNAME=^docker,lo", b"GLOO_SOCKET_IFNAME=eth1"]) == "eth1"
    assert perf.interface_of([b"NCCL_SOCKET_IFNAME=ib0,ib1"]) == "ib0" and perf.interface_of([b"PATH=/bin"]) is None


def test_what_the_ranks_wait_to_send_is_read_from_their_sockets():
    # The rank sends to a peer that does not read: its bytes wait in its socket's send queue (a slow link's sender's do).
    code = ("import socket, time\nserver = socket.socket(); server.bind(('127.0.0.1', 0)); server.listen(1)\n"
            "client = socket.create_connection(server.getsockname()); peer, _ = server.accept()\n"
            "peer.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536); client.setblocking(False)\n"
            "try:\n    while True: client.send(b'x' * 65536)\nexcept BlockingIOError:\n    pass\ntime.sleep(60)\n")
    process = rank(code, 0)
    try:
        time.sleep(1.0)
        sampler = perf.Sampler(RUN, "node1")
        for dummy in range(3):
            sampler.sample()
            sampler.stacked -= perf.STACK_EVERY  # a look at every sample
        window = sampler.window()
        inodes = perf.socket_inodes(process.pid)
    finally:
        process.kill()
        process.wait()
    assert window["queued_kb"] >= 64, window
    assert len(inodes) == 3 and perf.send_queue(os.getpid(), set()) == (0, ()) and perf.socket_inodes(-1) == set()
    # The IPv4 table held the rank's sockets: only it is read again.
    assert sampler.tables == ("tcp",), sampler.tables


def test_a_slow_link_is_named_by_the_sends_its_node_holds():
    waiting = {n: dict(places({"collective": 5}), queued_kb=12.0) for n in ("node1", "node2", "node3")}
    assert judge.bottleneck(waiting, 105.0, 0)["node"] is None
    slow = dict(waiting, node2=dict(waiting["node2"], queued_kb=3400.0))
    found = judge.bottleneck(slow, 105.0, 0)
    assert found["kind"] == "communication-bound" and found["node"] == "node2", found
    assert found["text"].startswith(
        "communication-bound: every node's ranks wait in collectives 100 % of the time (node1 100 %, node2 100 %, node3 100 %); "
        "node2's ranks' sends queue up (3400 KiB waiting on average, the other nodes' 12 KiB): its link out is slower"), found
    # Below the floor, or not far above the others': no node named.
    assert judge.bottleneck(dict(waiting, node2=dict(waiting["node2"], queued_kb=200.0)), 105.0, 0)["node"] is None
    level = {n: dict(places({"collective": 5}), queued_kb=900.0 + i) for i, n in enumerate(("node1", "node2", "node3"))}
    assert judge.bottleneck(level, 105.0, 0)["node"] is None


def test_judged_needs_every_nodes_stacks_and_no_node_waited_for():
    # Every node's stacks read and nothing found: judged, so "healthy" may be said (train_action=scale's sizes).
    calm = {n: places({"compute": 3, "other": 2}) for n in ("node1", "node2")}
    assert judge.judged(calm, 105.0, 0) and judge.bottleneck(calm, 105.0, 0) is None
    # Busy shares alone (no py-spy): a straggler can be named, but no other class: not judged.
    assert not judge.judged({n: window([0.3]) for n in ("node1", "node2")}, 105.0, 0)
    # A node's window missing, or some nodes' ranks waiting in the all-reduce for another's: not judged.
    assert not judge.judged(dict(calm, node2=None), 105.0, 0)
    assert not judge.judged(dict(calm, node1=places({"collective": 5})), 105.0, 0)


def test_a_gpu_job_is_judged_on_nccls_own_times_on_every_node_not_on_its_stacks():
    """A GPU rank's stack reads "compute" whether it computes or waits for NCCL (every look of every rank on the GPU
    machine, tests/fixtures/gpu/h100x1-nodes-job): a GPU job of more than one rank is judged on NCCL's own times."""
    gpu = {n: dict(places({"compute": 10}, busy=1.0), gpus=[{"index": 0, "util": 100.0}]) for n in ("gpu1", "gpu2")}
    assert not judge.judged(gpu, 105.0, 0) and judge.bottleneck(gpu, 105.0, 0) is None
    timed = {"calls": 81, "ms": 5000.0, "seconds": 10.0, "share": 0.5, "sizes": []}
    assert not judge.judged(dict(gpu, gpu1=dict(gpu["gpu1"], collectives={"0": timed})), 105.0, 0)
    both = {n: dict(w, collectives={"0": timed}) for n, w in gpu.items()}
    assert judge.judged(both, 105.0, 0)
    # One rank alone waits for nobody: its stacks judge it. A job on GPU hosts whose GPUs stay idle (Gloo): as on CPUs.
    assert judge.judged({"gpu1": gpu["gpu1"]}, 105.0, 0)
    assert judge.judged({n: dict(w, gpus=[{"index": 0, "util": 0.0}]) for n, w in gpu.items()}, 105.0, 0)


def test_each_window_carries_the_attempts_earlier_ones_in_brief():
    window = dict(places({"collective": 6, "compute": 2}, busy=0.4), gpus=[{"util": 80.0}, {"util": 90.0}],
                  net={"interface": "eth1", "rx_mbps": 4.7, "tx_mbps": 4.8})
    assert perf.history_point(window) == {"at": 100.0, "busy": 0.4, "wait": 0.75, "gpu": 85.0, "tx": 4.8}
    assert perf.history_point({"at": 5.0, "ranks": {}}) == {"at": 5.0, "busy": None, "wait": None, "gpu": None, "tx": None}
    clock = [1000.0]
    sampler = perf.Sampler("nobody", "node1", clock=lambda: clock[0])
    for dummy in range(perf.HISTORY + 2):
        clock[0] += perf.WINDOW
        last = sampler.window()
    # The last HISTORY windows, the newest last: what status and the page show of the node over time.
    assert len(last["history"]) == perf.HISTORY and last["history"][-1]["at"] == clock[0]


def test_the_rdma_ports_bytes_are_read_from_their_counters(tmp_path):
    # An mlx5 port as sysfs shows it: its data counters count 4-octet words.
    for device, state, rcv, xmit in (("mlx5_0", "4: ACTIVE", 1000, 2500), ("mlx5_1", "1: DOWN", 7, 7)):
        port = tmp_path / "class" / "infiniband" / device / "ports" / "1"
        (port / "counters").mkdir(parents=True)
        for name, text in (("state", state), ("phys_state", "5: LinkUp"), ("rate", "400 Gb/sec (4X NDR)"), ("link_layer", "InfiniBand")):
            (port / name).write_text(text + "\n")
        (port / "counters" / "port_rcv_data").write_text("%d\n" % rcv)
        (port / "counters" / "port_xmit_data").write_text("%d\n" % xmit)
    assert perf.rdma_bytes(str(tmp_path)) == (4000, 10000)
    assert perf.rdma_bytes(str(tmp_path / "none")) is None
    # Communication-bound with RDMA figures: said beside the interface's.
    waiting = {n: dict(places({"collective": 5}), rdma={"interface": "RDMA ports", "rx_mbps": 20100.0, "tx_mbps": 21000.0})
               for n in ("node1", "node2")}
    found = judge.bottleneck(waiting, 105.0, 0)
    assert found["rdma"]["node1"]["tx_mbps"] == 21000.0 and found["text"].endswith(
        "; the RDMA ports carry node1 21000.0 MB/s out, 20100.0 in (RDMA ports), node2 21000.0 MB/s out, 20100.0 in (RDMA ports)")
