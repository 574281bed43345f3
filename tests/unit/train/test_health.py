# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A node's GPU faults in an attempt (trainops_job.health) on the kernel log variants of tests/fixtures/gpu (the driver's
Xid formats), and a restart that leaves out the node they came from. The ECC query text is nvidia-smi's CSV form
(--format=csv) written by hand: no recorded GPU machine had an uncorrected error to show."""

from __future__ import annotations

import getpass
import json
from pathlib import Path

from ansible_collections.trainops.cluster.plugins.module_utils import gpu
from ansible_collections.trainops.cluster.plugins.plugin_utils import doctor
from trainops_job import health, records, supervisor

KERNEL_LOG = Path(__file__).resolve().parents[2] / "fixtures" / "gpu" / "variants" / "kernel-log" / "dmesg-xid.txt"
ECC = "index, ecc.errors.uncorrected.volatile.total\n0, 0\n1, %d\n2, [N/A]\n"


def snapshot(lines: int | None, ecc: int) -> dict:
    text = "\n".join(KERNEL_LOG.read_text().splitlines()[:lines])
    return {"xids": health.gpu.parse_xid(text), "ecc": health.ecc_counts(ECC % ecc)}


def test_only_new_xids_that_take_a_gpu_out_of_service_are_faults():
    # Before: up to the Xid 13 pair (the program's own fault); after: the Xid 31, 48 and 79 that followed.
    found = health.faults(snapshot(7, 0), snapshot(None, 0))
    assert [fault.split(" (")[0] for fault in found] == ["Xid 48 on PCI:0000:00:07", "Xid 79 on PCI:0000:00:07"]
    assert found[1].endswith("(pid='<unknown>', name=<unknown>, GPU has fallen off the bus.)")
    assert health.faults(snapshot(None, 0), snapshot(None, 0)) == []


def test_a_kernel_log_that_went_round_counts_every_xid_as_new():
    before = {"xids": [{"pci": "0000:00:09", "xid": 79, "message": "gone since"}], "ecc": {}}
    assert len(health.faults(before, snapshot(None, 0))) == 2


def test_new_uncorrected_ecc_errors_are_faults_and_gpus_without_ecc_are_left_alone():
    assert health.ecc_counts(ECC % 4) == {"0": 0, "1": 4}
    assert health.faults(snapshot(0, 1), snapshot(0, 4)) == ["GPU 1: 3 new uncorrected ECC errors"]
    assert health.faults(None, snapshot(0, 4)) == [] and health.faults(snapshot(0, 4), None) == []


class Answering(supervisor.Supervisor):
    def probe(self, nodes):
        return {node: None for node in nodes}


def test_a_restart_leaves_out_the_node_whose_gpu_failed(tmp_path):
    nodes = ["node1", "node2", "node3"]
    conf = {"job": "ddp1", "node": "node1", "nodes": nodes, "run_id": "run-1", "job_dir": str(tmp_path), "user": getpass.getuser(),
            "on_stall": "report", "max_auto_restarts": 2, "restarts_without_progress": 3, "min_nodes": 2}
    (tmp_path / "job.json").write_text(json.dumps({"name": "ddp1", "run_id": "run-1"}))
    for node in nodes:
        faults = ["Xid 79 on PCI:0000:00:07 (GPU has fallen off the bus.)"] if node == "node3" else []
        record = {"node": node, "run_id": "run-1", "rc": 1, "attempt": 0, "final": False, "stopped_by": None, "gpu_faults": faults}
        (tmp_path / ("%s.exit" % node)).write_text(json.dumps(record))
    Answering(records.Job(conf), clock=lambda: 1000.0).restart("node3 failed first (train_on_failure: restart)")
    events = json.loads((tmp_path / "job.json").read_text())["events"]
    assert (events[0]["event"], events[0]["node"]) == ("left out", "node3")
    assert events[0]["why"] == "a GPU fault in the last attempt: Xid 79 on PCI:0000:00:07 (GPU has fallen off the bus.)"
    assert events[1]["event"] == "restart" and events[1]["nodes"] == ["node1", "node2"]


def test_the_doctor_fails_a_node_for_an_xid_exactly_where_a_restart_leaves_it_out():
    """One Xid table (module_utils/gpu.py) for both: the doctor's finding and the job runner's GPU faults agree."""
    for xid in sorted(gpu.OUT_OF_SERVICE_XIDS | gpu.APPLICATION_XIDS | {94, 109}):
        event = {"xid": xid, "pci": "0000:3b:00", "message": "pid=1"}
        [found] = doctor.gpus("node1", {"gpu_count": 8, "xid_errors": [event]}, 8)
        left_out = health.faults({"xids": [], "ecc": {}}, {"xids": [event], "ecc": {}})
        assert (found["status"] == "fail") == bool(left_out) == (xid in gpu.OUT_OF_SERVICE_XIDS), (xid, found, left_out)
        assert found["status"] == "warn" or "leaves this node out" in found["fix"]
    assert "Look up Xid 94" in doctor.gpus("node1", {"gpu_count": 8, "xid_errors": [{"xid": 94, "pci": "0000:3b:00"}]}, 8)[0]["fix"]
