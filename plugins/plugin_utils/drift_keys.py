# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""One node's facts as the flat, display-ready values that the cross-node drift report compares.

Input shapes: trainops_gpu (gpu_facts), trainops_comm (comm_facts) and trainops_image (image_facts); any may be
missing (None) when the module could not run on the node, which shows as missing values instead of hiding the node.
"""

from __future__ import annotations

from typing import Any


def _nccl(comm: dict[str, Any], source: str) -> str | None:
    versions = sorted({s["version"] or "unknown" for s in (comm.get("nccl") or {}).get("sources", []) if s["source"] == source})
    return ", ".join(versions) or None


def _gpus(gpu: dict[str, Any]) -> str:
    if not gpu.get("available"):
        return "0"
    models = ", ".join(gpu.get("gpu_models") or []) or "unknown model"
    return "%sx %s" % (gpu.get("gpu_count"), models)


def _nvlink(gpu: dict[str, Any]) -> str | None:
    nvlink = gpu.get("nvlink")
    if not nvlink:
        return None
    return "%s x %s GB/s" % (nvlink.get("links_per_gpu"), nvlink.get("link_speed_gbps"))


def _ib(comm: dict[str, Any]) -> list[str]:
    ports = comm.get("infiniband") or []
    return ["%s:%s %s %sG" % (p["device"], p["port"], p.get("state"), p.get("rate_gbps")) for p in ports]


def image_values(image: dict[str, Any]) -> dict[str, Any]:
    """The training environment inside the image (image_facts), under keys that start with "image ". A package
    appears where it is installed (a node without it shows it missing); LLaMA-Factory's unmet requirements where it is."""
    torch = image.get("torch") or {}
    values: dict[str, Any] = {
        "image python": image.get("python"),
        "image torch": torch.get("version"),
        "image torch cuda": torch.get("cuda"),
        "image nccl": torch.get("nccl"),
    }
    values.update(("image " + name, version) for name, version in sorted((image.get("packages") or {}).items()) if version)
    unmet = image.get("llamafactory_unmet")
    if unmet is not None:
        values["image llamafactory unmet"] = ["%s (installed %s)" % (u["requirement"], u["installed"] or "none") for u in unmet]
    return values


def values_for(gpu: dict[str, Any] | None, comm: dict[str, Any] | None, extra: dict[str, Any] | None = None,
               image: dict[str, Any] | None = None) -> dict[str, Any]:
    """Display key -> value for one node, in report order; `extra` (e.g. the image digest) and the values inside
    the image (`image`, image_facts) are appended."""
    gpu = gpu or {}
    comm = comm or {}
    torch = comm.get("torch") or {}
    mpi = comm.get("mpi")
    shm = comm.get("shm") or {}
    port_range = comm.get("ip_local_port_range")
    values: dict[str, Any] = {
        "driver": gpu.get("driver_version"),
        "cuda (driver)": gpu.get("cuda_version"),
        "gpus": _gpus(gpu) if gpu else None,
        "nvlink": _nvlink(gpu),
        "nccl (system)": _nccl(comm, "system"),
        "nccl (pip)": _nccl(comm, "pip"),
        "nccl (torch)": torch.get("nccl"),
        "torch": torch.get("version"),
        "torch cuda": torch.get("cuda"),
        "cuda toolkit": (comm.get("cuda_toolkit") or {}).get("nvcc_version"),
        "python": (comm.get("python") or {}).get("version"),
        "mpi": "%s %s" % (mpi["implementation"], mpi["version"]) if mpi else None,
        "nccl-tests": "present" if (comm.get("nccl_tests") or {}).get("present") else None,
        "net plugins": sorted(p.rsplit("/", 1)[-1] for p in comm.get("net_plugins") or []),
        "ib ports": _ib(comm),
        "nccl ifname": comm.get("nccl_socket_ifname"),
        "/dev/shm": shm.get("human"),
        "memlock": (comm.get("memlock") or {}).get("soft"),
        "port range": "%s-%s" % tuple(port_range) if port_range else None,
        "kernel": comm.get("kernel"),
        "os": comm.get("os"),
    }
    values.update(extra or {})
    if image is not None:
        values.update(image_values(image))
    return values
