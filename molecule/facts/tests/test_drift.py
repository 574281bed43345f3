"""Drift end to end: node3's driver differs, and it runs Debian 13 beside Debian 12: the report names both, and
facts.yml fails on the driver."""

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


def test_report_names_the_debian_13_node():
    """node3 is Debian 13 (python 3.13), node1-2 Debian 12 (python 3.11); the kernel is the host's, the same on all."""
    report = json.loads((REPORTS / "drift.json").read_text())
    python = row(report, "python")
    assert python["values"]["node1"].startswith("3.11.") and python["values"]["node2"] == python["values"]["node1"]
    assert python["values"]["node3"].startswith("3.13.")
    assert python["odd_hosts"] == ["node3"] and python["majority"] == python["values"]["node1"]
    # python's severity is drift_report_policy's to choose: the row's status follows it, and unless the key is
    # ignored the sentence naming node3 is an error (critical) or a warning (warn).
    assert python["status"] == {"critical": "FAIL", "warn": "WARN", "ignore": "ignored"}[python["severity"]]
    sentence = "python: node3 has %s, others %s" % (python["values"]["node3"], python["values"]["node1"])
    if python["severity"] != "ignore":
        assert sentence in report["errors" if python["severity"] == "critical" else "warnings"]
    os_row = row(report, "os")
    assert os_row["values"] == {"node1": "Debian GNU/Linux 12 (bookworm)", "node2": "Debian GNU/Linux 12 (bookworm)",
                                "node3": "Debian GNU/Linux 13 (trixie)"}
    assert os_row["odd_hosts"] == ["node3"]
    assert row(report, "kernel")["consistent"]
    markdown = (REPORTS / "drift.md").read_text()
    assert "**%s**" % python["values"]["node3"] in markdown and "**Debian GNU/Linux 13 (trixie)**" in markdown


def test_facts_playbook_fails_on_critical_drift():
    run = playbook("facts.yml", "-e", "drift_report_fail=true")
    assert run.returncode != 0
    assert "Version drift between nodes:" in run.stdout
    assert "driver: node3 has 570.172.08, others 580.159.04" in run.stdout
