# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""comm_facts end to end: real commands (under the real `timeout`) against fake ldconfig, ip, mpirun, nvcc and python scripts."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.trainops.cluster.plugins.module_utils import comm_discovery
from ansible_collections.trainops.cluster.plugins.modules import comm_facts
import helpers.modules
from helpers.modules import script

FIXTURES = Path(__file__).resolve().parents[3] / 'fixtures'
REAL = FIXTURES / 'gpu' / 'h200x2'
COMM = FIXTURES / 'comm'

FACT_KEYS = {'nccl', 'torch', 'python', 'cuda_toolkit', 'mpi', 'nccl_tests', 'net_plugins', 'infiniband', 'interfaces',
             'nccl_socket_ifname', 'nccl_socket_ifname_reason', 'shm', 'memlock', 'ip_local_port_range', 'kernel', 'os', 'unavailable'}


@pytest.fixture
def node(tmp_path, monkeypatch):
    """A fake node: the h200x2 image's libraries and outputs, an 8-HCA sysfs tree, eth0 management and eth1 training.

    System libnccl.so.2 -> libnccl.so.2.28.3 (as captured on h200x1), torch and pip at 2.28.9, a libnccl-net plugin.
    """
    bindir = tmp_path / 'bin'
    libdir = tmp_path / 'lib'
    plugindir = tmp_path / 'hpcx' / 'lib'
    for d in (bindir, libdir, plugindir):
        d.mkdir(parents=True)
    (libdir / 'libnccl.so.2.28.3').write_text('')
    (libdir / 'libnccl.so.2').symlink_to('libnccl.so.2.28.3')
    (libdir / 'libnccl.so').symlink_to('libnccl.so.2')
    (plugindir / 'libnccl-net.so').write_text('')
    ldconfig = tmp_path / 'ldconfig.txt'
    ldconfig.write_text("3 libs found in cache `/etc/ld.so.cache'\n"
                        '\tlibnccl.so.2 (libc6,x86-64) => %s/libnccl.so.2\n'
                        '\tlibnccl.so (libc6,x86-64) => %s/libnccl.so\n'
                        '\tlibz.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libz.so.1\n' % (libdir, libdir))
    script(bindir / 'ldconfig', 'cat %s' % ldconfig)
    script(bindir / 'ip', '[ "$*" = "-j addr show" ] && cat %s' % (COMM / 'ip-addr-mgmt-train.json'))
    script(bindir / 'mpirun', 'cat %s' % (COMM / 'h200x1' / 'mpirun-version.txt'))
    script(bindir / 'nvcc', 'cat %s' % (REAL / 'nvcc.txt'))
    python = script(bindir / 'python', 'case "$1" in\n'
                    '  -c) cat %s ;;\n'
                    '  -m) cat %s; echo "WARNING: Package(s) not found: nvidia-nccl-cu12" >&2 ;;\n'
                    'esac' % (COMM / 'h200x1' / 'torch-probe.json', REAL / 'pip-nccl.txt'))
    monkeypatch.setenv('PATH', '%s:/usr/bin:/bin' % bindir)
    monkeypatch.delenv('LD_LIBRARY_PATH', raising=False)
    monkeypatch.delenv('CUDA_HOME', raising=False)
    monkeypatch.setattr(comm_discovery, 'LIBRARY_DIRS', [str(libdir), str(plugindir)])
    monkeypatch.setattr(comm_discovery, 'NCCL_TESTS_DIRS', [str(tmp_path / 'nccl-tests' / 'build')])
    monkeypatch.setattr(comm_discovery, 'SYSFS_ROOT', str(COMM / 'sysfs-ib-ndr8'))
    monkeypatch.setattr(comm_discovery, 'OS_RELEASE', str(REAL / 'os-release.txt'))
    monkeypatch.setattr(comm_discovery, 'PROC_LIMITS', str(COMM / 'h200x1' / 'proc-limits.txt'))
    monkeypatch.setattr(comm_discovery, 'PORT_RANGE', str(REAL / 'misc.txt'))
    monkeypatch.setattr(comm_discovery, 'IF_INET6', str(COMM / 'if-inet6-mgmt-train.txt'))
    monkeypatch.setattr(comm_discovery, 'ipv4_address', {'eth0': '192.168.10.21/24', 'eth1': '10.0.0.5/24', 'lo': '127.0.0.1/8'}.get)
    return {'tmp': tmp_path, 'bin': bindir, 'lib': libdir, 'plugin': plugindir, 'python': python}


def run_module(capsys, **args):
    return helpers.modules.run_module(comm_facts, capsys, **args)


def facts_of(result):
    assert result['changed'] is False
    assert 'failed' not in result
    return result['ansible_facts']['trainops_comm']


def test_real_node(node, capsys):
    facts = facts_of(run_module(capsys, cluster_ip='10.0.0.5', python=node['python']))
    assert set(facts) == FACT_KEYS
    assert facts['nccl'] == {
        'sources': [
            {'source': 'system', 'version': '2.28.3', 'path_or_package': str(node['lib'] / 'libnccl.so.2.28.3')},
            {'source': 'pip', 'version': '2.28.9', 'path_or_package': 'nvidia-nccl-cu13', 'location': '/opt/torch/.venv/lib/python3.12/site-packages'},
            {'source': 'torch', 'version': '2.28.9', 'path_or_package': '/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2'},
        ],
        'versions': ['2.28.3', '2.28.9'],
    }
    assert facts['torch'] == {'version': '2.11.0+cu130', 'cuda': '13.0', 'nccl': '2.28.9', 'device_count': 1}
    assert facts['python'] == {'version': '3.12.3', 'executable': '/opt/torch/.venv/bin/python3'}
    assert facts['cuda_toolkit'] == {'nvcc_version': '13.0', 'path': str(node['bin'] / 'nvcc')}
    assert facts['mpi'] == {'implementation': 'Open MPI', 'version': '4.1.6', 'path': str(node['bin'] / 'mpirun')}
    assert facts['nccl_tests'] == {'present': False, 'path': None}
    assert facts['net_plugins'] == [str(node['plugin'] / 'libnccl-net.so')]
    assert len(facts['infiniband']) == 8
    assert [p['device'] for p in facts['infiniband'] if p['state'] != 'ACTIVE'] == ['mlx5_5']
    assert [i['name'] for i in facts['interfaces']] == ['lo', 'eth0', 'eth1', 'ib0', 'eth2']
    assert (facts['nccl_socket_ifname'], facts['nccl_socket_ifname_reason']) == ('eth1', None)
    assert set(facts['shm']) == {'size_bytes', 'human'} and facts['shm']['size_bytes'] > 0
    assert facts['memlock'] == {'soft': 'unlimited', 'hard': 'unlimited'}
    assert facts['ip_local_port_range'] == [32768, 60999]
    assert facts['os'] == 'Ubuntu 24.04.3 LTS'
    assert facts['kernel'] == os.uname().release
    assert facts['unavailable'] == {'all_reduce_perf': 'not found in PATH or %s' % (node['tmp'] / 'nccl-tests' / 'build')}


def test_check_mode_and_cluster_ip_elsewhere(node, capsys):
    facts = facts_of(run_module(capsys, cluster_ip='10.0.0.99', python=node['python'], _ansible_check_mode=True))
    assert facts['nccl_socket_ifname'] is None
    assert facts['nccl_socket_ifname_reason'] == 'cluster_ip 10.0.0.99 is not assigned to any interface on this host'
    assert facts['nccl']['versions'] == ['2.28.3', '2.28.9']


def test_pip_show_fallback_when_the_probe_cannot_list_packages(node, capsys, tmp_path):
    probe = json.loads((COMM / 'nccl-mismatch' / 'torch-probe.json').read_text())
    probe['packages'] = None
    out = tmp_path / 'probe.json'
    out.write_text(json.dumps(probe))
    python = script(node['bin'] / 'python-old', 'case "$1" in -c) cat %s ;; -m) cat %s ;; esac'
                    % (out, COMM / 'nccl-mismatch' / 'pip-show-cu12-cu13.txt'))
    facts = facts_of(run_module(capsys, python=python))
    assert [(s['source'], s['path_or_package'], s['version']) for s in facts['nccl']['sources'][1:]] == [
        ('pip', 'nvidia-nccl-cu12', '2.27.3'), ('pip', 'nvidia-nccl-cu13', '2.28.9'),
        ('torch', '/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2', '2.27.3')]
    assert facts['nccl']['versions'] == ['2.27.3', '2.28.3', '2.28.9']
    assert facts['torch']['cuda'] == '12.8'
    assert 'pip' not in facts['unavailable']
    assert facts['nccl_socket_ifname_reason'] == 'cluster_ip not given'


def test_unversioned_system_library_is_asked_for_its_version(node, capsys):
    # A file named libnccl.so.2 only (pip-style or vendor copy): the ctypes probe runs; this one is no ELF, so it fails cleanly.
    (node['lib'] / 'libnccl.so.2').unlink()
    (node['lib'] / 'libnccl.so.2').write_text('not a library')
    (node['lib'] / 'libnccl.so').unlink()
    facts = facts_of(run_module(capsys, python=node['python']))
    system = [s for s in facts['nccl']['sources'] if s['source'] == 'system']
    assert system == [{'source': 'system', 'version': None, 'path_or_package': str(node['lib'] / 'libnccl.so.2')},
                      {'source': 'system', 'version': '2.28.3', 'path_or_package': str(node['lib'] / 'libnccl.so.2.28.3')}]
    reason = facts['unavailable']['nccl_version:%s' % (node['lib'] / 'libnccl.so.2')]
    assert reason.startswith('%s exited 1' % os.path.basename(sys.executable))


def test_no_tools_no_torch(node, capsys, monkeypatch, tmp_path):
    """A slim image: no ldconfig, ip, mpirun, nvcc; python without torch; nothing fails."""
    real_get_bin_path = AnsibleModule.get_bin_path

    def get_bin_path(self, arg, required=False, opt_dirs=None):
        return None if arg in ('ldconfig', 'ip', 'mpirun', 'nvcc', 'all_reduce_perf') else real_get_bin_path(self, arg, required, opt_dirs)

    monkeypatch.setattr(AnsibleModule, 'get_bin_path', get_bin_path)
    monkeypatch.setattr(comm_discovery, 'LIBRARY_DIRS', [])
    monkeypatch.setattr(comm_discovery, 'PROC_LIMITS', str(COMM / 'missing-tools' / 'proc-limits-8MiB.txt'))
    monkeypatch.setattr(comm_discovery, 'SYSFS_ROOT', str(tmp_path / 'empty-sysfs'))
    facts = facts_of(run_module(capsys, cluster_ip='10.0.0.5'))
    assert facts['torch'] is None
    assert facts['python'] == {'version': '%d.%d.%d' % sys.version_info[:3], 'executable': sys.executable}
    assert facts['nccl'] == {'sources': [], 'versions': []}
    assert (facts['cuda_toolkit'], facts['mpi'], facts['infiniband'], facts['interfaces'], facts['net_plugins']) == (None, None, [], [], [])
    assert facts['nccl_socket_ifname'] is None and facts['nccl_socket_ifname_reason'] == 'no interfaces could be listed'
    assert facts['memlock'] == {'soft': 8388608, 'hard': 8388608}
    assert set(facts['unavailable']) == {'torch', 'ldconfig', 'nccl', 'nvcc', 'mpirun', 'ip', 'all_reduce_perf'}
    assert facts['unavailable']['torch'] == "ModuleNotFoundError: No module named 'torch'"
    assert facts['unavailable']['ip'].startswith('not found in PATH or /sbin, /usr/sbin; interfaces read from /sys/class/net')


def test_ip_without_json_falls_back_to_sysfs(node, capsys):
    script(node['bin'] / 'ip', 'cat %s >&2; exit 255' % (COMM / 'missing-tools' / 'ip-j-unknown.stderr'))
    facts = facts_of(run_module(capsys, cluster_ip='10.0.0.5', python=node['python']))
    assert facts['unavailable']['ip'] == ('ip exited 255: Option "-j" is unknown, try "ip -help".; interfaces read from '
                                          '/sys/class/net and %s (IPv4: primary address only)' % comm_discovery.IF_INET6)
    eth1 = [i for i in facts['interfaces'] if i['name'] == 'eth1'][0]
    assert eth1 == {'name': 'eth1', 'state': 'UP', 'mtu': 9000, 'link_type': 'ether',
                    'addresses': ['10.0.0.5/24', 'fd00:10::5/64', 'fe80::fc:1ff:fe00:5/64']}
    assert facts['nccl_socket_ifname'] == 'eth1'


def test_missing_python_and_hanging_tools(node, capsys):
    script(node['bin'] / 'mpirun', 'sleep 30 &\nsleep 30\nexit 0')
    started = time.monotonic()
    facts = facts_of(run_module(capsys, python=str(node['tmp'] / 'no-such-python'), timeout=1))
    assert time.monotonic() - started < 15
    assert facts['torch'] is None
    assert facts['python'] == {'version': None, 'executable': str(node['tmp'] / 'no-such-python')}
    assert facts['unavailable']['python'] == '%s not found or not executable' % (node['tmp'] / 'no-such-python')
    assert facts['unavailable']['mpirun'] == 'mpirun timed out after 1s'
    assert facts['mpi'] is None
    assert facts['nccl']['sources'] == [{'source': 'system', 'version': '2.28.3', 'path_or_package': str(node['lib'] / 'libnccl.so.2.28.3')}]


def test_hanging_tool_whose_child_keeps_stdout_open(node, capsys):
    script(node['bin'] / 'mpirun', 'sleep 30 &\nsleep 30\nexit 0')  # a child that would keep stdout open
    started = time.monotonic()
    facts = facts_of(run_module(capsys, python=node['python'], timeout=1))
    assert time.monotonic() - started < 15
    assert facts['unavailable']['mpirun'] == 'mpirun timed out after 1s'
    assert facts['torch']['nccl'] == '2.28.9'


def test_hanging_torch_import(node, capsys):
    script(node['bin'] / 'python-hangs', 'sleep 30')
    facts = facts_of(run_module(capsys, python='python-hangs', timeout=1))
    assert facts['unavailable']['python'] == 'python-hangs timed out after 1s'
    assert facts['unavailable']['pip'] == 'python-hangs timed out after 1s'
    assert facts['python'] == {'version': None, 'executable': str(node['bin'] / 'python-hangs')}


def test_nccl_tests_path(node, capsys):
    build = node['tmp'] / 'nccl-tests' / 'build'
    build.mkdir(parents=True)
    perf = script(build / 'all_reduce_perf', 'exit 0')
    facts = facts_of(run_module(capsys, python=node['python'], nccl_tests_path=str(node['tmp'] / 'nccl-tests')))
    assert facts['nccl_tests'] == {'present': True, 'path': perf}
    facts = facts_of(run_module(capsys, python=node['python']))
    assert facts['nccl_tests'] == {'present': True, 'path': perf}
    facts = facts_of(run_module(capsys, python=node['python'], nccl_tests_path=str(node['tmp'])))
    assert facts['nccl_tests'] == {'present': False, 'path': None}
    assert facts['unavailable']['all_reduce_perf'] == 'not found in %s or its build/ directory' % node['tmp']


def test_bad_timeout(node, capsys):
    result = run_module(capsys, timeout=0)
    assert result['failed'] is True and result['msg'] == 'timeout must be at least 1 second'


def test_this_machine(capsys):
    """Unpatched, on whatever runs the tests: must finish quickly with the full shape."""
    started = time.monotonic()
    facts = facts_of(run_module(capsys, cluster_ip='127.0.0.1'))
    assert time.monotonic() - started < 30
    assert set(facts) == FACT_KEYS
    assert facts['nccl_socket_ifname'] == 'lo'
    assert facts['python']['executable'] == sys.executable


def test_recorded_result_on_a_real_h200_node():
    """The module's own output on a 1xH200 node of the h200x2 image (see fixtures/comm/README.md): same shape, real values."""
    result = json.loads((COMM / 'h200x1' / 'comm_facts-result.json').read_text())
    facts = facts_of(result)
    assert set(facts) == FACT_KEYS
    assert facts['nccl']['versions'] == ['2.28.3', '2.28.9']
    assert [s['source'] for s in facts['nccl']['sources']] == ['system', 'pip', 'torch']
    assert facts['torch'] == {'version': '2.11.0+cu130', 'cuda': '13.0', 'nccl': '2.28.9', 'device_count': 1}
    assert facts['mpi'] == {'implementation': 'Open MPI', 'version': '4.1.6', 'path': '/usr/bin/mpirun'}
    assert facts['nccl_socket_ifname'] == 'eth0'
    assert set(facts['unavailable']) == {'ip', 'all_reduce_perf'}
