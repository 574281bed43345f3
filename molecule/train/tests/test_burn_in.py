"""verify.yml's burn-in (role burn_in) on the CPU nodes (burn_in_cpu: their float32 GEMM and memory copy): every node
measured and compared with its peers; node3 at a fifth of a core (podman update --cpus 0.2) named, the run failed."""

import json
import subprocess

from testbed_fixtures import CLUSTER, INVENTORY, container, playbook

REPORT = INVENTORY.parent / "reports" / "burn-in.json"


def burn(*args):
    run = playbook("verify.yml", "--tags", "burn_in", "-e", "burn_in_cpu=true", "-e", "burn_in_seconds=5", *args)
    return run, json.loads(REPORT.read_text())


def test_the_burn_in_measures_every_node_and_names_the_slow_one():
    # The three nodes share this machine's two cores: their figures differ by the moment's load (memory copies 21 and 43
    # GB/s in one run), so the healthy run allows half (the default is a tenth); node3 at a fifth of a core read 16 %.
    run, report = burn("-e", "burn_in_outlier_fraction=0.5")
    assert run.returncode == 0 and report["passed"] is True, run.stdout[-3000:]
    assert [row["node"] for row in report["rows"]] == CLUSTER and all(row["gemm"] > 0 and row["memory"] > 0 for row in report["rows"])
    assert len({row["sha256"] for row in report["rows"]}) == 1, report["rows"]
    subprocess.run(["podman", "update", "--cpus", "0.2", container("node3")], check=True, capture_output=True)
    try:
        run, report = burn()
    finally:
        subprocess.run(["podman", "update", "--cpus", "2", container("node3")], check=True, capture_output=True)
    print(report["text"])
    assert run.returncode != 0 and report["passed"] is False, run.stdout[-3000:]
    assert {f["node"] for f in report["findings"]} == {"node3"}, report["text"]
    assert "GEMM below its peers'" in [f["what"] for f in report["findings"]], report["text"]
    assert "node3: " in run.stdout and "GEMM below its peers'" in run.stdout


def test_the_acceptance_record_holds_every_check_of_every_node():
    """verify.yml -e verify_acceptance=true: the burn-in, the ladder and GPU health (none here) gathered per node into
    acceptance.json and onto the report page."""
    run = playbook("verify.yml", "-e", "verify_acceptance=true", "-e", "burn_in_cpu=true", "-e", "burn_in_seconds=3",
                   "-e", "burn_in_outlier_fraction=0.5", timeout=900)
    assert run.returncode == 0, run.stdout[-3000:]
    record = json.loads((INVENTORY.parent / "reports" / "acceptance.json").read_text())
    assert record["passed"] is True and sorted(record["nodes"]) == CLUSTER, record
    for name in CLUSTER:
        checks = [c["check"] for c in record["nodes"][name]["checks"]]
        assert checks[:3] == ["burn-in: GEMM TFLOP/s", "burn-in: memory GB/s", "burn-in: result"], checks
        assert any(c.startswith("ladder: CPU all-reduce over MPI, all nodes") for c in checks), checks
    assert "acceptance " in run.stdout and '<h2 id="acceptance">' in (INVENTORY.parent / "reports" / "index.html").read_text()
    # node3 at a fifth of a core: the burn-in leaves its failure to the ladder's end, the record names node3 and the
    # run fails after writing it. Held to the default fraction, as the test above: under CI's other scenario the two
    # healthy nodes slowed too, and node3 once stayed above half of their figures.
    subprocess.run(["podman", "update", "--cpus", "0.2", container("node3")], check=True, capture_output=True)
    try:
        run = playbook("verify.yml", "-e", "verify_acceptance=true", "-e", "burn_in_cpu=true", "-e", "burn_in_seconds=3",
                       timeout=900)
    finally:
        subprocess.run(["podman", "update", "--cpus", "2", container("node3")], check=True, capture_output=True)
    record = json.loads((INVENTORY.parent / "reports" / "acceptance.json").read_text())
    assert run.returncode != 0 and "Every node passes its acceptance" in run.stdout, run.stdout[-3000:]
    assert [record["nodes"][n]["passed"] for n in CLUSTER] == [True, True, False], record["rows"]
    assert "node3: burn-in: GEMM TFLOP/s: cpu" in run.stdout, run.stdout[-3000:]
