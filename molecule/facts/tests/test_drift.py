"""Drift end to end: node3's driver differs; the report names it, and facts.yml fails on it."""

import json

from testbed_fixtures import INVENTORY, playbook

REPORTS = INVENTORY.parent / "reports"


def row(report, key):
    return next(r for r in report["rows"] if r["key"] == key)


def test_report_names_the_odd_node():
    report = json.loads((REPORTS / "drift.json").read_text())
    assert report["failed"]
    driver = row(report, "driver")
    assert driver["values"] == {"node1": "580.159.04", "node2": "580.159.04", "node3": "570.172.08"}
    assert driver["odd_hosts"] == ["node3"] and driver["status"] == "FAIL"
    assert row(report, "cuda (driver)")["odd_hosts"] == ["node3"]
    assert row(report, "gpus")["values"]["node1"] == "2x NVIDIA H200" and row(report, "gpus")["consistent"]
    assert "driver: node3 has 570.172.08, others 580.159.04" in report["errors"]
    assert "**570.172.08**" in (REPORTS / "drift.md").read_text()


def test_facts_playbook_fails_on_critical_drift():
    run = playbook("facts.yml", "-e", "drift_report_fail=true")
    assert run.returncode != 0
    assert "Version drift between nodes:" in run.stdout
    assert "driver: node3 has 570.172.08, others 580.159.04" in run.stdout
