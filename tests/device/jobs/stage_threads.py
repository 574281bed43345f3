# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""An experiment of tests/device/bin/device-stage (STAGE_THREADS=N), not the product: the node program's stage with N
threads copying and hashing files at once (stage.WORKERS) instead of the product's, and reads of STAGE_CHUNK_MB MiB
(stage.CHUNK) where that is set, to measure what each would gain or cost.

Imported before trainops_job.cli (the archive first on sys.path): the two settings are the stage module's, read when
the stage runs. Refuses to run if the module no longer has them."""

import os

from trainops_job import stage as _stage

if not isinstance(getattr(_stage, "WORKERS", None), int) or not isinstance(getattr(_stage, "CHUNK", None), int):
    raise SystemExit("stage_threads: stage.WORKERS or stage.CHUNK is gone; update tests/device/jobs/stage_threads.py")
_stage.WORKERS = int(os.environ.get("STAGE_THREADS") or _stage.WORKERS)
_stage.CHUNK = int(float(os.environ.get("STAGE_CHUNK_MB") or 0) * (1 << 20)) or _stage.CHUNK
