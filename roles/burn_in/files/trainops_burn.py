# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""trainops_burn: the burn-in rung of the verify ladder, run inside the cluster's training image on one node. It loads
every GPU of the node at once (one thread a GPU: torch lets go of the GIL in its CUDA calls), as a job does, so heat,
power and shared links weigh on the figures, and measures on each: bf16 matrix products (TFLOP/s) with the GPU's clocks
while they run (NVML: SM clock, power, temperature, clock event reasons), a device-to-device copy (GB/s, read plus
write), pinned host-to-device and device-to-host copies (GB/s). Every GPU multiplies the same
numbers, and the product's sha256 is taken first and again after the timed phase: a GPU whose result changes, or
differs from its peers of the same model, computes wrongly (silent data corruption); the controller compares them, and
a GPU slower than its peers (clocks held down, a narrow PCIe link) stands out the same way. Without CUDA (the CPU test
nodes) it measures the CPU as device 0: float32 products and a memory copy, so a node with a cut CPU quota reads slower.
One JSON document on stdout, nothing else; progress and errors on stderr. Exit 0 once it is printed, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import os
import re
import sys
import threading
import time

import torch

MIB = 1 << 20
GEMM_WARMUP = 1.0   # seconds of untimed products: clocks and power settle before the count starts
COPY_SECONDS = 2.0  # each copy's timed phase
COPY_WARMUP = 0.2
BATCH = 0.25        # seconds of work between two timings: short enough to stop near the end, long enough that the gaps don't count
LOOK = 0.5          # seconds between two looks at a GPU's clocks while its products run


def tflops(size, count, seconds):
    """A product of two size x size matrices is 2 * size^3 floating-point operations. Below 1 TFLOP/s (a CPU) one decimal
    would read 0.0 on every node, so there four."""
    value = 2.0 * size ** 3 * count / seconds / 1e12
    return round(value, 1 if value >= 1 else 4)


def gbps(nbytes, seconds):
    return round(nbytes / seconds / 1e9, 1)


def bus_id(domain, bus, device):
    """The PCI address as nvidia-smi writes it, so that a figure can be matched with its GPU in nvidia-smi's output."""
    if None in (domain, bus, device):
        return None
    return "%08X:%02X:%02X.0" % (domain, bus, device)


def driver_version(text):
    """The kernel module's version from /proc/driver/nvidia/version ("NVRM version: NVIDIA UNIX Open Kernel Module for
    x86_64  580.159.04  Release Build ..."; the proprietary module's line has no "Open")."""
    match = re.search(r"Kernel Module\b.*?\s(\d+\.\d+(?:\.\d+)?)\s", text or "")
    return match.group(1) if match else None


def sha256(tensor):
    """The sha256 of the tensor's bytes: floats viewed as integers of their width, so that the bits are hashed."""
    as_int = {torch.bfloat16: torch.int16, torch.float16: torch.int16, torch.float32: torch.int32}[tensor.dtype]
    return hashlib.sha256(tensor.view(as_int).cpu().numpy().tobytes()).hexdigest()


class Nvml:
    """The driver's NVML (libnvidia-ml.so.1, which the container toolkit mounts with nvidia-smi), through ctypes: a GPU's
    SM clock, its maximum, power, temperature and the clock event reasons as a bitmask (the controller names them)."""

    def __init__(self):
        self.lib = ctypes.CDLL("libnvidia-ml.so.1")
        if self.lib.nvmlInit_v2() != 0:
            raise OSError("nvmlInit failed")
        # Drivers 535 and later name the reasons "events", earlier ones "throttle" (the older name stays exported).
        self.reasons = getattr(self.lib, "nvmlDeviceGetCurrentClocksEventReasons", None) or self.lib.nvmlDeviceGetCurrentClocksThrottleReasons

    def handle(self, bus):
        device = ctypes.c_void_p()
        if self.lib.nvmlDeviceGetHandleByPciBusId_v2(bus.encode(), ctypes.byref(device)) != 0:
            raise OSError("NVML does not know GPU %s" % bus)
        return device

    def _uint(self, call, device, *args):
        value = ctypes.c_uint()
        return value.value if call(device, *args, ctypes.byref(value)) == 0 else None

    def look(self, device):
        """{sm_mhz, sm_max_mhz, power_w, temp_c, reasons (the bitmask)}; None for what the GPU does not report."""
        mask = ctypes.c_ulonglong()
        power = self._uint(self.lib.nvmlDeviceGetPowerUsage, device)
        return {"sm_mhz": self._uint(self.lib.nvmlDeviceGetClockInfo, device, 1),  # NVML_CLOCK_SM
                "sm_max_mhz": self._uint(self.lib.nvmlDeviceGetMaxClockInfo, device, 1),
                "power_w": power / 1000.0 if power is not None else None,
                "temp_c": self._uint(self.lib.nvmlDeviceGetTemperature, device, 0),  # NVML_TEMPERATURE_GPU
                "reasons": mask.value if self.reasons(device, ctypes.byref(mask)) == 0 else None}


def clocks_of(looks):
    """A GPU's clocks under load from its looks: {looks, sm_mhz (mean), sm_max_mhz, power_w (mean), temp_c (the
    highest), reasons ({bit as "0x8": share of the looks})}."""
    def mean(key):
        values = [look[key] for look in looks if look.get(key) is not None]
        return round(sum(values) / len(values), 1) if values else None
    bits = {}
    for look in looks:
        mask = look.get("reasons") or 0
        for bit in range(16):
            if mask & (1 << bit):
                bits[hex(1 << bit)] = bits.get(hex(1 << bit), 0) + 1
    temps = [look["temp_c"] for look in looks if look.get("temp_c") is not None]
    return {"looks": len(looks), "sm_mhz": mean("sm_mhz"), "sm_max_mhz": max((look.get("sm_max_mhz") or 0 for look in looks), default=None) or None,
            "power_w": mean("power_w"), "temp_c": max(temps) if temps else None,
            "reasons": {bit: round(count / float(len(looks)), 2) for bit, count in sorted(bits.items())}}


class Watch(threading.Thread):
    """Looks at one GPU's clocks every LOOK seconds until stopped."""

    def __init__(self, nvml, bus):
        super().__init__(daemon=True)
        self.nvml, self.device, self.looks, self.done = nvml, nvml.handle(bus), [], threading.Event()

    def run(self):
        while not self.done.wait(LOOK):
            self.looks.append(self.nvml.look(self.device))

    def stop(self):
        self.done.set()
        self.join()
        return clocks_of(self.looks)


def cuda_clock(op, n):
    """Seconds the GPU spent on n ops, by CUDA events on the thread's current device: what the GPU did, not the launches."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for dummy in range(n):
        op()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3


def cpu_clock(op, n):
    start = time.perf_counter()
    for dummy in range(n):
        op()
    return time.perf_counter() - start


def run_for(op, seconds, warmup, clock, timed=None):
    """Runs op in batches of about BATCH seconds, untimed for `warmup` seconds, then until `seconds` are timed; returns
    (count, seconds timed). timed(): called as the timed phase begins."""
    clock(op, 1)  # the first op pays for the set-up (cuBLAS handle, kernel choice, allocations)
    batch = max(1, int(BATCH / max(clock(op, 2) / 2, 1e-9)))
    spent = 0.0
    while spent < warmup:
        spent += clock(op, batch)
    if timed:
        timed()
    count, spent = 0, 0.0
    while spent < seconds:
        spent += clock(op, batch)
        count += batch
    return count, spent


def burn(result, device, inputs, args):
    """Measures one device into `result`, a figure at a time, so that what was measured before a failure is kept."""
    cuda = device.type == "cuda"
    clock = cuda_clock if cuda else cpu_clock
    if cuda:
        torch.cuda.set_device(device)  # the current device is the thread's own: the events and kernels go to this GPU
    else:
        torch.set_num_threads(args.threads)  # OpenMP's thread count is a thread's own too: set where the products run
    gemm = result["gemm"]
    a, b = (x.to(device) for x in inputs)
    c = torch.empty_like(a)
    torch.matmul(a, b, out=c)
    gemm["sha256"] = sha256(c)
    watch = None
    if cuda and args.nvml and result["bus_id"]:
        try:
            watch = Watch(args.nvml, result["bus_id"])
        except OSError as error:
            result["clocks"] = {"error": str(error)}
    # The clocks of the timed products only: the set-up and warm-up would dilute what the hardware held back.
    count, spent = run_for(lambda: torch.matmul(a, b, out=c), args.seconds, GEMM_WARMUP, clock, watch and watch.start)
    if watch:
        result["clocks"] = watch.stop()
    gemm.update(count=count, seconds=round(spent, 3), tflops=tflops(args.size, count, spent))
    c.zero_()  # a product that did not run would leave the last timed one behind, and hash the same
    torch.matmul(a, b, out=c)
    gemm["repeat_sha256"] = sha256(c)
    print("%s %d: gemm %s TFLOP/s" % (device.type, result["index"], gemm["tflops"]), file=sys.stderr)
    src = torch.empty(args.memory_mib * MIB, dtype=torch.uint8, device=device).fill_(1)
    dst = torch.empty_like(src)
    count, spent = run_for(lambda: dst.copy_(src), COPY_SECONDS, COPY_WARMUP, clock)
    result["memory"]["gbps"] = gbps(2 * src.numel() * count, spent)  # each byte read once and written once
    if not cuda:
        return
    # Pinned host memory: the copy engines move it by DMA at the link's speed, which is what a narrow or slow PCIe
    # link (a GPU in the wrong slot, a link trained down) shows in.
    host = torch.ones(args.copy_mib * MIB, dtype=torch.uint8, pin_memory=True)
    dev = torch.empty(host.numel(), dtype=torch.uint8, device=device)
    for key, target, source in (("h2d", dev, host), ("d2h", host, dev)):
        count, spent = run_for(lambda t=target, s=source: t.copy_(s, non_blocking=True), COPY_SECONDS, COPY_WARMUP, clock)
        result[key]["gbps"] = gbps(host.numel() * count, spent)
    figures = (result["index"], result["memory"]["gbps"], result["h2d"]["gbps"], result["d2h"]["gbps"])
    print("cuda %d: memory %.1f, h2d %.1f, d2h %.1f GB/s" % figures, file=sys.stderr)


def guarded(result, *work):
    try:
        burn(result, *work)
    except Exception as error:  # one GPU's failure is its own result; the others still report
        result["error"] = "%s: %s" % (type(error).__name__, error)
        print("%s %d: %s" % (result["name"], result["index"], result["error"]), file=sys.stderr)


def positive(kind):
    def parse(text):
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError("%s is not positive" % text)
        return value
    return parse


def main(argv=None):
    parser = argparse.ArgumentParser(prog="trainops_burn", description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--seconds", type=positive(float), default=10.0, help="the timed products' length a GPU")
    parser.add_argument("--size", type=positive(int), help="the matrices' size (default 8192 on GPU, 1024 on CPU)")
    parser.add_argument("--memory-mib", type=positive(int), default=1024, help="the device copy's buffer")
    parser.add_argument("--copy-mib", type=positive(int), default=1024, help="the pinned host<->device buffer")
    parser.add_argument("--threads", type=positive(int), help="CPU mode: torch's threads (default: the process's CPUs)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    cuda = torch.cuda.is_available()
    args.size = args.size or (8192 if cuda else 1024)
    dtype = torch.bfloat16 if cuda else torch.float32
    # Made once on the CPU from a fixed seed: every GPU (and every node) multiplies the very same numbers.
    generator = torch.Generator().manual_seed(1234)
    inputs = [torch.randn(args.size, args.size, generator=generator).to(dtype) for dummy in range(2)]
    results, devices = [], []
    args.nvml, why = None, None
    if cuda:
        try:
            args.nvml = Nvml()  # the clocks under load, where the image sees the driver's NVML
        except (OSError, AttributeError) as error:
            why = "no NVML: %s" % error
        for i in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(i)
            ids = [getattr(props, "pci_%s_id" % part, None) for part in ("domain", "bus", "device")]
            results.append({"index": i, "name": torch.cuda.get_device_name(i), "bus_id": bus_id(*ids)})
            devices.append(torch.device("cuda", i))
    else:
        args.threads = args.threads or len(os.sched_getaffinity(0))
        results.append({"index": 0, "name": "cpu", "bus_id": None})
        devices.append(torch.device("cpu"))
    for result in results:
        copy = {"mib": args.copy_mib, "gbps": None} if cuda else None
        result.update(gemm={"dtype": str(dtype).split(".")[1], "size": args.size, "count": None, "seconds": None, "tflops": None,
                            "sha256": None, "repeat_sha256": None},
                      memory={"mib": args.memory_mib, "gbps": None}, h2d=copy, d2h=copy and dict(copy), error=None,
                      clocks={"error": why} if cuda and why else None)
    threads = [threading.Thread(target=guarded, args=(result, device, inputs, args)) for result, device in zip(results, devices)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        with open("/proc/driver/nvidia/version") as version:
            driver = driver_version(version.read())
    except OSError:
        driver = None
    print(json.dumps({"program": "trainops_burn", "version": 1, "torch": torch.__version__, "cuda": torch.version.cuda or None,
                      "driver": driver, "kind": "cuda" if cuda else "cpu", "seconds": round(time.monotonic() - started, 3),
                      "devices": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
