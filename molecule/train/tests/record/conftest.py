"""The live runs that tests/fixtures/train/ records: collected only when scripts/record-train-fixtures sets
TRAINOPS_RECORD (the folder to write), never in the suite, whose unit tests replay what they recorded (the record
fixture is the scenario's conftest's)."""

import os

# Not in the suite: molecule verify collects the scenario's tests/ folder, this one included.
collect_ignore_glob = [] if os.environ.get("TRAINOPS_RECORD") else ["*.py"]
