# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""trainops.cluster.report_page: build the cluster report page on the controller. Documentation:
plugins/modules/report_page.py; the page itself: plugin_utils/report_page.py."""

from __future__ import annotations

import os
import time

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.action import ActionBase

from ansible_collections.trainops.cluster.plugins.action.report import ensure
from ansible_collections.trainops.cluster.plugins.plugin_utils import report_page

ARGUMENT_SPEC = {
    "reports_dir": {"type": "path", "required": True},
    "template": {"type": "path", "required": True},
    "dest": {"type": "path"},
    "title": {"type": "str", "default": "cluster"},
}


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    # Everything happens on the controller: no connection to the target is opened.
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)[1]
        dest = args["dest"] or os.path.join(args["reports_dir"], "index.html")
        start = time.monotonic()
        try:
            html, verdict = report_page.build(args["reports_dir"], args["template"], args["title"])
            result.update(ensure(dest, html, 0o644, self._task.check_mode))
        except (OSError, ValueError) as e:
            raise AnsibleActionFail("%s: %s" % (dest, to_native(e))) from e
        result.update(verdict=verdict, seconds=round(time.monotonic() - start, 3))
        return result
