from testbed_fixtures import node_fixture, group_vars_fixture  # noqa: F401  pylint: disable=unused-import
