# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_facts
short_description: Gather NVIDIA GPU, NVLink, topology and Xid facts
version_added: 0.1.0
author:
  - trainops.cluster maintainers (@trainops)
description:
  - Runs C(nvidia-smi -q -x), C(nvidia-smi --query-gpu=... --format=csv), C(nvidia-smi topo -m),
    C(nvidia-smi nvlink -s) and C(nvidia-smi nvlink -e), reads C(/proc/driver/nvidia/version) and scans the kernel log (C(dmesg), falling back to
    C(journalctl -k -b --no-pager)) for Xid events, and returns them as the C(trainops_gpu) fact.
  - Read-only. Never fails because a tool is missing, a command fails or hangs; the fact says why instead
    (RV(ansible_facts.trainops_gpu.reason), RV(ansible_facts.trainops_gpu.errors),
    RV(ansible_facts.trainops_gpu.xid_reason)).
  - Each command runs in its own process group under a time limit. On timeout the group is killed and not waited
    for, because C(nvidia-smi) on a GPU that fell off the bus can sit in uninterruptible sleep where even SIGKILL
    does not end it. The commands run at the same time, so a hung GPU costs one time limit, not one per command.
  - A node without the NVIDIA driver gets RV(ansible_facts.trainops_gpu.available=false),
    RV(ansible_facts.trainops_gpu.gpu_count=0) and a RV(ansible_facts.trainops_gpu.reason).
options:
  nvidia_smi:
    description:
      - Path of the C(nvidia-smi) executable.
      - Defaults to C(nvidia-smi) found on E(PATH) (and the sbin directories).
      - Point it at a script that replays recorded output to test without a GPU.
    type: path
  timeout:
    description:
      - Seconds each command (every C(nvidia-smi) call, C(dmesg), C(journalctl)) may run before it is killed
        and reported as timed out.
    type: int
    default: 20
extends_documentation_fragment:
  - trainops.cluster.attributes
  - trainops.cluster.attributes.facts
attributes:
  platform:
    support: full
    platforms: linux
    description: Runs C(nvidia-smi) where it is installed; a node without it returns no GPUs and says why.
notes:
  - Reading the kernel log needs root (C(kernel.dmesg_restrict)) or membership of the C(adm) or C(systemd-journal)
    group; otherwise RV(ansible_facts.trainops_gpu.xid_errors) is null and
    RV(ansible_facts.trainops_gpu.xid_reason) says why. Run it with C(become) to scan for Xid events.
  - NVLink speeds are per direction, as C(nvidia-smi nvlink -s) prints them.
seealso:
  - name: NVIDIA Xid errors
    description: What each Xid code means and the suggested action.
    link: https://docs.nvidia.com/deploy/xid-errors/
"""

EXAMPLES = r"""
- name: Gather GPU facts
  trainops.cluster.gpu_facts:
  become: true

- name: Require eight GPUs with full NVLink
  ansible.builtin.assert:
    that:
      - trainops_gpu.available
      - trainops_gpu.gpu_count == 8
      - trainops_gpu.nvlink is not none
      - trainops_gpu.nvlink.links_per_gpu == 18
    fail_msg: "{{ trainops_gpu.reason or trainops_gpu.nvlink }}"

- name: Report Xid events seen since boot
  ansible.builtin.debug:
    msg: "GPU {{ item.gpu_index }} ({{ item.pci }}): Xid {{ item.xid }} {{ item.message }}"
  loop: "{{ trainops_gpu.xid_errors or [] }}"

- name: Gather facts from a script that replays recorded nvidia-smi output (no GPU needed)
  trainops.cluster.gpu_facts:
    nvidia_smi: /srv/replay/nvidia-smi
    timeout: 5
"""

RETURN = r"""
ansible_facts:
  description: Facts to add to the host's facts.
  returned: always
  type: dict
  contains:
    trainops_gpu:
      description: NVIDIA GPU facts of the node.
      returned: always
      type: dict
      contains:
        available:
          description: Whether C(nvidia-smi) listed at least one GPU.
          type: bool
          returned: always
          sample: true
        reason:
          description: Why RV(ansible_facts.trainops_gpu.available) is false (tool missing, command failed or timed out); null when available.
          type: str
          returned: always
          sample: "nvidia-smi not found; /proc/driver/nvidia/version absent (no NVIDIA kernel module loaded)"
        driver_version:
          description: Driver version from C(nvidia-smi), or from the kernel module when C(nvidia-smi) is unusable.
          type: str
          returned: always
          sample: "580.159.04"
        cuda_version:
          description: Highest CUDA version the driver supports, as C(nvidia-smi) reports it.
          type: str
          returned: always
          sample: "13.0"
        gpu_count:
          description: Number of GPUs; 0 when none could be listed.
          type: int
          returned: always
          sample: 2
        gpu_models:
          description: Distinct GPU product names, in index order.
          type: list
          elements: str
          returned: always
          sample: ["NVIDIA H200"]
        gpus:
          description: One entry per GPU, sorted by nvidia-smi index.
          type: list
          elements: dict
          returned: always
          contains:
            index:
              description: nvidia-smi index (also CUDA's with CUDA_DEVICE_ORDER=PCI_BUS_ID).
              type: int
              sample: 0
            minor_number:
              description: The GPU's device file is C(/dev/nvidia<minor_number>) (Slurm's gres.conf names it); null when not reported.
              type: int
              sample: 0
            name:
              description: Product name.
              type: str
              sample: "NVIDIA H200"
            uuid:
              description: GPU UUID.
              type: str
              sample: "GPU-35dbb3dd-bc6a-8d24-264e-1c22176352a8"
            pci_bus_id:
              description: PCI bus id as nvidia-smi prints it.
              type: str
              sample: "00000000:00:06.0"
            memory_total_mib:
              description: Framebuffer memory in MiB.
              type: int
              sample: 143771
            compute_capability:
              description: CUDA compute capability; null if the driver is too old to report it.
              type: str
              sample: "9.0"
            ecc_mode:
              description: Current ECC mode.
              type: str
              sample: "Enabled"
            mig_mode:
              description: Current MIG mode; null on GPUs without MIG.
              type: str
              sample: "Disabled"
            persistence_mode:
              description: Persistence mode.
              type: str
              sample: "Enabled"
            nvlink:
              description:
                - This GPU's NVLink status; null when C(nvidia-smi nvlink -s) did not list the GPU.
                - C(links_inactive) is null when the driver only said all links are inactive.
                - C(errors) the error counters of C(nvidia-smi nvlink -e) since the driver loaded, summed over the GPU's
                  links (C(replay), C(recovery), C(crc)) and the C(links) with any; null where they were not read.
              type: dict
              sample: {"links_active": 18, "links_inactive": 0, "link_speed_gbps": 26.562, "bandwidth_gbps": 478.116,
                       "errors": {"replay": 0, "recovery": 0, "crc": 0, "links": []}}
            pcie:
              description:
                - This GPU's PCIe link from C(nvidia-smi -q -x); null when the XML has none.
                - C(max_gen) and C(max_width) are what the link can train to (the lower of GPU and host), C(current_gen) and
                  C(current_width) what it runs at now (the generation drops while the GPU idles).
              type: dict
              sample: {"max_gen": 5, "max_width": 16, "current_gen": 5, "current_width": 16}
            health:
              description:
                - This GPU's health from C(nvidia-smi -q -x), read and not judged (the doctor judges, docs/gpu-health.md).
                - C(ecc) volatile (since the driver loaded) and aggregate (the GPU's life) error counts, the counters it reports;
                  C(remapped_rows) (Ampere on) or C(retired_pages) (older GPUs), null where the GPU has none; C(clock_reasons)
                  the clock event reasons active now; C(sm_clock_mhz) now against C(sm_clock_max_mhz).
              type: dict
              sample: {"ecc": {"volatile": {"dram_uncorrectable": 0}, "aggregate": {"dram_uncorrectable": 0}}, "sram_threshold_exceeded": false,
                       "remapped_rows": {"correctable": 0, "uncorrectable": 0, "pending": false, "failure": false}, "retired_pages": null,
                       "clock_reasons": ["gpu_idle"], "sm_clock_mhz": 345, "sm_clock_max_mhz": 1980}
        nvlink:
          description:
            - Node NVLink summary, each figure the minimum over GPUs (the slowest GPU paces a collective).
            - C(links_per_gpu) active links, C(link_speed_gbps) per link and C(bandwidth_gbps_per_gpu) per GPU,
              in GB/s per direction.
            - Null when no GPU reports any NVLink (PCIe-only node) or C(nvidia-smi nvlink -s) failed (see RV(ansible_facts.trainops_gpu.errors)).
          type: dict
          returned: always
          sample: {"links_per_gpu": 18, "link_speed_gbps": 26.562, "bandwidth_gbps_per_gpu": 478.116}
        pcie:
          description:
            - Node PCIe summary, the lowest maximum generation (C(gen)) and width (C(width), lanes) over the GPUs.
            - The verify ladder measures a node without NVLink against it.
            - Null when a GPU does not report its PCIe link, or there are no GPUs.
          type: dict
          returned: always
          sample: {"gen": 5, "width": 16}
        topology:
          description:
            - Parsed C(nvidia-smi topo -m); null when it was not run or failed.
            - C(matrix) maps each device to its peers' connection type (C(NV18), C(PIX), C(PHB), C(SYS), ...), self left out.
            - C(gpus) holds each GPU's C(cpu_affinity), C(numa_affinity) and C(gpu_numa_id); C(nics) each NIC column's
              C(name) and C(device) (from the NIC legend).
          type: dict
          returned: always
          sample:
            matrix: {"GPU0": {"GPU1": "NV18", "NIC0": "PIX"}, "GPU1": {"GPU0": "NV18", "NIC0": "SYS"}, "NIC0": {"GPU0": "PIX", "GPU1": "SYS"}}
            gpus: [{"name": "GPU0", "index": 0, "cpu_affinity": "0-31", "numa_affinity": "0", "gpu_numa_id": null}]
            nics: [{"name": "NIC0", "device": "mlx5_0"}]
        kernel_module:
          description: Loaded NVIDIA kernel module from C(/proc/driver/nvidia/version); C(type) is C(open) or C(proprietary). Null if absent.
          type: dict
          returned: always
          sample: {"version": "580.159.04", "type": "open", "description": "NVIDIA UNIX Open Kernel Module for x86_64"}
        xid_errors:
          description:
            - Xid events in the kernel log since boot, oldest first; an empty list when there are none.
            - Null when the kernel log could not be read (see RV(ansible_facts.trainops_gpu.xid_reason)).
            - C(gpu_index) is the GPU at that PCI address, null if no listed GPU matches (for example one that fell off the bus).
          type: list
          elements: dict
          returned: always
          sample: [{"pci": "0000:00:07", "xid": 79, "message": "pid=1912, name=python3, GPU has fallen off the bus.", "gpu_index": 1}]
        xid_reason:
          description: Why the kernel log could not be read; null when it was.
          type: str
          returned: always
          sample: "dmesg failed (rc 1): dmesg: read kernel buffer failed: Operation not permitted; journalctl -k: No journal files were found"
        errors:
          description: Failures of the secondary C(nvidia-smi) commands (query, topo, nvlink) while the GPU list itself was read.
          type: list
          elements: str
          returned: always
          sample: ["nvidia-smi nvlink -s timed out after 20 s"]
"""

import os
from concurrent.futures import ThreadPoolExecutor

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.trainops.cluster.plugins.module_utils.command import run_bounded
from ansible_collections.trainops.cluster.plugins.module_utils.gpu import QUERY_GPU_FIELDS, gather

PROC_DRIVER_VERSION = "/proc/driver/nvidia/version"
SMI_COMMANDS = (
    ("smi_xml", ["-q", "-x"]),
    ("query_csv", ["--query-gpu=" + ",".join(QUERY_GPU_FIELDS), "--format=csv"]),
    ("topo", ["topo", "-m"]),
    ("nvlink", ["nvlink", "-s"]),
    ("nvlink_errors", ["nvlink", "-e"]),
)
# journalctl exits 0 with these when it has nothing it may show.
JOURNAL_UNREADABLE = ("No journal files were found", "due to insufficient permissions",
                      "not seeing messages from other users and the system")


def _failure(label, rc, out, err, timeout, timed_out):
    if timed_out:
        return "%s timed out after %d s" % (label, timeout)
    detail = (err.strip() or out.strip() or "no output").splitlines()[0]
    return "%s failed (rc %d): %s" % (label, rc, detail)


def read_nvidia_smi(module, nvidia_smi, timeout, pool):
    """Texts of the nvidia-smi commands keyed as gather() takes them, plus smi_reason and errors. The commands run
    at once: each costs a fraction of a second even on an idle GPU, and a hung GPU then costs one timeout, not four."""
    runs = [(key, args, pool.submit(run_bounded, module, [nvidia_smi] + args, timeout)) for key, args in SMI_COMMANDS]
    result = {"smi_reason": None, "errors": []}
    for key, args, run in runs:
        rc, out, err, hung = run.result()
        result[key] = out if rc == 0 else None
        if rc != 0:
            result["errors"].append(_failure("nvidia-smi " + " ".join(args), rc, out, err, timeout, hung))
    if result["smi_xml"] is None:
        # Without the GPU list the other commands add nothing (and failed the same way): the XML's failure is the reason.
        return {"smi_reason": result["errors"][0], "errors": []}
    return result


def read_kernel_log(module, timeout):
    """(text, None) from dmesg or journalctl -k, or (None, reason) when neither could be read."""
    problems = []
    for name, args in (("dmesg", []), ("journalctl", ["-k", "-b", "--no-pager"])):
        label = " ".join([name] + args[:1])
        path = module.get_bin_path(name)
        if path is None:
            problems.append("%s not found" % name)
            continue
        rc, out, err, hung = run_bounded(module, [path] + args, timeout)
        unreadable = [marker for marker in JOURNAL_UNREADABLE if marker in out or marker in err]
        if rc == 0 and not unreadable:
            return out, None
        problems.append("%s: %s" % (label, unreadable[0]) if rc == 0 else _failure(label, rc, out, err, timeout, hung))
    return None, "; ".join(problems)


def read_text(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            nvidia_smi=dict(type="path"),
            timeout=dict(type="int", default=20),
        ),
        supports_check_mode=True,
    )
    timeout = module.params["timeout"]
    if timeout < 1:
        module.fail_json(msg="timeout must be at least 1 second, got %d" % timeout)

    nvidia_smi = module.params["nvidia_smi"] or module.get_bin_path("nvidia-smi")
    with ThreadPoolExecutor(max_workers=len(SMI_COMMANDS) + 1) as pool:
        kernel_log_read = pool.submit(read_kernel_log, module, timeout)
        if nvidia_smi is None:
            smi = {"smi_reason": "nvidia-smi not found on PATH", "errors": []}
        elif not (os.path.isfile(nvidia_smi) and os.access(nvidia_smi, os.X_OK)):
            smi = {"smi_reason": "nvidia-smi not found at %s (missing or not executable)" % nvidia_smi, "errors": []}
        else:
            smi = read_nvidia_smi(module, nvidia_smi, timeout, pool)
        kernel_log, kernel_log_reason = kernel_log_read.result()

    facts = gather(
        smi_xml=smi.get("smi_xml"),
        query_csv=smi.get("query_csv"),
        topo=smi.get("topo"),
        nvlink=smi.get("nvlink"),
        nvlink_errors=smi.get("nvlink_errors"),
        proc_version=read_text(PROC_DRIVER_VERSION),
        kernel_log=kernel_log,
        smi_reason=smi["smi_reason"],
        kernel_log_reason=kernel_log_reason,
        errors=smi["errors"],
    )
    for error in facts["errors"]:
        module.warn(error)
    module.exit_json(changed=False, ansible_facts={"trainops_gpu": facts})


if __name__ == "__main__":
    main()
