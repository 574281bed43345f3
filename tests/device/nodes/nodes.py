# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The Python half of tests/device/nodes/cluster, for what the GPU test machine has no tool for: the training
network (pyroute2; no iproute2 there) and SSH keys (cryptography, which ansible-core needs anyway; no ssh-keygen).

  nodes.py up BRIDGE CIDR PID...   a bridge holding CIDR (the controller's address); for each node process PID a veth
                                  pair, one end on the bridge, the other (named n<index>) in PID's network namespace
  nodes.py node END IFNAME CIDR    run inside a node (nsenter -n): its veth end END renamed IFNAME, holding CIDR, up; lo up
  nodes.py down BRIDGE             remove the bridge and the veth pairs
  nodes.py key PATH                an Ed25519 key pair in OpenSSH format, PATH and PATH.pub
  nodes.py slow IFNAME DST RATE    run inside a node: what IFNAME sends to address DST held to RATE (an HTB class and
                                  a u32 filter; the rest is not shaped): one slow link between two nodes
"""

import ipaddress
import os
import sys

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from pyroute2 import IPRoute


def up(bridge, cidr, pids):
    iface = ipaddress.ip_interface(cidr)
    with IPRoute() as ipr:
        if not ipr.link_lookup(ifname=bridge):
            ipr.link("add", ifname=bridge, kind="bridge")
        br = ipr.link_lookup(ifname=bridge)[0]
        ipr.addr("replace", index=br, address=str(iface.ip), prefixlen=iface.network.prefixlen)
        ipr.link("set", index=br, state="up")
        for number, pid in enumerate(pids, 1):
            host_end = "%s-%d" % (bridge[:10], number)
            # A node of an earlier cluster whose namespace lingers: deleting this end deletes its peer too.
            for index in ipr.link_lookup(ifname=host_end):
                ipr.link("del", index=index)
            ipr.link("add", ifname=host_end, kind="veth", peer="n%d" % number)
            ipr.link("set", index=ipr.link_lookup(ifname="n%d" % number)[0], net_ns_pid=int(pid))
            ipr.link("set", index=ipr.link_lookup(ifname=host_end)[0], master=br, state="up")


def node(end, ifname, cidr):
    iface = ipaddress.ip_interface(cidr)
    with IPRoute() as ipr:
        ipr.link("set", index=ipr.link_lookup(ifname="lo")[0], state="up")
        index = ipr.link_lookup(ifname=end)[0]
        if end != ifname:
            ipr.link("set", index=index, ifname=ifname)
        ipr.addr("replace", index=index, address=str(iface.ip), prefixlen=iface.network.prefixlen)
        ipr.link("set", index=index, state="up")


def down(bridge):
    with IPRoute() as ipr:
        for link in ipr.get_links():
            if link.get_attr("IFLA_IFNAME") == bridge or link.get_attr("IFLA_IFNAME").startswith(bridge[:10] + "-"):
                ipr.link("del", index=link["index"])


def slow(ifname, dst, rate):
    with IPRoute() as ipr:
        index = ipr.link_lookup(ifname=ifname)[0]
        # IPv4 (ETH_P_IP) to dst goes to class 1:1; unclassified traffic (the default class 1:ff does not exist) leaves unshaped.
        ipr.tc("add", "htb", index, 0x10000, default=0xFF)
        ipr.tc("add-class", "htb", index, 0x10001, parent=0x10000, rate=rate, ceil=rate, burst=64 * 1024, cburst=64 * 1024, prio=1)
        key = "0x%08x/0xffffffff+16" % int(ipaddress.ip_address(dst))
        ipr.tc("add-filter", "u32", index, parent=0x10000, prio=1, protocol=0x0800, target=0x10001, keys=[key])


def key(path):
    private = ed25519.Ed25519PrivateKey.generate()
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as out:
        out.write(private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()))
    with open(path + ".pub", "wb") as out:
        out.write(private.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH) + b"\n")


if __name__ == "__main__":
    command, args = sys.argv[1], sys.argv[2:]
    {"up": lambda: up(args[0], args[1], args[2:]), "node": lambda: node(*args), "down": lambda: down(*args), "key": lambda: key(*args),
     "slow": lambda: slow(*args)}[command]()
