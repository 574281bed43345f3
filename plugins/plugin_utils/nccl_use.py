# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The network a running job's NCCL chose, judged against what each node has: what its ranks' NCCL said (their
NCCL_DEBUG=INFO lines, summed up by the node's runner: trainops_job/tee.nccl_summary) and the node's active RDMA ports
(trainops_job/perf.rdma_ports, in its report). NET/Socket between nodes while InfiniBand or RoCE is up is the slow path the field
guides name first; the ladder judges nccl-tests' runs the same way (nccl_tests/rung_verdict)."""

from __future__ import annotations


def _interfaces(nccl: dict) -> list:
    """["eth0", "eth1"] from NCCL's "eth0:10.0.0.1<0>"."""
    names = []
    for item in nccl.get("socket_interfaces") or []:
        name = item.split(":", 1)[0]
        if name not in names:
            names.append(name)
    return names


def over_sockets(nccl: dict) -> bool:
    """Whether the ranks' NCCL carried data between nodes over NET/Socket: its connection lines say so, or, where they
    were not logged, its only network was Socket in a communicator of several nodes."""
    transports = nccl.get("transports") or []
    if "NET/Socket" in transports:
        return True
    return not any(t.startswith("NET/") for t in transports) and nccl.get("networks") == ["Socket"] and (nccl.get("nnodes") or 0) > 1


def _port(port: dict) -> str:
    rate = " %g Gb/s" % port["rate_gbps"] if port.get("rate_gbps") else ""
    return "%s:%s %s%s" % (port["device"], port["port"], port.get("link_layer") or "", rate)


def socket_despite_rdma(node: str, nccl: dict | None, ports: list) -> str | None:
    """The finding where `node`'s ranks sent over sockets while the node had active RDMA ports, else None."""
    if not nccl or not ports or not over_sockets(nccl):
        return None
    via = _interfaces(nccl)
    why = ("NCCL said 'NET/IB : No device found': its process sees no RDMA device (pass /dev/infiniband into the image, and "
           "install rdma-core with libibverbs in it)" if nccl.get("ib_no_device") else
           "check NCCL_IB_DISABLE, NCCL_IB_HCA and NCCL_NET in the job's environment, and the net plugin it loads")
    return ("%s: the job's NCCL sends between nodes over NET/Socket%s although the node has active RDMA ports (%s): every "
            "byte goes through TCP, the slow path; %s" % (node, " (%s)" % ", ".join(via) if via else "",
                                                          ", ".join(_port(p) for p in ports), why))


def said(nccl: dict | None) -> str | None:
    """What a node's NCCL used, in a few words: "NET/IB (mlx5_0:1/IB)", "NET/Socket (eth1)", "P2P/CUMEM"."""
    if not nccl:
        return None
    transports = nccl.get("transports") or []
    words = []
    for name in transports:
        detail = ", ".join(nccl.get("ib_devices") or []) if name == "NET/IB" else ", ".join(_interfaces(nccl)) if name == "NET/Socket" else ""
        words.append("%s (%s)" % (name, detail) if detail else name)
    if not words and nccl.get("networks"):
        words = ["network %s" % "/".join(nccl["networks"])]
    return ", ".join(words) or None


def findings(reports: dict) -> list:
    """Each node whose ranks' NCCL went over sockets despite its RDMA ports (socket_despite_rdma), from the nodes'
    reports ({node: report}: progress.nccl, rdma_ports)."""
    found = []
    for node, report in reports.items():
        text = socket_despite_rdma(node, ((report or {}).get("progress") or {}).get("nccl"), (report or {}).get("rdma_ports") or [])
        if text:
            found.append(text)
    return found
