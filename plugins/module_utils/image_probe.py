# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The training environment inside the image: what image_facts runs there and how its answer is read.

The probe runs with the image's own Python, so a job's versions are those it will really import: Python, torch with
its CUDA and NCCL, the versions of the packages asked for, and, where LLaMA-Factory is installed, which of its own
requirements the image does not meet (LLaMA-Factory checks them at start and stops).

Node side: shipped to the nodes inside the module that imports it (image_facts).
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from ansible_collections.trainops.cluster.plugins.module_utils.comm import normalize_nccl_version

# argv[1:] are the distributions whose versions to read. Runs on any Python 3.8+ (importlib.metadata);
# packaging, which transformers needs, reads LLaMA-Factory's requirements.
IMAGE_PROBE = r'''
import json, platform, sys
out = {"python": platform.python_version(), "torch": None, "torch_error": None, "packages": {},
       "llamafactory_unmet": None, "llamafactory_error": None}
from importlib import metadata
for name in sys.argv[1:]:
    try:
        out["packages"][name] = metadata.version(name)
    except metadata.PackageNotFoundError:
        out["packages"][name] = None
try:
    import torch
    out["torch"] = {"version": str(torch.__version__), "cuda": torch.version.cuda, "nccl": None}
    if torch.version.cuda:
        v = torch.cuda.nccl.version()
        out["torch"]["nccl"] = list(v) if isinstance(v, tuple) else v
except Exception as e:
    out["torch_error"] = "%s: %s" % (type(e).__name__, e)
try:
    requires = metadata.requires("llamafactory")
except metadata.PackageNotFoundError:
    requires = None
if requires is not None:
    try:
        from packaging.requirements import Requirement
        unmet = []
        for text in requires:
            req = Requirement(text)
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            try:
                have = metadata.version(req.name)
            except metadata.PackageNotFoundError:
                have = None
            if have is None or not req.specifier.contains(have, prereleases=True):
                unmet.append({"requirement": str(req), "installed": have})
        out["llamafactory_unmet"] = unmet
    except Exception as e:
        out["llamafactory_error"] = "%s: %s" % (type(e).__name__, e)
print(json.dumps(out))
'''


def probe_argv(engine: str, image: str, python: str, packages: Sequence[str], run_args: Sequence[str] = ()) -> list[str]:
    """The engine's command line that runs the probe in `image` with its `python`: no network, removed after."""
    return ([engine, 'run', '--rm', '--network', 'none'] + list(run_args)
            + ['--entrypoint', python, image, '-c', IMAGE_PROBE] + list(packages))


def parse_image_probe(text: str | None) -> dict[str, Any]:
    """IMAGE_PROBE's output (its last JSON line) -> {python, torch: {version, cuda, nccl} | None, torch_error,
    packages: {name: version | None}, llamafactory_unmet: [{requirement, installed}] | None, llamafactory_error}.

    Raises ValueError when there is no JSON line (the probe did not run).
    """
    lines = [line for line in (text or '').splitlines() if line.startswith('{')]
    if not lines:
        raise ValueError('the probe printed no result')
    data = json.loads(lines[-1])
    torch = data.get('torch')
    return {
        'python': data.get('python'),
        'torch': {'version': torch.get('version'), 'cuda': torch.get('cuda'), 'nccl': normalize_nccl_version(torch.get('nccl'))}
        if torch else None,
        'torch_error': data.get('torch_error'),
        'packages': dict(data.get('packages') or {}),
        'llamafactory_unmet': data.get('llamafactory_unmet'),
        'llamafactory_error': data.get('llamafactory_error'),
    }
