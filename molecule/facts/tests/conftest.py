from testbed_fixtures import (  # noqa: F401  pylint: disable=unused-import
    node_fixture, group_vars_fixture, pytest_configure, pytest_collection_modifyitems)
