# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""trainops.cluster.report_page: build the cluster report page on the controller. Documentation:
plugins/modules/report_page.py; the page itself: plugin_utils/report_page.py."""

from __future__ import annotations

import os
import time

from ansible_collections.trainops.cluster.plugins.action.report import ControllerFile
from ansible_collections.trainops.cluster.plugins.plugin_utils import report_page

ARGUMENT_SPEC = {
    "reports_dir": {"type": "path", "required": True},
    "template": {"type": "path", "required": True},
    "dest": {"type": "path"},
    "title": {"type": "str", "default": "cluster"},
}


class ActionModule(ControllerFile):
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def produce(self, args):
        dest = args["dest"] or os.path.join(args["reports_dir"], "index.html")
        start = time.monotonic()
        html, verdict = report_page.build(args["reports_dir"], args["template"], args["title"])
        return dest, html, 0o644, {"verdict": verdict, "seconds": round(time.monotonic() - start, 3)}
