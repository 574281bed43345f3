"""Fixtures of the train scenario: the testbed's nodes, a master port dropped from one node, nothing left behind, and
a job's folder recorded at a verdict for tests/fixtures/train (scripts/record-train-fixtures sets TRAINOPS_RECORD; in the
suite the record fixture does nothing).

Each recorded case is a job in the state a verdict is about (a class named, a crash loop stopped, the first node lost,
...), its folder as it stands then: the nodes' records (logs cut to their last lines, no checkpoint), each node's
settings, when, and what status said where one was just made."""

import contextlib
import json
import os
import shutil
import time
from pathlib import Path

import pytest
from testbed_fixtures import (  # noqa: F401  pylint: disable=unused-import
    CLUSTER, HOSTVARS, INVENTORY, node_fixture, group_vars_fixture, playbook, pytest_configure, pytest_collection_modifyitems)

# The ladder's run: the acceptance record of the healthy cluster (the burn-in on the nodes' CPUs, 3 s) with the
# ladder, torchrun's rungs among it. Three containers of one 2-core machine whose other lane runs beside: a node's
# memory bandwidth read 1.8 GB/s, under half its peers', once while that lane was busy. A healthy node here is one above
# a fifth of its peers' median (burn_in_outlier_fraction 0.8: at most 80 % below it); a node at a fifth of a core read
# 16 % of its peers' GEMM.
# Launched through Slurm (srun): the scenario's Slurm test reads this run's reports instead of climbing the ladder
# again; the default launcher's ladder is the default scenario's converge, its torchrun rung the chosen-master and
# dropped-port tests' here.
LADDER = ["-e", "verify_acceptance=true", "-e", "burn_in_cpu=true", "-e", "burn_in_seconds=3", "-e", "burn_in_outlier_fraction=0.8",
          "-e", "verify_launcher=srun"]


@pytest.fixture(name="ladder", scope="session", autouse=True)
def ladder_fixture():
    """verify.yml once, before every test (the converge skips the ladder: molecule.yml): its reports are what the
    ladder's tests read (test_burn_in, test_torchrun), and its torchrun rung installs the training script the jobs run
    (/opt/trainops/bin/train_ddp.py). Its result is the acceptance test's to judge: a failed ladder fails that test,
    and the tests that need what it left."""
    return playbook("verify.yml", *LADDER, timeout=900)


@pytest.fixture(name="master_port_dropped")
def master_port_dropped_fixture(node):
    """A context in which node1 drops the rendezvous port from one node, in a table of the test's own (the role's
    table is not touched)."""
    @contextlib.contextmanager
    def dropped(source):
        rule = ("add table inet trainops_test; add chain inet trainops_test in { type filter hook input priority -10; }; "
                "add rule inet trainops_test in ip saddr %s tcp dport 29500 drop" % HOSTVARS[source]["cluster_ip"])
        node("node1").check_output("nft '%s'" % rule)
        try:
            yield
        finally:
            node("node1").run("nft delete table inet trainops_test")
    return dropped


@pytest.fixture(name="assert_nothing_left")
def assert_nothing_left_fixture(node):
    """Asserts that no node (of nodes: the cluster's, or those a node-loss test left on) still runs torchrun, its ranks or
    a container of theirs."""
    def check(nodes=tuple(CLUSTER)):
        for name in nodes:
            host = node(name)
            # [t]: the pattern does not match the shell that runs pgrep.
            procs = host.run("pgrep -a -f '[t]orchrun|[t]rainops_allreduce|[t]rain_ddp'").stdout.strip()
            assert (procs, host.check_output("podman ps -q")) == ("", ""), name
    return check


RECORD = os.environ.get("TRAINOPS_RECORD")
SHARED = INVENTORY.parent / ".state" / "shared"
# A log's last lines are what status and the failure's naming read; the whole log of a long job is hundreds of KiB.
LOG_LINES = 400


@pytest.fixture(name="record")
def record_fixture(node):
    """record(job, case, unreachable=(), ladder=False): writes TRAINOPS_RECORD/case/ from the job's folder and the nodes
    as they are, with the scenario's ladder (verify.json: a communication-bound verdict is held against it) where asked
    (nothing where TRAINOPS_RECORD is not set: the suite)."""
    def record(job, case, unreachable=(), ladder=False):
        if not RECORD:
            return
        out = Path(RECORD) / case
        shutil.rmtree(out, ignore_errors=True)
        (out / "job").mkdir(parents=True)
        (out / "conf").mkdir()
        for path in sorted((SHARED / "jobs" / job).iterdir()):
            if path.is_file() and path.suffix == ".log":
                (out / "job" / path.name).write_text("".join(path.read_text(errors="replace").splitlines(True)[-LOG_LINES:]))
            elif path.is_file() and ".tmp-" not in path.name:
                shutil.copy(path, out / "job" / path.name)
        for name in CLUSTER:
            if name not in unreachable:
                (out / "conf" / ("%s.json" % name)).write_text(node(name).file("/etc/trainops/jobs/%s.json" % job).content_string)
        if ladder:
            shutil.copy(INVENTORY.parent / "reports" / "verify.json", out / "verify.json")
        # What status said then, where a status was just made (its report is 100 KiB of logs and points: its verdict alone).
        report = INVENTORY.parent / "reports" / ("train-%s.json" % job)
        said = json.loads(report.read_text())["verdict"] if report.exists() and report.stat().st_mtime > time.time() - 60 else None
        (out / "meta.json").write_text(json.dumps({"case": case, "job": job, "at": time.time(), "unreachable": list(unreachable),
                                                   "recorded": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                                   "status": said}, indent=1) + "\n")
    return record
