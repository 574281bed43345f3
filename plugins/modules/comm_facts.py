# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
---
module: comm_facts
short_description: Gather the communication stack of a GPU training node (NCCL, torch, MPI, RDMA, network, limits)
version_added: 0.1.0
author:
  - trainops.cluster maintainers (@trainops)
description:
  - Collects the facts that decide whether a multi-node C(torchrun)/NCCL job starts or hangs, so nodes can be compared.
  - NCCL versions from every source found, that is the system library (C(ldconfig -p) and common library directories),
    the C(nvidia-nccl-cu*) pip packages of O(python), and the library that torch actually loads.
  - torch version, its CUDA and NCCL versions and visible GPU count; the Python version; the CUDA toolkit (C(nvcc)) version;
    the MPI implementation and version; whether nccl-tests C(all_reduce_perf) is installed.
  - NCCL net plugins (C(libnccl-net*.so), see E(NCCL_NET_PLUGIN)) found in the linker cache, common directories and pip packages.
  - InfiniBand/RoCE ports from C(/sys/class/infiniband), network interfaces with addresses, and the interface carrying
    O(cluster_ip) as the recommended E(NCCL_SOCKET_IFNAME).
  - Size of C(/dev/shm), locked-memory limits of the connecting user, C(net.ipv4.ip_local_port_range), kernel release and OS name.
  - Read-only. Every external command runs under a timeout. A missing tool or package is reported as a V(null) fact with the
    reason in RV(ansible_facts.trainops_comm.unavailable), never as a failure.
options:
  cluster_ip:
    description:
      - The address this node uses for training traffic (for example its inventory C(ansible_host)).
      - The interface holding it is returned as RV(ansible_facts.trainops_comm.nccl_socket_ifname).
      - Must be an IP address; host names are not resolved.
    type: str
  python:
    description:
      - Interpreter to probe torch and the NCCL pip packages with, normally the one training runs with (a virtualenv's python).
      - A name is looked up in E(PATH). Defaults to the Python running this module.
      - torch not being importable is a fact, not a failure.
    type: str
  probe_torch:
    description:
      - Import torch to read its version, CUDA and NCCL. Importing it takes seconds; without it the pip NCCL packages
        are still listed.
    type: bool
    default: true
  timeout:
    description:
      - Seconds each external command (probe) may run before it is killed and reported as timed out.
      - Importing torch on a cold cache can take several seconds.
    type: int
    default: 20
  nccl_tests_path:
    description:
      - Directory holding the nccl-tests binaries (its C(build/) subdirectory is also tried).
      - When not set, C(all_reduce_perf) is looked up in E(PATH), C(/opt/trainops/nccl-tests/src/build) (where
        the role trainops.cluster.nccl_tests builds it) and C(/opt/nccl-tests/build).
    type: path
extends_documentation_fragment:
  - trainops.cluster.attributes
attributes:
  platform:
    support: full
    platforms: linux
    description: Reads Linux C(/proc) and C(/sys) and runs C(ip), C(ldconfig).
notes:
  - The locked-memory limit is that of the connecting (or become) user's session; a scheduler or container may set another one.
  - A system libnccl whose file name carries no version (only C(libnccl.so.2)) is loaded in a separate Python process to ask
    C(ncclGetVersion); this needs no GPU.
  - Probing torch imports it and asks it for the GPU count, which takes a few seconds on a GPU node.
seealso:
  - name: NCCL environment variables
    description: E(NCCL_SOCKET_IFNAME), E(NCCL_NET_PLUGIN) and friends.
    link: https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html
'''

EXAMPLES = r'''
- name: Gather the communication stack, probing the training virtualenv
  trainops.cluster.comm_facts:
    cluster_ip: "{{ ansible_host }}"
    python: /opt/torch/.venv/bin/python

- name: Fail when nodes disagree on the NCCL versions installed
  ansible.builtin.assert:
    that:
      - ansible_play_hosts | map('extract', hostvars, ['ansible_facts', 'trainops_comm', 'nccl', 'versions']) | unique | length == 1
  run_once: true

- name: Export the interface for NCCL
  ansible.builtin.set_fact:
    nccl_socket_ifname: "{{ ansible_facts.trainops_comm.nccl_socket_ifname }}"
  when: ansible_facts.trainops_comm.nccl_socket_ifname is not none
'''

RETURN = r'''
ansible_facts:
  description: Facts for the play.
  returned: always
  type: dict
  contains:
    trainops_comm:
      description: The communication stack of this node.
      returned: always
      type: dict
      contains:
        nccl:
          description: NCCL libraries found and their versions.
          type: dict
          contains:
            sources:
              description:
                - One entry per distinct library or package.
                - V(system) is a libnccl from the linker cache or a common library directory (path resolved through symlinks;
                  version from the file name, else asked from the library itself).
                - V(pip) is an installed C(nvidia-nccl-cu*) distribution (with its C(location)).
                - V(torch) is the library torch loaded (its path, or V(torch) when NCCL is linked into torch).
              type: list
              elements: dict
              sample:
                - {source: system, version: 2.28.3, path_or_package: /usr/lib/x86_64-linux-gnu/libnccl.so.2.28.3}
                - {source: pip, version: 2.28.9, path_or_package: nvidia-nccl-cu13, location: /opt/torch/.venv/lib/python3.12/site-packages}
                - {source: torch, version: 2.28.9, path_or_package: /opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2}
            versions:
              description: Distinct known versions over all sources, sorted. More than one means this node mixes NCCL versions.
              type: list
              elements: str
              sample: [2.28.3, 2.28.9]
        torch:
          description: torch as imported by O(python), or V(null) when it cannot be imported.
          type: dict
          contains:
            version: {description: C(torch.__version__), type: str, sample: 2.11.0+cu130}
            cuda: {description: C(torch.version.cuda) (V(null) for CPU builds), type: str, sample: '13.0'}
            nccl: {description: Result of C(torch.cuda.nccl.version) as X.Y.Z text, type: str, sample: 2.28.9}
            device_count: {description: Result of C(torch.cuda.device_count) (GPUs torch sees), type: int, sample: 2}
        python:
          description: The probed interpreter (version V(null) when it could not run).
          type: dict
          sample: {version: 3.12.3, executable: /opt/torch/.venv/bin/python}
        cuda_toolkit:
          description: The CUDA toolkit compiler, or V(null) when C(nvcc) is not found.
          type: dict
          sample: {nvcc_version: '13.0', path: /usr/local/cuda/bin/nvcc}
        mpi:
          description: C(mpirun --version), or V(null) when there is no C(mpirun) or its output is not recognised.
          type: dict
          sample: {implementation: Open MPI, version: 4.1.6, path: /usr/bin/mpirun}
        nccl_tests:
          description: Whether nccl-tests C(all_reduce_perf) is installed, and where.
          type: dict
          sample: {present: true, path: /opt/nccl-tests/build/all_reduce_perf}
        net_plugins:
          description: NCCL net plugin libraries found (a plugin on some nodes only changes the transport NCCL picks).
          type: list
          elements: str
          sample: [/opt/hpcx/nccl_rdma_sharp_plugin/lib/libnccl-net.so]
        infiniband:
          description: RDMA ports from C(/sys/class/infiniband); empty without HCAs.
          type: list
          elements: dict
          sample:
            - {device: mlx5_0, port: 1, state: ACTIVE, phys_state: LinkUp, rate_gbps: 400.0, link_layer: InfiniBand}
        interfaces:
          description:
            - Network interfaces from C(ip -j addr show).
            - Without a working C(ip) (slim container images), read from C(/sys/class/net) and C(/proc/net/if_inet6) with only
              the primary IPv4 address of each interface; RV(ansible_facts.trainops_comm.unavailable) then has an C(ip) entry saying so.
          type: list
          elements: dict
          sample:
            - {name: eth1, state: UP, mtu: 9000, link_type: ether, addresses: [10.0.0.5/24]}
        nccl_socket_ifname:
          description: The interface carrying O(cluster_ip), the value to use for E(NCCL_SOCKET_IFNAME); V(null) when not found.
          type: str
          sample: eth1
        nccl_socket_ifname_reason:
          description: Why RV(ansible_facts.trainops_comm.nccl_socket_ifname) is V(null), or a warning about it (interface not up).
          type: str
          sample: cluster_ip 10.0.0.9 is not assigned to any interface on this host
        shm:
          description: Size of C(/dev/shm); a container default of 64 MiB breaks NCCL and DataLoader workers.
          type: dict
          sample: {size_bytes: 274877906944, human: 256G}
        memlock:
          description: Locked-memory limit (RDMA registers memory) as int bytes or V(unlimited).
          type: dict
          sample: {soft: unlimited, hard: unlimited}
        ip_local_port_range:
          description: Ephemeral port range; a rendezvous port (C(MASTER_PORT)) inside it can collide with outgoing connections.
          type: list
          elements: int
          sample: [32768, 60999]
        kernel:
          description: Kernel release.
          type: str
          sample: 6.8.0-87-generic
        os:
          description: PRETTY_NAME from C(/etc/os-release).
          type: str
          sample: Ubuntu 24.04.3 LTS
        unavailable:
          description: Why a fact is missing or partial, keyed by tool or fact (for example C(torch), C(mpirun), C(nvcc), C(ip)).
          type: dict
          sample: {torch: "ModuleNotFoundError: No module named 'torch'", mpirun: not found in PATH or common MPI directories}
'''

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.trainops.cluster.plugins.module_utils.comm_discovery import gather


def main():
    module = AnsibleModule(
        argument_spec=dict(
            cluster_ip=dict(type='str'),
            python=dict(type='str'),
            probe_torch=dict(type='bool', default=True),
            timeout=dict(type='int', default=20),
            nccl_tests_path=dict(type='path'),
        ),
        supports_check_mode=True,
    )
    if module.params['timeout'] < 1:
        module.fail_json(msg='timeout must be at least 1 second')
    module.exit_json(changed=False, ansible_facts={'trainops_comm': gather(module)})


if __name__ == '__main__':
    main()
