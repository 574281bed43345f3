# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""docs/data-contract.md holds: a role reads another role's variables only through that role's declared result.

Every expression in every role's tasks, handlers, vars and defaults (YAML) and templates (Jinja text) is parsed.
A variable is read by its name, as an attribute of ``hostvars[host]``, or as a string that a filter follows
(``by_node(hostvars, 'launch_nproc')``, ``by_node(hostvars, ['port_matrix_probe', 'listeners'])``, ``extract``,
``selectattr('x.y')``). Each variable has one owner:

1. the role whose defaults/main.yml defines it (``train_tp`` is the doctor's, ``slurm_enabled`` the cluster's);
2. else the role with the longest name that prefixes it: role ``X`` owns ``X_*`` (``cluster_user_key_path`` is
   cluster_user's, ``cluster_ip`` the cluster's);
3. else the role whose defaults use a prefix named after no role (``nfs_*`` is shared_storage's). Role cluster's
   defaults claim no prefix: they keep other stages' names (below).

Rules: a role must not read, nor set (set_fact, register, vars:), another role's variable, and must not restate
another role's default with ``<that default> | default(...)``: a copy that silently drifts when the owner changes it.
The exceptions, each for a reason:

- ``<role>_result`` listed in the table of docs/data-contract.md: the one thing a stage publishes for later stages.
  The table is parsed here, so the doc and this test cannot drift apart.
- Whatever role cluster owns: the cluster model that every role depends on (meta/main.yml), i.e. its defaults and
  the ``cluster_*`` inventory facts (``cluster_ip``, ``cluster_hostname``). Its defaults also hold the settings of
  one stage that other stages read too (``training_image``, ``nfs_mount_state``, ``verify_launcher``, ...), under
  that stage's names: defined once, so no reader needs a ``| default(...)`` of its own.
- The variables of README's inventory table (``training_image``): the inventory's contract, which any role may read.
- The defaults of a role that this role declares as a dependency in meta/main.yml: Ansible loads them with it
  (training_image runs on container_runtime's engine, ``container_runtime_engine``).
- The keys of ``vars:`` on an ``include_role``/``import_role`` task: the including role parametrizes the included
  one there (train's pre-flight passes ``port_matrix_ports`` and ``port_matrix_report`` to port_matrix; the doctor
  passes ``cluster_report_page: false``). These are the included role's inputs, set, not read.
"""

import re
from pathlib import Path

import yaml
from jinja2 import Environment, nodes

ROOT = Path(__file__).resolve().parents[2]
ROLES = ROOT / "roles"
CONTRACT = ROOT / "docs" / "data-contract.md"
README = ROOT / "README.md"

# Keys whose value Ansible evaluates as a bare expression, without {{ }} (and debug's var).
CONDITIONALS = {"when", "failed_when", "changed_when", "until", "that"}
INCLUDES = {"include_role", "import_role", "ansible.builtin.include_role", "ansible.builtin.import_role"}
SET_FACT = {"set_fact", "ansible.builtin.set_fact"}
JINJA = Environment(extensions=["jinja2.ext.do", "jinja2.ext.loopcontrols"])
# A string that names a variable, or a path into one.
NAMING = re.compile(r"^([a-z][a-z0-9_]*)(\.[a-z0-9_]+)*$")


# --- what the repository declares -------------------------------------------------------------------------------


def _load(path):
    return (yaml.safe_load(path.read_text()) or {}) if path.exists() else {}


def _table_rows(text, columns):
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == columns:
            yield cells


def declared_results():
    """The `<role>_result` names in the first column of docs/data-contract.md's table."""
    return {name for cells in _table_rows(CONTRACT.read_text(), 5) for name in re.findall(r"`([a-z0-9_]+_result)`", cells[0])}


def inventory_settings():
    """The variables of README's inventory table ("| where | variable | meaning |")."""
    section = README.read_text().split("## The inventory model", 1)[1].split("\n## ", 1)[0]
    return {name for cells in _table_rows(section, 3) for name in re.findall(r"`([a-z0-9_]+)`", cells[1])}


ROLE_NAMES = sorted(path.name for path in ROLES.iterdir() if path.is_dir())
DEFAULTS = {role: set(_load(ROLES / role / "defaults" / "main.yml")) for role in ROLE_NAMES}
DEPENDENCIES = {role: {(dep["role"] if isinstance(dep, dict) else dep).rsplit(".", 1)[-1]
                       for dep in _load(ROLES / role / "meta" / "main.yml").get("dependencies") or []}
                for role in ROLE_NAMES}
RESULTS = declared_results()
INVENTORY = inventory_settings()


def _prefixes():
    prefixes = sorted(((role + "_", role) for role in ROLE_NAMES), key=lambda item: -len(item[0]))
    extra = {}
    for role in ROLE_NAMES:
        for name in sorted(DEFAULTS[role]):
            if role != "cluster" and "_" in name and not any(name.startswith(prefix) for prefix, dummy in prefixes):
                extra.setdefault(name.split("_", 1)[0] + "_", role)
    return prefixes + sorted(extra.items())


PREFIXES = _prefixes()


def owner(name):
    """The role that owns a variable (rules 1-3 above), or None (ansible_facts, inventory_hostname, item, ...)."""
    defined = [role for role in ROLE_NAMES if name in DEFAULTS[role]]
    if len(defined) == 1:
        return defined[0]
    return next((role for prefix, role in PREFIXES if name.startswith(prefix)), None)


def may_read(role, name):
    own = owner(name)
    return (own in (None, role, "cluster") or name in RESULTS or name in INVENTORY
            or (own in DEPENDENCIES[role] and name in DEFAULTS[own]))


# --- reading the roles ------------------------------------------------------------------------------------------


def _named(node):
    """The string of a filter's argument that names a variable: 'name', or the first item of a path ['name', 'key']."""
    if isinstance(node, nodes.List) and node.items:
        node = node.items[0]
    return [node] if isinstance(node, nodes.Const) and isinstance(node.value, str) and NAMING.match(node.value) else []


def _is_hostvars(node):
    return isinstance(node, nodes.Name) and node.name == "hostvars"


def _is_host(node):
    """hostvars[host], whose attributes and items are that host's variables."""
    return isinstance(node, nodes.Getitem) and _is_hostvars(node.node)


def reads(template):
    """(name, line within the text, restated: whether the read is `name | default(...)`) of every variable read."""
    tree = JINJA.parse(template)
    local = {node.name for node in tree.find_all(nodes.Name) if node.ctx in ("store", "param")}
    found = [(node.name, node.lineno, False) for node in tree.find_all(nodes.Name) if node.ctx == "load" and node.name not in local]
    found += [(node.attr, node.lineno, False) for node in tree.find_all(nodes.Getattr) if _is_host(node.node)]
    named = [item for node in tree.find_all(nodes.Getitem) if _is_host(node.node) for item in _named(node.arg)]
    for node in tree.find_all((nodes.Filter, nodes.Test, nodes.Call)):
        for arg in list(node.args) + [keyword.value for keyword in node.kwargs]:
            named += _named(arg)
    found += [(NAMING.match(node.value).group(1), node.lineno, False) for node in named]
    found += [(node.node.name, node.lineno, True) for node in tree.find_all(nodes.Filter)
              if node.name == "default" and isinstance(node.node, nodes.Name) and node.node.name not in local]
    return found


def _source_line(lines, node, name, fallback):
    """The first line of a YAML node that names `name` (1-based): folded scalars lose their line breaks."""
    pattern = re.compile(r"\b%s\b" % re.escape(name))
    span = range(node.start_mark.line, min(node.end_mark.line, len(lines) - 1) + 1)
    return next((number + 1 for number in span if pattern.search(lines[number])), fallback)


def yaml_uses(path):
    """(kind, name, line, restated) of a role's YAML file; kind is read or set (set_fact, register, vars: keys, and
    the keys of a defaults or vars file). The vars: keys of an include_role/import_role task are not listed."""
    text = path.read_text()
    lines = text.splitlines()
    uses = []

    def scalar(node, bare):
        if not (bare or "{{" in node.value or "{%" in node.value):
            return
        for name, lineno, restated in reads("{{ %s }}" % node.value if bare else node.value):
            fallback = node.start_mark.line + (lineno if node.style == "|" else 1)
            uses.append(("read", name, _source_line(lines, node, name, fallback), restated))

    def walk(node, bare=False):
        if isinstance(node, yaml.ScalarNode):
            scalar(node, bare)
        elif isinstance(node, yaml.SequenceNode):
            for item in node.value:
                walk(item, bare)
        elif isinstance(node, yaml.MappingNode):
            keys = {key.value for key, dummy in node.value}
            for key, value in node.value:
                if key.value in SET_FACT or (key.value == "vars" and not keys & INCLUDES):
                    if isinstance(value, yaml.MappingNode):
                        uses.extend(("set", name.value, name.start_mark.line + 1, False) for name, dummy in value.value)
                elif key.value == "register" and isinstance(value, yaml.ScalarNode):
                    uses.append(("set", value.value, value.start_mark.line + 1, False))
                walk(value, key.value in CONDITIONALS or (key.value == "var" and "msg" not in keys))

    for document in yaml.compose_all(text, Loader=yaml.SafeLoader):
        if path.parent.name in ("defaults", "vars") and isinstance(document, yaml.MappingNode):
            uses.extend(("set", key.value, key.start_mark.line + 1, False) for key, dummy in document.value)
        if document is not None:
            walk(document)
    return uses


def role_files(role):
    for part in ("tasks", "handlers", "vars", "defaults"):
        yield from sorted((ROLES / role / part).glob("**/*.yml"))
    yield from sorted((ROLES / role / "templates").glob("**/*.j2"))


def uses_of(path):
    if path.suffix == ".j2":
        return [("read", name, line, restated) for name, line, restated in reads(path.read_text())]
    return yaml_uses(path)


def violations():
    found = {}
    for role in ROLE_NAMES:
        for path in role_files(role):
            where = path.relative_to(ROOT)
            for kind, name, line, restated in uses_of(path):
                own = owner(name)
                if restated and own not in (None, role) and name in DEFAULTS[own]:
                    found[where, line, name] = ("%s:%d: %s restates role %s's default of %s with | default(...): move a default that "
                                                "several roles read to roles/cluster/defaults/main.yml" % (where, line, role, own, name))
                elif kind == "set" and own not in (None, role):
                    found[where, line, name] = "%s:%d: %s sets %s, a variable of role %s" % (where, line, role, name, own)
                elif kind == "read" and not may_read(role, name):
                    found.setdefault((where, line, name), "%s:%d: %s reads %s, a variable of role %s: read what %s publishes, %s_result "
                                     "(docs/data-contract.md)" % (where, line, role, name, own, own, own))
    return [found[key] for key in sorted(found, key=lambda key: (str(key[0]), key[1], key[2]))]


# --- the tests --------------------------------------------------------------------------------------------------


def test_the_contract_and_the_inventory_table_are_read():
    assert {"port_matrix_result", "launch_result", "training_image_result"} <= RESULTS
    assert {"cluster_ip", "cluster_network", "training_image"} <= INVENTORY


def test_every_declared_result_is_set_by_its_role_and_every_result_set_is_declared():
    for result in RESULTS:
        role = result[: -len("_result")]
        assert role in ROLE_NAMES, "docs/data-contract.md names %s, but there is no role %s" % (result, role)
    for role in ROLE_NAMES:
        set_here = {name for path in role_files(role) if path.suffix == ".yml" for kind, name, *dummy in yaml_uses(path) if kind == "set"}
        result = role + "_result"
        assert (result in set_here) == (result in RESULTS), (
            "role %s sets %s, which docs/data-contract.md does not declare" if result in set_here
            else "docs/data-contract.md declares %s, which role %s does not set") % ((role, result) if result in set_here else (result, role))


def test_no_default_is_defined_by_two_roles():
    assert {name: roles for name in set().union(*DEFAULTS.values())
            for roles in [[role for role in ROLE_NAMES if name in DEFAULTS[role]]] if len(roles) > 1} == {}


def test_roles_read_other_roles_only_through_their_declared_result():
    problems = violations()
    assert not problems, "\n" + "\n".join(problems)
