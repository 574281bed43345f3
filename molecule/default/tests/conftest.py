# pytest runs this directory's files in name order: test_1_ to test_4_ read the converged cluster (a test that changes
# it puts it back), test_9_doctor.py injects faults and runs last.
from testbed_fixtures import (  # noqa: F401  pylint: disable=unused-import
    node_fixture, group_vars_fixture, pytest_configure, pytest_collection_modifyitems)
