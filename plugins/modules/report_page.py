#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: report_page
short_description: Build the cluster report page, one self-contained HTML file, from the stages' JSON reports
version_added: 0.1.0
author:
  - trainops.cluster maintainers (@trainops)
description:
  - Reads the JSON reports in O(reports_dir) (C(ssh_mesh.json), C(port_matrix.json), C(drift.json), C(burn-in.json), C(verify.json),
    C(torchrun.json), C(doctor.json)), each as its stage last wrote it, and writes one HTML page with the verdict at the
    top (the first failing stage in bring-up order and its culprit), the ladder with a busbw against message size
    plot per rung and the link's limit drawn on it, the SSH mesh and port matrices as colour grids, the drift table
    with the odd nodes' cells marked, the torchrun rungs and the training loss curve, the doctor's findings with
    their fixes, and when each report was made.
  - Also reads every C(train-<job>.json) there (the status of a job of C(playbooks/train.yml)) and shows each job
    with its verdict, the node that failed first, every node's state, last step, step rate and last line, its step
    against time (stalls and restarts marked), its loss curve and a stall's diagnosis. A job does not change the
    cluster's verdict.
  - The page needs no network to open. Styles and plots (SVG, drawn with matplotlib) are inside it, and it runs
    no script. Text from the nodes is escaped.
  - A stage that never wrote a report is shown as C(NOT RUN); the verdict is PASS only when some stage reported
    and none failed.
options:
  reports_dir:
    description: The directory of the JSON reports (C(cluster_report_dir)).
    type: path
    required: true
  template:
    description: The page's Jinja2 template (the role C(trainops.cluster.report_page) passes its own).
    type: path
    required: true
  dest:
    description: Where to write the page. Default C(index.html) in O(reports_dir).
    type: path
  title:
    description: The page's title, the cluster's name.
    type: str
    default: cluster
extends_documentation_fragment:
  - trainops.cluster.attributes.controller
attributes:
  platform:
    support: full
    platforms: posix
    description: Runs on the controller; needs matplotlib there for the plots (else the page says why it has none).
"""

EXAMPLES = r"""
- name: Update the cluster report page
  trainops.cluster.report_page:
    reports_dir: "{{ cluster_report_dir }}"
    template: "{{ role_path }}/templates/index.html.j2"
    title: "{{ cluster_name }}"
  run_once: true
"""

RETURN = r"""
dest:
  description: The page's absolute path on the controller.
  returned: always
  type: str
  sample: /home/admin/trainops/inventories/prod/reports/index.html
verdict:
  description: The page's verdict.
  returned: always
  type: dict
  sample: {status: FAIL, stage: Ports between nodes, culprit: node3 -> node1, reason: "node3 -> node1 (29500): timed out"}
seconds:
  description: Time taken to read the reports and draw the page.
  returned: always
  type: float
  sample: 0.84
"""
