# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Parsers for NVIDIA GPU tool output and the combiner that builds the trainops_gpu facts.

Pure functions, stdlib only (Python 3.9+): text in, dicts out. Inputs are what these print:
`nvidia-smi -q -x`, `nvidia-smi --query-gpu=... --format=csv`, `nvidia-smi topo -m`,
`nvidia-smi nvlink -s`, /proc/driver/nvidia/version and the kernel log (dmesg / journalctl -k).
gather() takes those texts (None where a tool or file is missing) and never raises.

Node side: shipped to the nodes inside the module that imports it (gpu_facts).
"""

from __future__ import annotations

import csv
import re
import xml.etree.ElementTree as ET
from typing import Any

from ._gpu_health import parse_health
from ._smi_values import int_prefix as _int_prefix
from ._smi_values import value as _value
from ._smi_values import xml_text as _xml_text

# The fields gpu_facts asks --query-gpu for; parse_query_csv reads any header, these are only the request.
QUERY_GPU_FIELDS = ("index", "name", "uuid", "driver_version", "memory.total", "pci.bus_id", "compute_cap",
                    "persistence_mode", "ecc.mode.current")

# nvidia-smi writes these where a value does not apply or cannot be read.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_NVLINK_GPU = re.compile(r"^GPU (\d+): (.*?) \(UUID: ([^)]+)\)\s*$")
_NVLINK_LINK = re.compile(r"^Link (\d+): (.*)$")
# `nvidia-smi nvlink -e`: "GPU 0: NVIDIA GB300" (the UUID where the driver prints it), then "Link 0: Replay Errors: 0",
# "Link 0: Recovery Errors: 0", "Link 0: CRC Errors: 0" for each link (NVIDIA/srt-slurm pull request 307's capture).
_NVLINK_ERRORS_GPU = re.compile(r"^GPU (\d+):(?:.*\(UUID: ([^)]+)\))?")
_NVLINK_ERROR = re.compile(r"^Link (\d+): (Replay|Recovery|CRC) Errors: (\d+)\s*$", re.IGNORECASE)
_TOPO_GPU = re.compile(r"^GPU(\d+)$")
_TOPO_SPLIT = re.compile(r"\t| {2,}")
_TOPO_NIC_LEGEND = re.compile(r"^(NIC\d+):\s*(\S+)$")
_XID = re.compile(r"NVRM: Xid \(PCI:([0-9A-Fa-f:.]+)\): (\d+)(?:,\s*(.*))?$")

# The Xid table, one for the doctor and the job runner (NVIDIA's Xid catalog, "Resolution Bucket",
# https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html, and the drain checks of its Health Validation,
# https://docs.nvidia.com/health-validation/reference/checks/xid.md). Out of service: the GPU needs a reset, the node
# a reboot, or the part a service; the doctor fails the node and a restart leaves it out. Application: the program's
# own faults (13, 31) or a channel it ended (43, 45); the GPU stays fit to start again, the doctor warns. Any other
# Xid: the doctor warns, naming it to be looked up; a restart takes the node.
OUT_OF_SERVICE_XIDS = frozenset((46, 48, 62, 63, 64, 74, 79, 92, 95, 119, 120, 140, 154))
APPLICATION_XIDS = frozenset((13, 31, 43, 45))
_PROC_VERSION = re.compile(r"^NVRM version:\s*(.*?)\s+(\d+(?:\.\d+)+)\s")
_TOPO_AFFINITY_COLUMNS = {"CPU Affinity": "cpu_affinity", "NUMA Affinity": "numa_affinity", "GPU NUMA ID": "gpu_numa_id"}
# nvidia-smi 580 does not put the compute capability in -q -x; read it if a later schema adds it.
_XML_COMPUTE_CAP_TAGS = ("compute_cap", "cuda_compute_capability")


def _pcie_link(gpu: ET.Element) -> dict[str, int | None] | None:
    """A GPU's PCIe link from -q -x: {max_gen, max_width, current_gen, current_width}, None when nothing is reported.

    max_* is what the link between this GPU and its host can train to (nvidia-smi's "Max", the lower of device and
    host); current_* is what it runs at now, which drops to a lower generation while the GPU idles.
    """
    link = {
        "max_gen": _int_prefix(_xml_text(gpu, "pci/pci_gpu_link_info/pcie_gen/max_link_gen")),
        "max_width": _int_prefix(_xml_text(gpu, "pci/pci_gpu_link_info/link_widths/max_link_width")),
        "current_gen": _int_prefix(_xml_text(gpu, "pci/pci_gpu_link_info/pcie_gen/current_link_gen")),
        "current_width": _int_prefix(_xml_text(gpu, "pci/pci_gpu_link_info/link_widths/current_link_width")),
    }
    return link if any(value is not None for value in link.values()) else None


def summarize_pcie(gpus: list[dict[str, Any]]) -> dict[str, int] | None:
    """Node-level PCIe link, {gen, width}: the lowest maximum generation and width over the GPUs (the slowest GPU paces
    a collective), or None when a GPU does not report both. The maximum, not the current link: an idle GPU's link
    runs at a lower generation until traffic starts, and a link trained below its maximum should show as slow."""
    links = [gpu.get("pcie") or {} for gpu in gpus]
    if not links or any(link.get("max_gen") is None or link.get("max_width") is None for link in links):
        return None
    return {"gen": min(link["max_gen"] for link in links), "width": min(link["max_width"] for link in links)}


def parse_smi_xml(xml_text: str) -> dict[str, Any]:
    """Parse `nvidia-smi -q -x`.

    Returns {driver_version, cuda_version, gpu_count, gpus: [{index, minor_number (its /dev/nvidiaN), name, uuid, pci_bus_id, memory_total_mib,
    compute_capability, ecc_mode, mig_mode, persistence_mode, pcie, health}]}. index is the GPU's position in the document, which
    is nvidia-smi's own index order (not minor_number, which can differ). pcie: see _pcie_link; health: see
    _gpu_health.parse_health. Raises ValueError on text that is not XML.
    """
    try:
        root = ET.fromstring(xml_text)
    except ET.ParseError as exc:
        raise ValueError("nvidia-smi -q -x output is not XML: %s" % exc) from exc
    gpus: list[dict[str, Any]] = []
    for position, gpu in enumerate(root.findall("gpu")):
        compute_cap = None
        for tag in _XML_COMPUTE_CAP_TAGS:
            compute_cap = compute_cap or _xml_text(gpu, tag)
        gpus.append({
            "index": position,
            "minor_number": _int_prefix(_xml_text(gpu, "minor_number")),
            "name": _xml_text(gpu, "product_name"),
            "uuid": _xml_text(gpu, "uuid"),
            "pci_bus_id": _xml_text(gpu, "pci/pci_bus_id") or _value(gpu.get("id")),
            "memory_total_mib": _int_prefix(_xml_text(gpu, "fb_memory_usage/total")),
            "compute_capability": compute_cap,
            "ecc_mode": _xml_text(gpu, "ecc_mode/current_ecc"),
            "mig_mode": _xml_text(gpu, "mig_mode/current_mig"),
            "persistence_mode": _xml_text(gpu, "persistence_mode"),
            "pcie": _pcie_link(gpu),
            "health": parse_health(gpu),
        })
    return {
        "driver_version": _xml_text(root, "driver_version"),
        "cuda_version": _xml_text(root, "cuda_version"),
        "gpu_count": len(gpus),
        "gpus": gpus,
    }


def parse_query_csv(text: str | None) -> list[dict[str, str | None]]:
    """Parse `nvidia-smi --query-gpu=<fields> --format=csv` (with its header line).

    Returns one dict per GPU keyed by field name with the unit suffix dropped ("memory.total [MiB]" -> "memory.total");
    values are stripped strings, None for "[N/A]". Lines that do not have one value per header field are skipped;
    text the csv module cannot read at all gives [].
    """
    try:
        rows = [row for row in csv.reader((text or "").splitlines(), skipinitialspace=True) if row]
    except csv.Error:
        return []
    if not rows:
        return []
    header = [re.sub(r"\s*\[[^\]]*\]$", "", name.strip()) for name in rows[0]]
    return [dict(zip(header, (_value(cell) for cell in row))) for row in rows[1:] if len(row) == len(header)]


def parse_topo(text: str | None) -> dict[str, Any]:
    """Parse `nvidia-smi topo -m` (ANSI escapes are stripped).

    Returns {matrix: {"GPU0": {"GPU1": "NV18", "NIC0": "PIX"}, "NIC0": {...}}, gpus: [{name, index, cpu_affinity,
    numa_affinity, gpu_numa_id}], nics: [{name, device}]}. The matrix leaves out each device's "X" (self) cell.
    NIC columns are named NIC<n> by current drivers, with a "NIC Legend" giving the device (mlx5_0); older drivers
    name the column after the device itself, then name and device are the same.
    """
    header: list[str] | None = None
    matrix: dict[str, dict[str, str]] = {}
    gpus: list[dict[str, Any]] = []
    legend: dict[str, str] = {}
    for line in _ANSI.sub("", text or "").splitlines():
        legend_match = _TOPO_NIC_LEGEND.match(line.strip())
        if legend_match:
            legend[legend_match.group(1)] = legend_match.group(2)
            continue
        # Tab separated as printed, runs of spaces when pasted; empty cells are dropped because rows carry
        # an extra tab before "GPU NUMA ID" that the header does not have.
        cells = [cell.strip() for cell in _TOPO_SPLIT.split(line) if cell.strip()]
        if not cells:
            continue
        if header is None:
            # The header row is the only one without a row label, so it starts with whitespace.
            if line[:1].isspace() and _TOPO_GPU.match(cells[0]):
                header = cells
            continue
        if cells[0] not in header:
            continue
        row = dict(zip(header, cells[1:]))
        matrix[cells[0]] = {peer: row[peer] for peer in header
                            if peer in row and peer != cells[0] and peer not in _TOPO_AFFINITY_COLUMNS}
        gpu_match = _TOPO_GPU.match(cells[0])
        if gpu_match:
            entry: dict[str, Any] = {"name": cells[0], "index": int(gpu_match.group(1))}
            for column, key in _TOPO_AFFINITY_COLUMNS.items():
                entry[key] = _value(row.get(column))
            gpus.append(entry)
    nics = [{"name": name, "device": legend.get(name, name)} for name in (header or [])
            if name not in _TOPO_AFFINITY_COLUMNS and not _TOPO_GPU.match(name)]
    return {"matrix": matrix, "gpus": gpus, "nics": nics}


def parse_nvlink_status(text: str | None) -> list[dict[str, Any]]:
    """Parse `nvidia-smi nvlink -s`.

    Returns a list, one entry per "GPU n: name (UUID: ...)" block: {index, name, uuid, links_active, links_inactive,
    link_speed_gbps, bandwidth_gbps}. link_speed_gbps is the slowest active link (GB/s per direction, as printed),
    bandwidth_gbps the sum over active links. links_inactive counts "<inactive>" links; it is None when the driver
    only says all links are inactive without listing them. Empty output (no NVLink) gives [].
    """
    gpus: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    for raw in (text or "").splitlines():
        line = raw.strip()
        gpu_match = _NVLINK_GPU.match(line)
        if gpu_match:
            current = {"index": int(gpu_match.group(1)), "name": gpu_match.group(2), "uuid": gpu_match.group(3),
                       "speeds": [], "links_inactive": 0}
            gpus.append(current)
            continue
        if current is None:
            continue
        link_match = _NVLINK_LINK.match(line)
        if link_match:
            speed = _NUMBER.search(link_match.group(2)) if "inactive" not in link_match.group(2).lower() else None
            if speed and float(speed.group(0)) > 0:
                current["speeds"].append(float(speed.group(0)))
            else:
                current["links_inactive"] += 1
        elif "all links are inactive" in line.lower():
            current["links_inactive"] = None
    result = []
    for gpu in gpus:
        speeds = gpu.pop("speeds")
        gpu.update({
            "links_active": len(speeds),
            "link_speed_gbps": min(speeds) if speeds else None,
            "bandwidth_gbps": round(float(sum(speeds)), 3),
        })
        result.append(gpu)
    return result


def parse_nvlink_errors(text: str | None) -> dict[int, dict[str, Any]]:
    """Parse `nvidia-smi nvlink -e`: {index: {uuid, replay, recovery, crc (each summed over the GPU's links), links (the
    links with any error, sorted)}}. The counters count since the driver loaded. Empty output gives {}."""
    gpus: dict[int, dict[str, Any]] = {}
    current: dict[str, Any] | None = None
    for raw in (text or "").splitlines():
        line = raw.strip()
        gpu_match = _NVLINK_ERRORS_GPU.match(line)
        if gpu_match:
            current = gpus[int(gpu_match.group(1))] = {"uuid": gpu_match.group(2), "replay": 0, "recovery": 0, "crc": 0, "links": []}
            continue
        error = _NVLINK_ERROR.match(line)
        if current is not None and error:
            count = int(error.group(3))
            current[error.group(2).lower()] += count
            if count and int(error.group(1)) not in current["links"]:
                current["links"] = sorted(current["links"] + [int(error.group(1))])
    return gpus


def summarize_nvlink(per_gpu: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Node-level NVLink summary from parse_nvlink_status() entries, or None when no GPU reports any NVLink.

    The weakest GPU sets each figure: {links_per_gpu (min active links), link_speed_gbps (min active link speed),
    bandwidth_gbps_per_gpu (min per-GPU sum)}, because a collective runs at the pace of its slowest member.
    """
    if not any(gpu["links_active"] or gpu["links_inactive"] != 0 for gpu in per_gpu):
        return None
    speeds = [gpu["link_speed_gbps"] for gpu in per_gpu if gpu["link_speed_gbps"] is not None]
    return {
        "links_per_gpu": min(gpu["links_active"] for gpu in per_gpu),
        "link_speed_gbps": min(speeds) if speeds else None,
        "bandwidth_gbps_per_gpu": min(gpu["bandwidth_gbps"] for gpu in per_gpu),
    }


def parse_proc_driver_version(text: str | None) -> dict[str, str] | None:
    """Parse /proc/driver/nvidia/version into {version, type, description}, or None if it has no NVRM line.

    type is "open" for the open GPU kernel modules ("Open Kernel Module"), "proprietary" for the closed ones.
    """
    for line in (text or "").splitlines():
        match = _PROC_VERSION.match(line.strip() + " ")
        if match:
            description = match.group(1)
            return {
                "version": match.group(2),
                "type": "open" if "open kernel module" in description.lower() else "proprietary",
                "description": description,
            }
    return None


def _pci_key(address: str | None) -> str | None:
    """Domain:bus:device in lower case with a 4-digit domain, so Xid's "0000:3b:00" matches "00000000:3B:00.0"."""
    parts = (address or "").lower().split(":")
    if len(parts) != 3:
        return None
    return "%s:%s:%s" % (parts[0][-4:].rjust(4, "0"), parts[1], parts[2].split(".")[0])


def parse_xid(dmesg_text: str | None) -> list[dict[str, Any]]:
    """Xid events from kernel log text (dmesg or journalctl -k; any line prefix is fine).

    Returns [{pci, xid (int), message}] in log order; message is everything after the Xid number.
    """
    events = []
    for line in (dmesg_text or "").splitlines():
        match = _XID.search(line.rstrip())
        if match:
            events.append({"pci": match.group(1), "xid": int(match.group(2)), "message": (match.group(3) or "").strip()})
    return events


def _merge_query(gpus: list[dict[str, Any]], rows: list[dict[str, str | None]]) -> None:
    by_uuid = {row.get("uuid"): row for row in rows if row.get("uuid")}
    for gpu in gpus:
        row = by_uuid.get(gpu["uuid"])
        if row is None:
            continue
        index = row.get("index")
        if index is not None and index.isdigit():
            gpu["index"] = int(index)
        gpu["compute_capability"] = gpu["compute_capability"] or row.get("compute_cap")
        gpu["memory_total_mib"] = gpu["memory_total_mib"] or _int_prefix(row.get("memory.total"))


def empty_facts(reason: str, kernel_module: dict[str, str] | None = None) -> dict[str, Any]:
    """Facts for a node where the GPUs cannot be enumerated; reason says why."""
    return {
        "available": False,
        "reason": reason,
        "driver_version": kernel_module["version"] if kernel_module else None,
        "cuda_version": None,
        "gpu_count": 0,
        "gpu_models": [],
        "gpus": [],
        "nvlink": None,
        "pcie": None,
        "topology": None,
        "kernel_module": kernel_module,
        "xid_errors": None,
        "xid_reason": None,
        "errors": [],
    }


def gather(smi_xml: str | None = None, query_csv: str | None = None, topo: str | None = None, nvlink: str | None = None,
           proc_version: str | None = None, kernel_log: str | None = None, smi_reason: str | None = None,
           kernel_log_reason: str | None = None, errors: list[str] | None = None,
           nvlink_errors: str | None = None) -> dict[str, Any]:
    """Combine raw tool output into the trainops_gpu facts. Never raises.

    Each text is None when its tool or file was missing or failed. smi_reason says why smi_xml is None (default:
    nvidia-smi not found); kernel_log_reason why kernel_log is None. errors lists failures of the secondary commands
    (query, topo, nvlink) and is passed through, so a missing NVLink summary can be told apart from a failed command.
    nvlink_errors is `nvidia-smi nvlink -e`, whose counters go into each GPU's nvlink entry (errors).
    """
    kernel_module = parse_proc_driver_version(proc_version)
    if smi_xml is None:
        reason = smi_reason or "nvidia-smi not found"
        if proc_version is None:
            reason += "; /proc/driver/nvidia/version absent (no NVIDIA kernel module loaded)"
        elif kernel_module is not None:
            reason += "; NVIDIA kernel module %s is loaded" % kernel_module["version"]
        facts = empty_facts(reason, kernel_module)
    else:
        facts = _facts_from_smi(smi_xml, query_csv, topo, nvlink, kernel_module, nvlink_errors)
    facts["errors"] = list(errors or [])
    if kernel_log is None:
        facts["xid_errors"] = None
        facts["xid_reason"] = kernel_log_reason or "kernel log not read"
    else:
        facts["xid_errors"] = _xid_with_gpu(parse_xid(kernel_log), facts["gpus"])
        facts["xid_reason"] = None
    return facts


def _facts_from_smi(smi_xml: str, query_csv: str | None, topo: str | None, nvlink: str | None,
                    kernel_module: dict[str, str] | None, nvlink_errors: str | None = None) -> dict[str, Any]:
    try:
        smi = parse_smi_xml(smi_xml)
    except ValueError as exc:
        return empty_facts(str(exc), kernel_module)
    if not smi["gpus"]:
        facts = empty_facts("nvidia-smi -q -x lists no GPUs", kernel_module)
        facts.update(driver_version=smi["driver_version"] or facts["driver_version"], cuda_version=smi["cuda_version"])
        return facts
    gpus = smi["gpus"]
    _merge_query(gpus, parse_query_csv(query_csv))
    links = parse_nvlink_status(nvlink)
    links_by_uuid = {entry["uuid"]: entry for entry in links}
    counted = parse_nvlink_errors(nvlink_errors)
    for gpu in gpus:
        entry = links_by_uuid.get(gpu["uuid"])
        gpu["nvlink"] = None if entry is None else {key: entry[key] for key in (
            "links_active", "links_inactive", "link_speed_gbps", "bandwidth_gbps")}
        errors = counted.get(gpu["index"])
        if gpu["nvlink"] is not None:
            # Matched by UUID where nvidia-smi printed it, else by index; None where the counters were not read.
            same = errors is not None and errors["uuid"] in (None, gpu["uuid"])
            gpu["nvlink"]["errors"] = {key: errors[key] for key in ("replay", "recovery", "crc", "links")} if same and errors else None
    gpus.sort(key=lambda gpu: gpu["index"])
    models: list[str] = []
    for gpu in gpus:
        if gpu["name"] and gpu["name"] not in models:
            models.append(gpu["name"])
    return {
        "available": True,
        "reason": None,
        "driver_version": smi["driver_version"] or (kernel_module["version"] if kernel_module else None),
        "cuda_version": smi["cuda_version"],
        "gpu_count": len(gpus),
        "gpu_models": models,
        "gpus": gpus,
        "nvlink": summarize_nvlink(links),
        "pcie": summarize_pcie(gpus),
        "topology": parse_topo(topo) if topo is not None else None,
        "kernel_module": kernel_module,
    }


def _xid_with_gpu(events: list[dict[str, Any]], gpus: list[dict[str, Any]]) -> list[dict[str, Any]]:
    index_by_pci = {_pci_key(gpu["pci_bus_id"]): gpu["index"] for gpu in gpus if gpu.get("pci_bus_id")}
    for event in events:
        event["gpu_index"] = index_by_pci.get(_pci_key(event["pci"]))
    return events
