# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Pure parsers for the communication stack of a training node (NCCL, torch, MPI, IB, network, limits).

Everything here takes text (or, for read_sysfs_net, a directory root) and returns plain data, so the
comm_facts module stays thin and the parsers are tested against recorded outputs. The RDMA ports' reader is
_infiniband.py's: the job runner links that file alone.

Node side: shipped to the nodes inside the modules that import it (allreduce_run, comm_facts, image_facts).
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
from typing import Any, Iterable

from ._infiniband import natural_key, sysfs_value

# Runs under the interpreter given to comm_facts (the one that trains), so it must work on any Python 3
# and never raise: a missing or broken torch is a fact. Prints one JSON line.
TORCH_PROBE = r'''
import json, platform, sys
out = {"python": {"version": platform.python_version(), "executable": sys.executable},
       "torch": None, "torch_error": None, "torch_nccl_library": None, "packages": None}
try:
    from importlib import metadata
except ImportError:
    metadata = None
if metadata is not None:
    seen = set()
    out["packages"] = []
    for dist in metadata.distributions():
        name = dist.metadata["Name"] or ""
        if name.lower().replace("_", "-").startswith("nvidia-nccl-cu"):
            key = (name, str(dist.locate_file("")))
            if key not in seen:
                seen.add(key)
                out["packages"].append({"name": name, "version": dist.version, "location": key[1]})
try:
    if "--no-torch" in sys.argv:
        raise ImportError("not probed (probe_torch is false)")
    import torch
    info = {"version": str(torch.__version__), "cuda": torch.version.cuda, "nccl": None, "device_count": None}
    out["torch"] = info
    try:
        v = torch.cuda.nccl.version()
        info["nccl"] = list(v) if isinstance(v, tuple) else v
    except Exception as e:
        out["torch_error"] = "nccl: %s: %s" % (type(e).__name__, e)
    try:
        info["device_count"] = torch.cuda.device_count()
    except Exception as e:
        out["torch_error"] = "device_count: %s: %s" % (type(e).__name__, e)
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1]
                if "/libnccl.so" in path:
                    out["torch_nccl_library"] = path
                    break
    except Exception:
        pass
except Exception as e:
    out["torch_error"] = "%s: %s" % (type(e).__name__, e)
print(json.dumps(out))
'''

# Asks a libnccl for its version by loading it (NCCL needs no GPU for this); argv[1] is the library path.
NCCL_LIBRARY_PROBE = r'''
import ctypes, sys
v = ctypes.c_int(0)
lib = ctypes.CDLL(sys.argv[1])
if lib.ncclGetVersion(ctypes.byref(v)) != 0:
    sys.exit(1)
print(v.value)
'''

_NCCL_FILE_RE = re.compile(r'^libnccl\.so\.(\d+\.\d+\.\d+)$')
_NET_PLUGIN_RE = re.compile(r'^libnccl-net[^/]*\.so(\.[0-9.]+)?$')
_LDCONFIG_RE = re.compile(r'^\s*(\S+)\s+\(([^)]*)\)\s+=>\s+(\S+)\s*$')
_SIZE_UNITS = 'KMGTPE'


def nccl_version_from_filename(path: str | None) -> str | None:
    """'/x/libnccl.so.2.28.9' -> '2.28.9'; None when the name carries only the soname major (libnccl.so.2)."""
    if not path:
        return None
    m = _NCCL_FILE_RE.match(os.path.basename(path))
    return m.group(1) if m else None


def nccl_version_from_code(code: int | str) -> str | None:
    """NCCL_VERSION_CODE / ncclGetVersion() int -> 'X.Y.Z' (22809 -> 2.28.9; codes below 10000 are pre-2.9: 2708 -> 2.7.8)."""
    code = int(code)
    if code <= 0:
        return None
    if code >= 10000:
        return '%d.%d.%d' % (code // 10000, code // 100 % 100, code % 100)
    return '%d.%d.%d' % (code // 1000, code // 100 % 10, code % 100)


def normalize_nccl_version(value: object) -> str | None:
    """torch.cuda.nccl.version() in any shape it has had: (2, 28, 9), [2, 28, 9], '(2, 28, 9)', 22809, '2.28.9'."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return nccl_version_from_code(value)
    if isinstance(value, (list, tuple)):
        return '.'.join(str(int(p)) for p in value) if value else None
    text = str(value).strip()
    if text.isdigit():
        return nccl_version_from_code(text)
    parts = re.findall(r'\d+', text)
    return '.'.join(str(int(p)) for p in parts[:3]) if len(parts) >= 3 else None


def parse_ldconfig(text: str | None) -> list[dict[str, str]]:
    """`ldconfig -p` -> [{soname, arch, path}] (the header line and anything unparsable are skipped)."""
    entries = []
    for line in (text or '').splitlines():
        m = _LDCONFIG_RE.match(line)
        if m:
            entries.append({'soname': m.group(1), 'arch': m.group(2), 'path': m.group(3)})
    return entries


def is_nccl_library(name: str) -> bool:
    """True for the core NCCL library (libnccl.so, libnccl.so.2, libnccl.so.2.28.9), not plugins or libnccl_static."""
    base = os.path.basename(name)
    return base == 'libnccl.so' or base.startswith('libnccl.so.')


def parse_ldconfig_nccl(text: str | None) -> list[dict[str, str | None]]:
    """`ldconfig -p` -> the core NCCL library entries [{path, soname, version}] (version only when a file name carries it)."""
    result: list[dict[str, str | None]] = []
    for entry in parse_ldconfig(text):
        if is_nccl_library(entry['soname']):
            version = nccl_version_from_filename(entry['soname']) or nccl_version_from_filename(entry['path'])
            result.append({'path': entry['path'], 'soname': entry['soname'], 'version': version})
    return result


def parse_pip_show(text: str | None) -> list[dict[str, str | None]]:
    """`pip show a b` -> [{name, version, location}], one per package block (blocks are separated by '---')."""
    packages: list[dict[str, str | None]] = []
    current: dict[str, str | None] = {}
    for line in (text or '').splitlines() + ['---']:
        if line.strip() == '---':
            if current.get('name'):
                packages.append({'name': current['name'], 'version': current.get('version'), 'location': current.get('location')})
            current = {}
            continue
        key, sep, value = line.partition(':')
        if sep and key in ('Name', 'Version', 'Location'):
            current[key.lower()] = value.strip() or None
    return packages


def parse_torch_probe(text: str | None) -> dict[str, Any]:
    """Output of TORCH_PROBE (one JSON line), or the older 'key value' probe format of the h200x2 fixture, ->
    {python: {version, executable}, torch: {version, cuda, nccl, device_count} | None, torch_error, torch_nccl_library, packages}.

    packages is None when the probe could not list installed distributions (then the module asks pip).
    """
    result: dict[str, Any]
    result = {'python': {'version': None, 'executable': None}, 'torch': None, 'torch_error': None,
              'torch_nccl_library': None, 'packages': None}
    lines = [line.strip() for line in (text or '').splitlines() if line.strip()]
    json_lines = [line for line in lines if line.startswith('{')]
    if json_lines:
        data = json.loads(json_lines[-1])
        result['python'].update(data.get('python') or {})
        result['torch_error'] = data.get('torch_error')
        result['torch_nccl_library'] = data.get('torch_nccl_library')
        if data.get('packages') is not None:
            result['packages'] = [{'name': p.get('name'), 'version': p.get('version'), 'location': p.get('location')}
                                  for p in data['packages']]
        torch = data.get('torch')
        if torch:
            result['torch'] = {'version': torch.get('version'), 'cuda': torch.get('cuda'),
                               'nccl': normalize_nccl_version(torch.get('nccl')), 'device_count': torch.get('device_count')}
        return result
    values: dict[str, str] = {}
    for line in lines:
        key, _sep, value = line.partition(' ')
        values[key] = value.strip()
    result['python']['version'] = values.get('python')
    if 'torch' in values:
        devices = values.get('devices')
        result['torch'] = {'version': values['torch'], 'cuda': _none_if_empty(values.get('cuda')),
                           'nccl': normalize_nccl_version(values.get('nccl')),
                           'device_count': int(devices) if devices and devices.isdigit() else None}
    return result


def _none_if_empty(value: str | None) -> str | None:
    return None if value in (None, '', 'None') else value


def parse_mpi_version(text: str | None) -> dict[str, str] | None:
    """`mpirun --version` (or an MPI library version string) -> {implementation, version}, or None if none is recognised.

    For MPICH-derived launchers (MPICH, MVAPICH) the version is that of their Hydra launcher.
    """
    text = text or ''
    m = re.search(r'Intel\(R\) MPI Library.*?Version\s+([\w.]+)', text)
    if m:
        return {'implementation': 'Intel MPI', 'version': m.group(1)}
    m = re.search(r'Open MPI\)?,?\s+v?(\d+(?:\.\d+)+\w*)', text)
    if m:
        return {'implementation': 'Open MPI', 'version': m.group(1)}
    m = re.search(r'HYDRA build details:.*?^\s*Version:\s+(\S+)', text, re.S | re.M)
    if m:
        # MVAPICH ships the MPICH Hydra launcher; its configure line names the install prefix.
        implementation = 'MVAPICH' if 'mvapich' in text.lower() else 'MPICH'
        return {'implementation': implementation, 'version': m.group(1)}
    m = re.search(r'MPICH Version:\s+(\S+)', text)
    if m:
        return {'implementation': 'MPICH', 'version': m.group(1)}
    return None


def parse_nvcc_version(text: str | None) -> str | None:
    """`nvcc --version` -> '13.0' (the 'release X.Y' of the toolkit), or None."""
    m = re.search(r'release (\d+\.\d+)', text or '')
    return m.group(1) if m else None


def parse_ip_addr_json(text: str | None) -> list[dict[str, Any]]:
    """`ip -j addr show` -> [{name, state, mtu, link_type, addresses: ['10.0.0.5/24', ...]}]."""
    interfaces: list[dict[str, Any]] = []
    for link in json.loads(text or '[]'):
        interfaces.append({
            'name': link.get('ifname'),
            'state': link.get('operstate'),
            'mtu': link.get('mtu'),
            'link_type': link.get('link_type'),
            'addresses': ['%s/%s' % (a['local'], a['prefixlen']) for a in link.get('addr_info', []) if 'local' in a],
        })
    return interfaces


# ARPHRD_* link types from <linux/if_arp.h>, named as `ip -j` names them.
_LINK_TYPES = {'1': 'ether', '32': 'infiniband', '772': 'loopback', '776': 'sit', '65534': 'none'}


def read_sysfs_net(sysfs_root: str = '/sys') -> list[dict[str, Any]]:
    """Interfaces from <sysfs_root>/class/net, for hosts without `ip`: parse_ip_addr_json's shape with empty addresses."""
    base = os.path.join(sysfs_root, 'class', 'net')
    try:
        names = sorted(os.listdir(base), key=natural_key)
    except (IOError, OSError):
        return []
    interfaces: list[dict[str, Any]] = []
    for name in names:
        if not os.path.isdir(os.path.join(base, name)):
            continue  # bonding_masters and similar control files
        mtu = sysfs_value(os.path.join(base, name, 'mtu'))
        link_type = sysfs_value(os.path.join(base, name, 'type'))
        interfaces.append({
            'name': name,
            'state': (sysfs_value(os.path.join(base, name, 'operstate')) or 'unknown').upper(),
            'mtu': int(mtu) if mtu and mtu.isdigit() else None,
            'link_type': _LINK_TYPES.get(link_type, link_type) if link_type is not None else None,
            'addresses': [],
        })
    return interfaces


def parse_proc_if_inet6(text: str | None) -> dict[str, list[str]]:
    """/proc/net/if_inet6 -> {interface: ['fd00::2/64', ...]} (address, ifindex, prefix length, scope, flags, name; hex)."""
    addresses: dict[str, list[str]] = {}
    for line in (text or '').splitlines():
        fields = line.split()
        if len(fields) == 6 and len(fields[0]) == 32:
            address = ipaddress.IPv6Address(bytes.fromhex(fields[0]))
            addresses.setdefault(fields[5], []).append('%s/%d' % (address, int(fields[2], 16)))
    return addresses


def netmask_prefix(netmask: str) -> int:
    """'255.255.255.0' -> 24."""
    return ipaddress.IPv4Network('0.0.0.0/' + netmask).prefixlen


def interface_for_ip(interfaces: list[dict[str, Any]], ip: object) -> str | None:
    """Name of the interface holding address `ip` (compared as addresses, so IPv6 spellings match), else None."""
    try:
        wanted = ipaddress.ip_address(str(ip).strip())
    except ValueError:
        return None
    for interface in interfaces:
        for address in interface.get('addresses', []):
            if ipaddress.ip_interface(address).ip == wanted:
                name: str = interface['name']
                return name
    return None


def recommend_socket_ifname(interfaces: list[dict[str, Any]], cluster_ip: object) -> tuple[str | None, str | None]:
    """(NCCL_SOCKET_IFNAME, reason): the interface carrying cluster_ip, or None and why not.

    The reason is also set when an interface is found but is not up, because NCCL would still pick it.
    """
    if not cluster_ip:
        return None, 'cluster_ip not given'
    try:
        ipaddress.ip_address(str(cluster_ip).strip())
    except ValueError:
        return None, 'cluster_ip %r is not an IP address' % (cluster_ip,)
    if not interfaces:
        return None, 'no interfaces could be listed'
    name = interface_for_ip(interfaces, cluster_ip)
    if name is None:
        return None, 'cluster_ip %s is not assigned to any interface on this host' % cluster_ip
    state = next(i.get('state') for i in interfaces if i['name'] == name)
    if state not in ('UP', 'UNKNOWN'):
        return name, '%s carries %s but its state is %s' % (name, cluster_ip, state)
    return name, None


def find_net_plugins(paths: Iterable[str | None]) -> list[str]:
    """Candidate library paths -> sorted distinct NCCL net plugins (libnccl-net.so, libnccl-net-<name>.so, ...)."""
    return sorted(set(os.path.normpath(p) for p in paths if p and _NET_PLUGIN_RE.match(os.path.basename(p))))


def human_bytes(size: float | None) -> str | None:
    """Bytes -> df -h style power-of-1024 text: 274877906944 -> '256G', 67108864 -> '64M'."""
    if size is None:
        return None
    value = float(size)
    unit = ''
    for next_unit in _SIZE_UNITS:
        if value < 1024:
            break
        value /= 1024
        unit = next_unit
    text = ('%.1f' % value).rstrip('0').rstrip('.')
    return text + unit


def _size_to_bytes(text: str) -> int | None:
    m = re.match(r'^(\d+(?:\.\d+)?)([KMGTPE]?)i?B?$', text.strip(), re.I)
    if not m:
        return None
    power = _SIZE_UNITS.index(m.group(2).upper()) + 1 if m.group(2) else 0
    return int(float(m.group(1)) * 1024 ** power)


def shm_from_statvfs(frsize: int, blocks: int) -> dict[str, Any]:
    """os.statvfs('/dev/shm') f_frsize and f_blocks -> {size_bytes, human}."""
    size = int(frsize) * int(blocks)
    return {'size_bytes': size, 'human': human_bytes(size)}


def parse_df_shm(text: str | None) -> dict[str, Any]:
    """`df -h /dev/shm` or `df -B1 /dev/shm` -> {size_bytes, human} from the Size column ({None, None} if absent).

    df -h rounds, so '256G' gives 256 GiB exactly.
    """
    lines = [line for line in (text or '').splitlines() if line.strip()]
    if len(lines) < 2:
        return {'size_bytes': None, 'human': None}
    fields = lines[1].split()
    size = _size_to_bytes(fields[1]) if len(fields) > 1 else None
    return {'size_bytes': size, 'human': human_bytes(size)}


def parse_port_range(text: str | None) -> list[int] | None:
    """/proc/sys/net/ipv4/ip_local_port_range '32768\\t60999' -> [32768, 60999]; None if not two numbers."""
    parts = (text or '').split()
    if len(parts) < 2 or not (parts[0].isdigit() and parts[1].isdigit()):
        return None
    return [int(parts[0]), int(parts[1])]


def _limit_value(token: str, scale: int = 1) -> int | str | None:
    if token == 'unlimited':
        return 'unlimited'
    return int(token) * scale if token.isdigit() else None


def parse_memlock(text: str | None) -> dict[str, int | str | None]:
    """Locked-memory limit -> {soft, hard} as int bytes or 'unlimited'.

    Accepts /proc/<pid>/limits text ('Max locked memory  8388608  8388608  bytes') or `ulimit -l` output, which is the
    soft limit in KiB (hard stays None: `ulimit -l` does not show it).
    """
    for line in (text or '').splitlines():
        if line.startswith('Max locked memory'):
            fields = line[len('Max locked memory'):].split()
            if len(fields) >= 2:
                return {'soft': _limit_value(fields[0]), 'hard': _limit_value(fields[1])}
    tokens = (text or '').split()
    if len(tokens) == 1:
        return {'soft': _limit_value(tokens[0], 1024), 'hard': None}
    return {'soft': None, 'hard': None}


def parse_os_release(text: str | None) -> dict[str, str]:
    """/etc/os-release -> dict of its keys with quotes removed (PRETTY_NAME, ID, VERSION_ID, ...)."""
    values: dict[str, str] = {}
    for line in (text or '').splitlines():
        key, sep, value = line.partition('=')
        if sep and key.strip() and not key.startswith('#'):
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in '"\'':
                value = value[1:-1]
            values[key.strip()] = value
    return values


def nccl_summary(sources: list[dict[str, Any]]) -> dict[str, Any]:
    """[{source, version, ...}] -> {sources, versions}: versions are the distinct known ones, numerically sorted."""
    versions = set(s['version'] for s in sources if s.get('version'))
    return {'sources': sources, 'versions': sorted(versions, key=natural_key)}
