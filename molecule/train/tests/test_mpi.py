"""Open MPI's own wiring through the firewall: mpirun's daemons listen only on the pinned out-of-band ports, on Open
MPI 5 too, whose runtime (PRRTE) reads neither openmpi-mca-params.conf nor OMPI_MCA_* for them, so an mpirun across
every node with no --mca of its own passes the nodes' firewalls."""

import re
import shlex
import time

import pytest
from testbed_fixtures import CLUSTER

OMPI = "/etc/openmpi/openmpi-mca-params.conf"
PRTE = "/etc/openmpi/prte-mca-params.conf"
OUT = "/tmp/trainops-test-mpirun.out"


def oob_params(text):
    return dict(re.findall(r"^(oob_\w+) = (.*)$", text, re.M))


def test_the_runtime_reads_the_out_of_band_settings_from_its_own_file_and_launch_env(node):
    for name in CLUSTER:
        ompi = oob_params(node(name).file(OMPI).content_string)
        assert "oob_tcp_dynamic_ipv4_ports" in ompi and oob_params(node(name).file(PRTE).content_string) == ompi, name
        env = node(name).file("/etc/trainops/launch.env").content_string
        for key, value in ompi.items():
            assert "\nPRTE_MCA_%s=%s\n" % (key, value) in env, (name, key)


def listening(host, program):
    """The TCP ports a program listens on (ss names the process)."""
    lines = host.check_output("ss -ltnpH").splitlines()
    return {int(line.split()[3].rsplit(":", 1)[1]) for line in lines if '"%s"' % program in line}


def mpirun(node, seconds):
    """Starts an mpirun across every node as the training user on node1, with no --mca of its own: the nodes' own
    files must pin the ports, as for a user's mpirun. Its ranks wait a few seconds, so its daemons are seen listening.
    A login shell: in a directory it cannot read (root's home) PRRTE 3.0 dies of SIGSEGV."""
    command = "timeout %d mpirun --tag-output -np %d -H %s sh -c 'sleep 6; hostname'" % (
        seconds, len(CLUSTER), ",".join("%s:1" % name for name in CLUSTER))
    node("node1").check_output("rm -f {out}; (su - train -c {cmd} >{out} 2>&1 </dev/null; echo rc=$? >>{out}) "
                               ">/dev/null 2>&1 &".format(out=OUT, cmd=shlex.quote(command)))


def mpirun_output(node, seconds):
    deadline = time.monotonic() + seconds + 10
    while "rc=" not in node("node1").file(OUT).content_string and time.monotonic() < deadline:
        time.sleep(2)
    return node("node1").file(OUT).content_string


def open_mpi_5(node):
    """Open MPI 5 (Debian 13) has PRRTE; on Open MPI 4 the ladder's mpirun proves the wiring through the firewall."""
    if node("node1").run("command -v prterun").rc != 0:
        pytest.skip("Open MPI 4: no PRRTE here (the verify ladder's mpirun covers its wiring)")


def test_mpirun_across_every_node_passes_the_firewall_its_runtime_on_the_pinned_ports(node):
    open_mpi_5(node)
    low, high = map(int, oob_params(node("node1").file(PRTE).content_string)["oob_tcp_dynamic_ipv4_ports"].split("-"))
    mpirun(node, 90)
    deadline = time.monotonic() + 30
    daemon = set()
    while time.monotonic() < deadline and not daemon:
        time.sleep(1)
        daemon = listening(node("node2"), "prted") or listening(node("node2"), "orted")
    runtime = listening(node("node1"), "prterun") or listening(node("node1"), "mpirun")
    out = mpirun_output(node, 90)
    assert out.rstrip().endswith("rc=0"), out[-2000:]
    assert sorted(re.findall(r"^\[[^]]*\]<stdout>: ?(\S+)$", out, re.M)) == sorted(CLUSTER), out[-2000:]
    # The out-of-band listeners, which the other nodes' daemons connect to; the others (PMIx's, for the ranks and
    # tools on the node itself) take any port.
    for name, ports in (("node1 runtime", runtime), ("node2 daemon", daemon)):
        assert any(low <= port <= high for port in ports), (name, sorted(ports), low, high)


def test_without_the_runtimes_own_file_its_ports_are_not_pinned(node):
    """What the runtime's own file is for: without it Open MPI 5's runtime listens on ports of the kernel's choosing
    (openmpi-mca-params.conf, which stays, is not read for them), which the firewall may or may not let through: its
    daemons then reach mpirun only where an address and an open range happen to meet. Open MPI 4 reads
    openmpi-mca-params.conf."""
    open_mpi_5(node)
    low, high = map(int, oob_params(node("node1").file(PRTE).content_string)["oob_tcp_dynamic_ipv4_ports"].split("-"))
    for name in CLUSTER:
        node(name).check_output("mv %s %s.test", PRTE, PRTE)
    runtime = set()
    try:
        mpirun(node, 20)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not runtime:
            time.sleep(1)
            runtime = listening(node("node1"), "prterun") or listening(node("node1"), "mpirun")
        mpirun_output(node, 20)
    finally:
        for name in CLUSTER:
            node(name).check_output("mv %s.test %s", PRTE, PRTE)
            # timeout ends mpirun's wait, not its runtime: mpirun (prterun), its ssh and the daemons it started stay,
            # holding ports. Only the training user's MPI runtime is ended.
            node(name).run("pkill -KILL -u train -x prterun; pkill -KILL -u train -f 'prterun-node1-[0-9]+@'")
    assert runtime and not any(low <= port <= high for port in runtime), (sorted(runtime), low, high)
