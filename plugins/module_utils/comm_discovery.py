# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What comm_facts finds on a node: NCCL per source, torch, Python, CUDA toolkit, MPI, nccl-tests, net plugins, IB
ports, interfaces and the one holding cluster_ip, /dev/shm, memlock, the port range. The commands it runs are
bounded (command.run_bounded); the parsing is in comm.py. gather(module) is the module's whole result.

Node side: shipped to the nodes inside the module that imports it (comm_facts).
"""

from __future__ import annotations

import fcntl
import glob
import os
import platform
import socket
import struct
import sys
from typing import TYPE_CHECKING, Any, Callable

from ansible_collections.trainops.cluster.plugins.module_utils._infiniband import read_infiniband
from ansible_collections.trainops.cluster.plugins.module_utils.command import run_bounded
from ansible_collections.trainops.cluster.plugins.module_utils.comm import (
    NCCL_LIBRARY_PROBE, TORCH_PROBE, find_net_plugins, is_nccl_library, nccl_summary, nccl_version_from_code, nccl_version_from_filename,
    netmask_prefix, parse_ip_addr_json, parse_ldconfig, parse_memlock, parse_mpi_version, parse_nvcc_version, parse_os_release,
    parse_pip_show, parse_port_range, parse_proc_if_inet6, parse_torch_probe, read_sysfs_net, recommend_socket_ifname,
    shm_from_statvfs)

if TYPE_CHECKING:
    from ansible.module_utils.basic import AnsibleModule

SYSFS_ROOT = '/sys'
OS_RELEASE = '/etc/os-release'
PROC_LIMITS = '/proc/self/limits'
PORT_RANGE = '/proc/sys/net/ipv4/ip_local_port_range'
IF_INET6 = '/proc/net/if_inet6'
SIOCGIFADDR = 0x8915
SIOCGIFNETMASK = 0x891b
SHM_PATH = '/dev/shm'
# Where NCCL libraries live outside the linker cache (NGC images, HPC-X, AWS EFA, GCP gIB, source installs).
LIBRARY_DIRS = ['/usr/lib/x86_64-linux-gnu', '/usr/lib/aarch64-linux-gnu', '/usr/lib64', '/usr/local/lib', '/usr/local/lib64',
                '/usr/local/cuda/lib64', '/usr/local/nvidia/lib64', '/opt/hpcx/nccl_rdma_sharp_plugin/lib', '/opt/amazon/ofi-nccl/lib',
                '/opt/amazon/ofi-nccl/lib64', '/opt/aws-ofi-nccl/lib', '/usr/local/gib/lib64']
MPI_DIRS = ['/opt/hpcx/ompi/bin', '/usr/lib64/openmpi/bin', '/usr/lib64/mpich/bin', '/opt/amazon/openmpi/bin', '/usr/mpi/gcc/openmpi/bin',
            '/opt/intel/oneapi/mpi/latest/bin']
NCCL_TESTS_DIRS = ['/opt/trainops/nccl-tests/src/build', '/opt/nccl-tests/build']


def run(module: AnsibleModule, argv: list[str], timeout: float) -> tuple[int, str, str, bool]:
    """(rc, stdout, stderr, timed_out) of argv, killed after `timeout` seconds; C locale for parsable output."""
    return run_bounded(module, argv, timeout, environ_update={'LC_ALL': 'C'})


def failure(argv: list[str], rc: int, err: str, timed_out: bool, timeout: float) -> str:
    if timed_out:
        return '%s timed out after %ss' % (os.path.basename(argv[0]), timeout)
    lines = (err or '').strip().splitlines()
    return '%s exited %s%s' % (os.path.basename(argv[0]), rc, (': ' + lines[-1]) if lines else '')


def read_text(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except (IOError, OSError):
        return None


def resolve_python(module: AnsibleModule, python: str) -> str | None:
    if os.path.isabs(python):
        return python if os.access(python, os.X_OK) else None
    found: str | None = module.get_bin_path(python)
    return found


def probe_python(module: AnsibleModule, python: str, timeout: float, unavailable: dict[str, str],
                 probe_torch: bool = True) -> tuple[dict[str, Any], str | None]:
    """The torch probe's parsed result, with pip's answer when the probe could not list packages."""
    path = resolve_python(module, python)
    if path is None:
        unavailable['python'] = '%s not found or not executable' % python
        return parse_torch_probe(''), path
    argv = [path, '-c', TORCH_PROBE] + ([] if probe_torch else ['--no-torch'])
    rc, out, err, timed_out = run(module, argv, timeout)
    if rc == 0 and '{' in out:
        probe = parse_torch_probe(out)
    else:
        unavailable['python'] = failure(argv, rc, err, timed_out, timeout)
        probe = parse_torch_probe('')
    if probe['torch_error']:
        unavailable['torch'] = probe['torch_error']
    if probe['packages'] is None:
        argv = [path, '-m', 'pip', 'show', 'nvidia-nccl-cu12', 'nvidia-nccl-cu13']
        rc, out, err, timed_out = run(module, argv, timeout)
        probe['packages'] = parse_pip_show(out)
        if timed_out or (not probe['packages'] and 'not found' not in err):
            unavailable['pip'] = failure(argv, rc, err, timed_out, timeout)
    return probe, path


def system_nccl(module: AnsibleModule, ldconfig_entries: list[dict[str, str]], timeout: float,
                unavailable: dict[str, str]) -> list[dict[str, Any]]:
    """One 'system' source per distinct libnccl file in the linker cache or LIBRARY_DIRS."""
    candidates = [e['path'] for e in ldconfig_entries if is_nccl_library(e['soname'])]
    for directory in LIBRARY_DIRS:
        candidates.extend(sorted(glob.glob(os.path.join(directory, 'libnccl.so*'))))
    sources: list[dict[str, Any]] = []
    seen = set()
    for path in candidates:
        real = os.path.realpath(path)
        if real in seen or not os.path.isfile(real):
            continue
        seen.add(real)
        version = nccl_version_from_filename(real) or nccl_version_from_filename(path)
        if version is None:
            # pip-style and some vendor libraries are named libnccl.so.2 only: ask the library.
            argv = [sys.executable, '-c', NCCL_LIBRARY_PROBE, real]
            rc, out, err, timed_out = run(module, argv, timeout)
            if rc == 0 and out.strip().isdigit():
                version = nccl_version_from_code(out.strip())
            else:
                unavailable['nccl_version:' + real] = failure(argv, rc, err, timed_out, timeout)
        sources.append({'source': 'system', 'version': version, 'path_or_package': real})
    return sources


def net_plugin_candidates(ldconfig_entries: list[dict[str, str]], packages: list[dict[str, Any]]) -> list[str]:
    paths = [e['path'] for e in ldconfig_entries]
    dirs = list(LIBRARY_DIRS) + [d for d in os.environ.get('LD_LIBRARY_PATH', '').split(':') if d]
    for package in packages:
        if package.get('location'):
            dirs.extend(glob.glob(os.path.join(package['location'], 'nvidia', '*', 'lib')))
    for directory in dirs:
        paths.extend(glob.glob(os.path.join(directory, 'libnccl-net*.so*')))
    return paths


def find_tool(module: AnsibleModule, name: str, dirs: list[str], unavailable: dict[str, str], where: str) -> str | None:
    """PATH (and the sbin directories) first, as a login shell would find it, then the usual install directories."""
    path: str | None = module.get_bin_path(name) or module.get_bin_path(name, opt_dirs=dirs)
    if path is None:
        unavailable[name] = 'not found in PATH or %s' % where
    return path


def nccl_tests(module: AnsibleModule, nccl_tests_path: str | None, unavailable: dict[str, str]) -> dict[str, Any]:
    if nccl_tests_path:
        for candidate in (os.path.join(nccl_tests_path, 'all_reduce_perf'), os.path.join(nccl_tests_path, 'build', 'all_reduce_perf')):
            if os.access(candidate, os.X_OK):
                return {'present': True, 'path': candidate}
        unavailable['all_reduce_perf'] = 'not found in %s or its build/ directory' % nccl_tests_path
        return {'present': False, 'path': None}
    path = find_tool(module, 'all_reduce_perf', NCCL_TESTS_DIRS, unavailable, ', '.join(NCCL_TESTS_DIRS))
    return {'present': path is not None, 'path': path}


def tool_version(module: AnsibleModule, name: str, dirs: list[str], where: str, parse: Callable[[str], Any], timeout: float,
                 unavailable: dict[str, str]) -> tuple[str | None, Any]:
    """(path, parsed `<name> --version`) or (None, None) with the reason recorded."""
    path = find_tool(module, name, dirs, unavailable, where)
    if path is None:
        return None, None
    argv = [path, '--version']
    rc, out, err, timed_out = run(module, argv, timeout)
    # Some launchers (Open MPI as root, Hydra) print the version on stderr or exit non-zero after printing it.
    parsed = None if timed_out else parse(out + '\n' + err)
    if parsed is None:
        unavailable[name] = failure(argv, rc, err, timed_out, timeout) if (rc or timed_out) else 'unrecognised --version output'
    return path, parsed


def ipv4_address(name: str) -> str | None:
    """Primary IPv4 address of an interface as 'a.b.c.d/len' via ioctl, or None."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        request = struct.pack('256s', name[:15].encode())
        address = socket.inet_ntoa(fcntl.ioctl(sock.fileno(), SIOCGIFADDR, request)[20:24])
        netmask = socket.inet_ntoa(fcntl.ioctl(sock.fileno(), SIOCGIFNETMASK, request)[20:24])
    except (IOError, OSError):
        return None
    finally:
        sock.close()
    return '%s/%d' % (address, netmask_prefix(netmask))


def list_interfaces(module: AnsibleModule, timeout: float, unavailable: dict[str, str]) -> list[dict[str, Any]]:
    """`ip -j addr show`; without a working `ip` (slim images), sysfs and /proc with each interface's primary IPv4 address."""
    ip = find_tool(module, 'ip', [], unavailable, '/sbin, /usr/sbin')
    if ip:
        argv = [ip, '-j', 'addr', 'show']
        rc, out, err, timed_out = run(module, argv, timeout)
        if rc == 0:
            try:
                return parse_ip_addr_json(out)
            except ValueError as e:
                err = 'unparsable JSON: %s' % e
        unavailable['ip'] = failure(argv, rc, err, timed_out, timeout)
    unavailable['ip'] += '; interfaces read from /sys/class/net and %s (IPv4: primary address only)' % IF_INET6
    ipv6 = parse_proc_if_inet6(read_text(IF_INET6))
    interfaces = read_sysfs_net(SYSFS_ROOT)
    for interface in interfaces:
        ipv4 = ipv4_address(interface['name'])
        interface['addresses'] = ([ipv4] if ipv4 else []) + ipv6.get(interface['name'], [])
    return interfaces


def gather(module: AnsibleModule) -> dict[str, Any]:
    params = module.params
    timeout = params['timeout']
    unavailable: dict[str, str] = {}

    python = params['python'] or sys.executable
    probe, python_path = probe_python(module, python, timeout, unavailable, params['probe_torch'])

    ldconfig_entries: list[dict[str, str]] = []
    ldconfig = find_tool(module, 'ldconfig', [], unavailable, '/sbin, /usr/sbin')
    if ldconfig:
        argv = [ldconfig, '-p']
        rc, out, err, timed_out = run(module, argv, timeout)
        ldconfig_entries = parse_ldconfig(out)
        if rc or timed_out:
            unavailable['ldconfig'] = failure(argv, rc, err, timed_out, timeout)

    sources = system_nccl(module, ldconfig_entries, timeout, unavailable)
    for package in probe['packages'] or []:
        sources.append({'source': 'pip', 'version': package['version'], 'path_or_package': package['name'], 'location': package['location']})
    torch = probe['torch']
    if torch and torch['nccl']:
        sources.append({'source': 'torch', 'version': torch['nccl'], 'path_or_package': probe['torch_nccl_library'] or 'torch'})
    if not sources:
        unavailable['nccl'] = 'no libnccl in the linker cache or common library directories, no nvidia-nccl-cu* package, no NCCL in torch'

    cuda_dirs = [os.path.join(os.environ['CUDA_HOME'], 'bin')] if os.environ.get('CUDA_HOME') else []
    nvcc_path, nvcc_version = tool_version(module, 'nvcc', cuda_dirs + ['/usr/local/cuda/bin'], '/usr/local/cuda/bin',
                                           parse_nvcc_version, timeout, unavailable)
    mpirun_path, mpi = tool_version(module, 'mpirun', MPI_DIRS, 'common MPI directories', parse_mpi_version, timeout, unavailable)
    if mpi:
        mpi['path'] = mpirun_path

    interfaces = list_interfaces(module, timeout, unavailable)
    ifname, reason = recommend_socket_ifname(interfaces, params['cluster_ip'])

    try:
        st = os.statvfs(SHM_PATH)
        shm = shm_from_statvfs(st.f_frsize, st.f_blocks)
    except OSError as e:
        shm = {'size_bytes': None, 'human': None}
        unavailable['shm'] = '%s: %s' % (SHM_PATH, e.strerror)

    os_release = parse_os_release(read_text(OS_RELEASE))
    return {
        'nccl': nccl_summary(sources),
        'torch': torch,
        'python': {'version': probe['python']['version'], 'executable': probe['python']['executable'] or python_path or python},
        'cuda_toolkit': {'nvcc_version': nvcc_version, 'path': nvcc_path} if nvcc_version else None,
        'mpi': mpi,
        'nccl_tests': nccl_tests(module, params['nccl_tests_path'], unavailable),
        'net_plugins': find_net_plugins(net_plugin_candidates(ldconfig_entries, probe['packages'] or [])),
        'infiniband': read_infiniband(SYSFS_ROOT),
        'interfaces': interfaces,
        'nccl_socket_ifname': ifname,
        'nccl_socket_ifname_reason': reason,
        'shm': shm,
        'memlock': parse_memlock(read_text(PROC_LIMITS)),
        'ip_local_port_range': parse_port_range(read_text(PORT_RANGE)),
        'kernel': platform.release(),
        'os': os_release.get('PRETTY_NAME'),
        'unavailable': unavailable,
    }
