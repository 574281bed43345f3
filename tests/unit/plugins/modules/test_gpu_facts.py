# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""gpu_facts end to end: real commands against fake nvidia-smi, dmesg and journalctl scripts."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from ansible_collections.trainops.cluster.plugins.modules import gpu_facts
import helpers.modules
from helpers.modules import script

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "gpu"
REPLAY = FIXTURES / "variants" / "nvidia-smi-replay"
KERNEL_LOG = FIXTURES / "variants" / "kernel-log"


@pytest.fixture
def fakebin(tmp_path, monkeypatch):
    """A directory ahead of PATH with a dmesg that prints a clean log and a journalctl that is never needed."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script(bindir / "dmesg", "echo '[    4.9] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.159.04'")
    script(bindir / "journalctl", "echo 'journalctl should not run' >&2; exit 1")
    monkeypatch.setenv("PATH", "%s:%s" % (bindir, os.environ.get("PATH", "/usr/bin:/bin")))
    monkeypatch.delenv("NVIDIA_SMI_REPLAY_DIR", raising=False)
    monkeypatch.setattr(gpu_facts, "PROC_DRIVER_VERSION", str(FIXTURES / "h200x2" / "proc-driver-version.txt"))
    return bindir


def run_module(capsys, **args):
    return helpers.modules.run_module(gpu_facts, capsys, **args)


def test_replayed_real_node(fakebin, capsys):
    result = run_module(capsys, nvidia_smi=str(REPLAY))
    assert result["changed"] is False
    facts = result["ansible_facts"]["trainops_gpu"]
    assert facts["available"] is True and facts["reason"] is None
    assert (facts["driver_version"], facts["cuda_version"], facts["gpu_count"]) == ("580.159.04", "13.0", 2)
    assert facts["gpu_models"] == ["NVIDIA H200"]
    assert [g["compute_capability"] for g in facts["gpus"]] == ["9.0", "9.0"]
    assert facts["nvlink"]["links_per_gpu"] == 18
    assert facts["nvlink"]["link_speed_gbps"] == 26.562
    assert round(facts["nvlink"]["bandwidth_gbps_per_gpu"], 1) == 478.1
    assert facts["topology"]["matrix"]["GPU0"]["GPU1"] == "NV18"
    assert facts["kernel_module"]["version"] == "580.159.04"
    assert facts["xid_errors"] == [] and facts["xid_reason"] is None
    assert facts["errors"] == []


def test_replayed_h100x8_in_check_mode(fakebin, capsys, monkeypatch):
    monkeypatch.setenv("NVIDIA_SMI_REPLAY_DIR", str(FIXTURES / "variants" / "h100x8"))
    result = run_module(capsys, nvidia_smi=str(REPLAY), _ansible_check_mode=True)
    facts = result["ansible_facts"]["trainops_gpu"]
    assert result["changed"] is False
    assert facts["gpu_count"] == 8
    assert [nic["device"] for nic in facts["topology"]["nics"]] == ["mlx5_%d" % i for i in range(8)]


def test_missing_nvidia_smi_path(fakebin, capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(gpu_facts, "PROC_DRIVER_VERSION", str(tmp_path / "absent"))
    facts = run_module(capsys, nvidia_smi=str(tmp_path / "nvidia-smi"))["ansible_facts"]["trainops_gpu"]
    assert facts["available"] is False
    assert facts["gpu_count"] == 0
    assert facts["reason"] == ("nvidia-smi not found at %s (missing or not executable); "
                               "/proc/driver/nvidia/version absent (no NVIDIA kernel module loaded)" % (tmp_path / "nvidia-smi"))


def test_nvidia_smi_not_on_path(fakebin, capsys, monkeypatch):
    monkeypatch.setattr(gpu_facts.AnsibleModule, "get_bin_path", lambda self, name, *a, **kw: None)
    facts = run_module(capsys)["ansible_facts"]["trainops_gpu"]
    assert facts["available"] is False and facts["gpu_count"] == 0
    assert facts["reason"] == "nvidia-smi not found on PATH; NVIDIA kernel module 580.159.04 is loaded"
    assert facts["driver_version"] == "580.159.04"
    assert facts["xid_errors"] is None
    assert facts["xid_reason"] == "dmesg not found; journalctl not found"


def test_driver_not_loaded(fakebin, capsys, monkeypatch):
    monkeypatch.setenv("NVIDIA_SMI_REPLAY_DIR", str(FIXTURES / "variants" / "no-driver"))
    facts = run_module(capsys, nvidia_smi=str(REPLAY))["ansible_facts"]["trainops_gpu"]
    assert facts["available"] is False and facts["gpu_count"] == 0
    assert facts["reason"].startswith("nvidia-smi -q -x failed (rc 9): NVIDIA-SMI has failed because it couldn't "
                                      "communicate with the NVIDIA driver.")


def process_alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def ends_within(pid, seconds):
    """Whether pid is gone (or a zombie) within seconds: a killed process closes its files, which ends the module's
    read, a moment before the kernel marks it dead, and on a loaded machine that moment is observable."""
    deadline = time.monotonic() + seconds
    while process_alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_hanging_nvidia_smi_times_out_quickly(fakebin, capsys, tmp_path):
    # The sleep is a grandchild: killing only the shell would leave it running and holding the output pipe.
    pidfile = tmp_path / "sleep.pid"
    hang = script(tmp_path / "nvidia-smi", "sleep 60 &\necho $! > '%s'\nwait" % pidfile)
    started = time.monotonic()
    result = run_module(capsys, nvidia_smi=hang, timeout=1)
    elapsed = time.monotonic() - started
    facts = result["ansible_facts"]["trainops_gpu"]
    assert elapsed < 10
    assert facts["available"] is False and facts["gpu_count"] == 0
    assert facts["reason"].startswith("nvidia-smi -q -x timed out after 1 s")
    assert ends_within(int(pidfile.read_text()), 2)


def test_hanging_topo_costs_one_timeout_and_loses_only_topo(fakebin, capsys, tmp_path, monkeypatch):
    warnings = []
    monkeypatch.setattr(gpu_facts.AnsibleModule, "warn", lambda self, msg: warnings.append(msg))
    smi = script(tmp_path / "nvidia-smi", 'if [ "$1" = topo ]; then sleep 60; fi\nexec "%s" "$@"' % REPLAY)
    started = time.monotonic()
    result = run_module(capsys, nvidia_smi=smi, timeout=1)
    assert time.monotonic() - started < 5
    facts = result["ansible_facts"]["trainops_gpu"]
    assert facts["available"] is True and facts["gpu_count"] == 2
    assert [g["compute_capability"] for g in facts["gpus"]] == ["9.0", "9.0"]
    assert facts["topology"] is None and facts["nvlink"] is not None
    assert facts["errors"] == ["nvidia-smi topo -m timed out after 1 s"]
    assert warnings == facts["errors"]


def test_xid_from_journalctl_when_dmesg_denied(fakebin, capsys):
    script(fakebin / "dmesg", "cat '%s' >&2; exit 1" % (KERNEL_LOG / "dmesg-denied.txt"))
    script(fakebin / "journalctl", "cat '%s'" % (KERNEL_LOG / "journalctl-xid.txt"))
    facts = run_module(capsys, nvidia_smi=str(REPLAY))["ansible_facts"]["trainops_gpu"]
    assert facts["xid_reason"] is None
    assert [(e["xid"], e["gpu_index"]) for e in facts["xid_errors"]] == [(94, 0), (119, None)]


def test_xid_from_dmesg(fakebin, capsys):
    script(fakebin / "dmesg", "cat '%s'" % (KERNEL_LOG / "dmesg-xid.txt"))
    facts = run_module(capsys, nvidia_smi=str(REPLAY))["ansible_facts"]["trainops_gpu"]
    assert [e["xid"] for e in facts["xid_errors"]] == [13, 13, 31, 48, 79]
    assert [e["gpu_index"] for e in facts["xid_errors"]] == [0, 0, 1, 1, 1]


@pytest.mark.parametrize("journal, marker", [
    ("journalctl-no-journal.txt", "No journal files were found"),
    ("journalctl-not-permitted.txt", "not seeing messages from other users and the system"),
])
def test_unreadable_kernel_log(fakebin, capsys, journal, marker):
    script(fakebin / "dmesg", "cat '%s' >&2; exit 1" % (KERNEL_LOG / "dmesg-denied.txt"))
    script(fakebin / "journalctl", "cat '%s'" % (KERNEL_LOG / journal))
    facts = run_module(capsys, nvidia_smi=str(REPLAY))["ansible_facts"]["trainops_gpu"]
    assert facts["available"] is True
    assert facts["xid_errors"] is None
    assert facts["xid_reason"] == ("dmesg failed (rc 1): dmesg: read kernel buffer failed: Operation not permitted; "
                                   "journalctl -k: %s" % marker)


def test_timeout_must_be_positive(fakebin, capsys):
    result = run_module(capsys, nvidia_smi=str(REPLAY), timeout=0)
    assert result["failed"] is True
    assert result["msg"] == "timeout must be at least 1 second, got 0"
