# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
---
module: image_facts
short_description: Read the training environment inside a container image (Python, torch, its CUDA and NCCL, a job's packages)
version_added: 0.1.0
author:
  - trainops.cluster maintainers (@trainops)
description:
  - Starts O(image) once with its own O(python), without network, and reads what a job in it will import, so that
    nodes can be compared and a job's needs checked against the node (the driver against the image's CUDA).
  - Reads the Python version; torch's version, the CUDA it was built for and its NCCL; the version of each
    distribution in O(packages) (V(null) when it is not installed).
  - Where LLaMA-Factory is installed, lists its own requirements that the image does not meet. LLaMA-Factory checks
    them when it starts and stops there, on every node at once.
  - Read-only. The run is bounded by O(timeout). An image that cannot run the probe (no Python in it, the engine
    failing) is reported in RV(ansible_facts.trainops_image.unavailable), never as a failure.
options:
  engine:
    description: Container engine that holds O(image).
    type: str
    choices: [docker, podman]
    default: podman
  image:
    description: The image to read, as the node holds it (C(repo@sha256:...), C(repo:tag) or an image ID).
    type: str
    required: true
  python:
    description: The image's interpreter that jobs run with, a name on the image's E(PATH) or a path (a virtualenv's python).
    type: str
    default: python3
  packages:
    description: Distributions whose installed versions to read (their names as pip knows them).
    type: list
    elements: str
    default: [transformers, llamafactory, accelerate, peft, deepspeed, datasets]
  run_args:
    description: More options of the engine's C(run) that every container on this node needs (for example C(--ulimit)).
    type: list
    elements: str
    default: []
  timeout:
    description: Seconds the probe may run (importing torch from a cold image takes several) before it is stopped and reported.
    type: int
    default: 60
extends_documentation_fragment:
  - trainops.cluster.attributes
attributes:
  platform:
    support: full
    platforms: linux
    description: Runs the engine's command line on the node.
notes:
  - The probe needs no GPU. torch built without CUDA reports a V(null) CUDA and NCCL.
seealso:
  - module: trainops.cluster.container_image
  - module: trainops.cluster.comm_facts
  - name: CUDA compatibility
    description: Which driver runs which CUDA, and minor-version compatibility.
    link: https://docs.nvidia.com/deploy/cuda-compatibility/
'''

EXAMPLES = r'''
- name: Read the training image's Python, torch and LLaMA-Factory
  trainops.cluster.image_facts:
    image: registry.example.com/train/llamafactory@sha256:4f1c...
    packages: [transformers, llamafactory]

- name: Name the node whose driver is too old for the image's CUDA
  ansible.builtin.debug:
    msg: "{{ ansible_facts.trainops_image.torch.cuda }} in the image, {{ ansible_facts.trainops_gpu.cuda_version }} on the driver"
'''

RETURN = r'''
ansible_facts:
  description: Facts for the play.
  returned: always
  type: dict
  contains:
    trainops_image:
      description: The training environment inside the image.
      returned: always
      type: dict
      contains:
        image:
          description: The image read (O(image)).
          type: str
          sample: localhost/trainops-torch:trixie
        python:
          description: The Python version of O(python) in the image, V(null) when the probe did not run.
          type: str
          sample: 3.13.5
        torch:
          description: torch in the image (version, the CUDA it was built for, its NCCL), V(null) when it cannot be imported.
          type: dict
          sample: {version: 2.9.0+cu128, cuda: '12.8', nccl: 2.27.5}
        packages:
          description: Installed version of each of O(packages), V(null) for one not installed.
          type: dict
          sample: {transformers: 4.57.1, llamafactory: 0.9.4, deepspeed: null}
        llamafactory_unmet:
          description: LLaMA-Factory's own requirements that the image does not meet, V(null) when it is not installed.
          type: list
          elements: dict
          sample: [{requirement: 'transformers<=4.57.1,>=4.49.0', installed: 4.58.0}]
        unavailable:
          description: Why a fact is missing, keyed by fact (C(probe), C(torch), C(llamafactory)).
          type: dict
          sample: {probe: "podman exited 127: executable file `python3` not found in $PATH"}
'''

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.trainops.cluster.plugins.module_utils.command import run_bounded
from ansible_collections.trainops.cluster.plugins.module_utils.image_probe import parse_image_probe, probe_argv


def main():
    module = AnsibleModule(
        argument_spec=dict(
            engine=dict(type='str', choices=['docker', 'podman'], default='podman'),
            image=dict(type='str', required=True),
            python=dict(type='str', default='python3'),
            packages=dict(type='list', elements='str',
                          default=['transformers', 'llamafactory', 'accelerate', 'peft', 'deepspeed', 'datasets']),
            run_args=dict(type='list', elements='str', default=[]),
            timeout=dict(type='int', default=60),
        ),
        supports_check_mode=True,
    )
    params = module.params
    if params['timeout'] < 1:
        module.fail_json(msg='timeout must be at least 1 second')
    engine = module.get_bin_path(params['engine'], required=True)
    argv = probe_argv(engine, params['image'], params['python'], params['packages'], params['run_args'])
    rc, out, err, timed_out = run_bounded(module, argv, params['timeout'])
    facts = {'image': params['image'], 'python': None, 'torch': None, 'packages': {}, 'llamafactory_unmet': None, 'unavailable': {}}
    try:
        if rc != 0 or timed_out:
            raise ValueError('timed out after %ss' % params['timeout'] if timed_out else 'exited %s' % rc)
        probe = parse_image_probe(out)
    except ValueError as exc:
        lines = (err or out or '').strip().splitlines()
        facts['unavailable']['probe'] = '%s %s%s' % (os.path.basename(engine), exc, (': ' + lines[-1]) if lines else '')
        module.exit_json(changed=False, ansible_facts={'trainops_image': facts})
    facts.update((key, probe[key]) for key in ('python', 'torch', 'packages', 'llamafactory_unmet'))
    if probe['torch_error']:
        facts['unavailable']['torch'] = probe['torch_error']
    if probe['llamafactory_error']:
        facts['unavailable']['llamafactory'] = probe['llamafactory_error']
    module.exit_json(changed=False, ansible_facts={'trainops_image': facts})


if __name__ == '__main__':
    main()
