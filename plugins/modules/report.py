# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: report
short_description: Write a report file on the controller, without running a module
version_added: 0.1.0
author: trainops.cluster maintainers (@trainops)
description:
  - Writes O(content) to O(dest) on the Ansible controller. The action plugin does the work inside the controller
    process, so no module process is started and the target is never contacted; a report costs milliseconds
    instead of the fraction of a second that M(ansible.builtin.copy) with C(delegate_to=localhost) takes.
  - Creates missing parent directories (mode C(0755)). Replaces O(dest) atomically (a temporary file in the same
    directory, renamed over it), and only when its content differs; when only the mode differs it changes the mode.
  - Runs as the user running C(ansible-playbook), whatever C(become) says, and ignores C(delegate_to).
options:
  dest:
    description:
      - Path of the file on the controller. Missing parent directories are created.
      - A relative path is relative to the directory C(ansible-playbook) runs in.
    type: path
    required: true
  content:
    description: The whole content of the file, written as UTF-8.
    type: str
    required: true
  mode:
    description:
      - Permissions of the file, in octal. Quote it (V('0644')) so YAML keeps it a string.
      - Symbolic modes (V(u=rw,g=r)) are not supported.
    type: raw
    default: "0644"
extends_documentation_fragment:
  - trainops.cluster.attributes.controller
seealso:
  - module: ansible.builtin.copy
"""

EXAMPLES = r"""
- name: Write the port matrix report
  trainops.cluster.report:
    dest: "{{ cluster_report_dir }}/port_matrix.json"
    content: "{{ port_matrix_result | to_nice_json }}\n"
  run_once: true
  # A report of this run, not state of the cluster: writing it is no change.
  changed_when: false

- name: Keep each node's log, one file per node
  trainops.cluster.report:
    dest: "{{ cluster_report_dir }}/logs/{{ inventory_hostname }}.log"
    content: "{{ probe.stdout }}"
    mode: "0600"
"""

RETURN = r"""
dest:
  description: Absolute path of the file on the controller.
  returned: always
  type: str
  sample: /srv/ansible/inventories/site/reports/port_matrix.json
size:
  description: Size of the content in bytes.
  returned: always
  type: int
  sample: 2048
"""
