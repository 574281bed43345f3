# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""python3 -m trainops_job: the command line (cli.py); the runner starts its helpers so."""

import sys

from trainops_job.cli import main

sys.exit(main(sys.argv[1:]))
