# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The cluster inventory model and its validation, as pure functions.

A node record is {"host", "hostname", "short", "fqdn", "names", "cluster_ip", "rank"}; settings are the cluster-wide
variables as each host resolves them. Every error names the host and the variable and says how to fix it.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any, Callable, Iterable, Sequence

USER_NAME_RE = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
HOSTNAME_LABEL_RE = re.compile(r"^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$")
# Settings that must hold one value on every node: a per-host override of these breaks the cluster.
CLUSTER_WIDE = ("cluster_network", "cluster_master", "cluster_master_port", "cluster_user_name", "cluster_user_uid",
                "cluster_user_gid", "cluster_user_home", "cluster_nccl_port_range", "cluster_mpi_btl_ports", "cluster_mpi_oob_ports",
                "cluster_shared_dir")
PORT_RANGES = ("cluster_nccl_port_range", "cluster_mpi_btl_ports", "cluster_mpi_oob_ports")


# Where by_node found no value (None is a value).
_MISSING = object()


def _port_range(value: object) -> tuple[int, int] | None:
    """'lo-hi' -> (lo, hi) within 1024-65535, else None."""
    try:
        low, high = (int(part) for part in str(value).split("-"))
    except ValueError:
        return None
    return (low, high) if 1024 <= low <= high <= 65535 else None


def _check_ports(host: str, s: dict[str, Any]) -> list[str]:
    errors: list[str] = []
    ranges: dict[str, tuple[int, int]] = {}
    for var in PORT_RANGES:
        found = _port_range(s.get(var))
        if found is None:
            errors.append("%s: %s %r must be a port range lo-hi within 1024-65535, e.g. 50000-59999." % (host, var, s.get(var)))
        else:
            ranges[var] = found
    port = s.get("cluster_master_port")
    for var, (low, high) in ranges.items():
        if isinstance(port, int) and low <= port <= high:
            errors.append("%s: %s %s-%s contains cluster_master_port %s. Move one of them." % (host, var, low, high, port))
    names = sorted(ranges)
    for i, first in enumerate(names):
        for second in names[i + 1:]:
            if ranges[first][0] <= ranges[second][1] and ranges[second][0] <= ranges[first][1]:
                errors.append("%s: %s and %s overlap (%s-%s, %s-%s). Give each its own ports." % (
                    host, first, second, ranges[first][0], ranges[first][1], ranges[second][0], ranges[second][1]))
    return errors


def _unique(names: Iterable[str | None]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for name in names:
        if name and name.lower() not in seen:
            seen.add(name.lower())
            out.append(name)
    return out


def node_records(hostvars: dict[str, Any], hosts: Iterable[str]) -> list[dict[str, Any]]:
    """Return the node records of `hosts` (in rank order) from their inventory variables."""
    records = []
    for rank, host in enumerate(hosts):
        hv = hostvars[host]
        hostname = str(hv.get("cluster_hostname") or host)
        short = hostname.split(".", 1)[0]
        fqdn = hv.get("cluster_fqdn") or (hostname if "." in hostname else None)
        records.append({
            "host": host,
            "hostname": hostname,
            "short": short,
            "fqdn": fqdn,
            # For /etc/hosts and known_hosts: the canonical (fully qualified) name first.
            "names": _unique([fqdn, short, host]),
            "cluster_ip": hv.get("cluster_ip"),
            "rank": rank,
        })
    return records


def master_error(hosts: Sequence[str], master: str | None) -> str | None:
    """Why master cannot be the rendezvous master of hosts (group cluster, in inventory order), or None.

    master: cluster_master, a host of the group; None (or empty): the first host.
    """
    if not master or master in hosts:
        return None
    first = ", %s" % hosts[0] if hosts else ""
    return ("cluster_master %s is not a host of group cluster (%s). Set it to one of them, in group_vars for group "
            "'cluster', or leave it unset (null) for the first%s." % (master, ", ".join(hosts) or "no hosts", first))


def spare_errors(hosts: Sequence[str], spares: Sequence[str], masters: Iterable[str | None]) -> list[str]:
    """Why the spares (group cluster_spare) cannot stand by: each must be a host of group cluster too (the group is a child
    of it, so that every role converges it), the rendezvous master must not be one, and the world needs a node."""
    errors = ["%s: a host of group cluster_spare outside group cluster. Make cluster_spare a child group of cluster "
              "(children: cluster_spare under cluster), so that site.yml converges it like every node." % host
              for host in spares if host not in hosts]
    errors += ["cluster_master %s is a spare (group cluster_spare): the rendezvous master must be a node of the training "
               "world. Choose another, or take %s out of cluster_spare." % (master, master) for master in sorted(masters, key=str)
               if master in spares]
    if hosts and not [host for host in hosts if host not in spares]:
        errors.append("inventory: every host of group cluster is a spare (group cluster_spare): leave at least one node "
                      "outside cluster_spare to train on.")
    return errors


def rank_order(hosts: Iterable[str], master: str | None = None) -> list[str]:
    """The hosts in NODE_RANK order: the rendezvous master first (NODE_RANK 0: torchrun's static rendezvous makes that
    node host the store at MASTER_ADDR), then the others in the order given. master None (or empty): the first host.
    Raises ValueError, naming cluster_master and the hosts, when master is not one of them."""
    error = master_error(list(hosts), master)
    if error:
        raise ValueError(error)
    return [master] + [host for host in hosts if host != master] if master else list(hosts)


def _check_ip(node: dict[str, Any], network: ipaddress.IPv4Network | ipaddress.IPv6Network | None) -> list[str]:
    host, value = node["host"], node["cluster_ip"]
    if value in (None, ""):
        return ["%s: cluster_ip is not set. Set it in the inventory to the node's address on the training network." % host]
    try:
        address = ipaddress.ip_address(str(value))
    except ValueError:
        return ["%s: cluster_ip %r is not a valid IP address. Set it to the node's address on the training network, e.g. 10.0.0.11." % (host, value)]
    errors = []
    if address.is_loopback:
        errors.append("%s: cluster_ip %s is a loopback address; NCCL and torchrun would bind to it and peers could not connect. "
                      "Set it to the node's address on the training network." % (host, address))
    elif address.is_unspecified or address.is_multicast:
        errors.append("%s: cluster_ip %s cannot be a node address. Set it to the node's address on the training network." % (host, address))
    elif network is not None and address not in network:
        errors.append("%s: cluster_ip %s is outside cluster_network %s. Fix the address, or widen cluster_network in group_vars." % (host, address, network))
    return errors


def _storage_node_errors(server: object, address: object, its_network: str | None, network: str | None) -> list[str]:
    """cluster_nfs_server outside group cluster (a storage node): the nodes mount its export at its cluster_ip, and
    the roles that run there (its firewall) read the cluster's settings, which group_vars of group cluster do not
    give it (its_network: cluster_network as the storage node sees it)."""
    errors = []
    try:
        ipaddress.ip_address(str(address))
    except ValueError:
        found = "it has none" if address is None else "%r is not an IP address" % (address,)
        errors.append("cluster_nfs_server %s is a storage node outside group cluster, and the nodes mount its export at its "
                      "cluster_ip: %s. Set cluster_ip for %s in the inventory (its address that the nodes reach)." % (server, found, server))
    if its_network != network:
        errors.append("cluster_nfs_server %s is a storage node outside group cluster, and it does not see the cluster's settings "
                      "(cluster_network %s there, %s on the nodes). Set the cluster-wide settings in group_vars for group all "
                      "(or a group holding %s too), not only for group cluster." % (server, its_network or "unset", network, server))
    return errors


def _check_hostname(node: dict[str, Any]) -> list[str]:
    names = [node["hostname"]] + ([node["fqdn"]] if node["fqdn"] else [])
    bad = [n for n in names if not all(HOSTNAME_LABEL_RE.match(label) for label in n.split("."))]
    return ["%s: hostname %r is not a valid host name (letters, digits and '-', labels of 1-63). Set cluster_hostname or rename the host."
            % (node["host"], b) for b in bad]


def _duplicates(nodes: list[dict[str, Any]], key: Callable[[dict[str, Any]], Any], label: str, fix: str) -> list[str]:
    seen: dict[Any, list[str]] = {}
    for node in nodes:
        value = key(node)
        if value is not None:
            seen.setdefault(value, []).append(node["host"])
    return ["%s: %s %s is shared by %s. %s" % (hosts[1], label, value, ", ".join(hosts), fix)
            for value, hosts in sorted(seen.items(), key=lambda kv: str(kv[0])) if len(hosts) > 1]


def _check_settings(host: str, s: dict[str, Any]) -> tuple[list[str], ipaddress.IPv4Network | ipaddress.IPv6Network | None]:
    errors = []
    network: ipaddress.IPv4Network | ipaddress.IPv6Network | None
    try:
        network = ipaddress.ip_network(str(s.get("cluster_network")), strict=False)
    except ValueError:
        network = None
        errors.append("%s: cluster_network %r is not a CIDR network. Set it in group_vars, e.g. cluster_network: 10.0.0.0/24."
                      % (host, s.get("cluster_network")))
    port = s.get("cluster_master_port")
    if not isinstance(port, int) or isinstance(port, bool) or not 1024 <= port <= 65535:
        errors.append("%s: cluster_master_port %r must be an integer in 1024-65535 (unprivileged, like torchrun's default 29500)." % (host, port))
    name = s.get("cluster_user_name")
    if not isinstance(name, str) or not USER_NAME_RE.match(name) or name == "root":
        errors.append("%s: cluster_user_name %r is not a valid name for the training user (lowercase, starts with a letter or '_', "
                      "at most 32 characters, not root)." % (host, name))
    if not str(s.get("cluster_shared_dir", "/")).startswith("/"):
        errors.append("%s: cluster_shared_dir %r must be an absolute path." % (host, s.get("cluster_shared_dir")))
    errors.extend(_check_ports(host, s))
    sources = s.get("cluster_user_key_sources") or []
    for source in sources if isinstance(sources, list) else [sources]:
        try:
            ipaddress.ip_network(str(source), strict=False)
        except ValueError:
            errors.append("%s: cluster_user_key_sources entry %r is not an address or CIDR network (it goes into the cluster "
                          "key's from= in authorized_keys). List management hosts as addresses, e.g. [10.0.1.5, 10.0.2.0/24]."
                          % (host, source))
    for var in ("cluster_user_uid", "cluster_user_gid"):
        value = s.get(var)
        if not isinstance(value, int) or isinstance(value, bool) or not 1000 <= value <= 60000:
            errors.append("%s: %s %r must be an integer in 1000-60000 (a regular account's id, the same on every node)." % (host, var, value))
    return errors, network


def validate(nodes: list[dict[str, Any]], settings_by_host: dict[str, dict[str, Any]], spares: Sequence[str] | None = None) -> list[str]:
    """Return the list of inventory errors (empty when the inventory is sound).

    nodes: node records in rank order (see node_records); settings_by_host: {host: {variable: value}}; spares: the
    hosts of group cluster_spare.
    """
    if not nodes:
        return ["inventory: group 'cluster' has no hosts. List the training nodes under group 'cluster', the rendezvous master first."]
    errors: list[str] = []
    networks: dict[str, ipaddress.IPv4Network | ipaddress.IPv6Network | None] = {}
    for host, settings in settings_by_host.items():
        found, networks[host] = _check_settings(host, settings)
        errors.extend(found)
    for var in CLUSTER_WIDE:
        values: dict[str, list[str]] = {}
        for host, settings in settings_by_host.items():
            values.setdefault(str(settings.get(var)), []).append(host)
        if len(values) > 1:
            detail = "; ".join("%s on %s" % (v, ", ".join(h)) for v, h in values.items())
            errors.append("%s differs between nodes (%s). Set it once, in group_vars for group 'cluster'." % (var, detail))
    for node in nodes:
        errors.extend(_check_ip(node, networks.get(node["host"])))
        errors.extend(_check_hostname(node))
    hosts = {n["host"] for n in nodes}
    outside = {(s.get("cluster_nfs_server"), s.get("cluster_nfs_server_ip"), s.get("cluster_nfs_server_network"), s.get("cluster_network"))
               for s in settings_by_host.values() if s.get("cluster_nfs_server") not in hosts | {None}}
    for server, address, its_network, network in sorted(outside, key=str):
        errors.extend(_storage_node_errors(server, address, its_network, network))
    masters = {s.get("cluster_master") for s in settings_by_host.values()}
    errors.extend(error for error in (master_error([n["host"] for n in nodes], master) for master in sorted(masters, key=str))
                  if error)
    errors.extend(spare_errors([n["host"] for n in nodes], spares or [], masters))
    errors.extend(_duplicates(nodes, lambda n: n["cluster_ip"], "cluster_ip", "Give every node its own training address."))
    errors.extend(_duplicates(nodes, lambda n: n["short"].lower(), "hostname (short, case-insensitive)",
                              "Hostnames must be unique or NCCL and SSH reach the wrong node: set cluster_hostname on one of them."))
    return errors


def node_errors(node: dict[str, Any]) -> list[str]:
    """Read-only checks on one node that the inventory alone cannot answer.

    node: {"host", "cluster_ip", "addresses": [interface addresses], "passwd": getent passwd {name: [pw, uid, gid, ...]},
    "group": getent group {name: [pw, gid, ...]}, "user_name", "uid", "gid"}, and where they apply "port_range"
    (_port_range_errors), "nfs" (_nfs_errors) and "storage" (_storage_errors): what a container instance, a kernel
    without NFS or the storage a cluster brings cannot do, found before anything changes.
    """
    host, name = node["host"], node["user_name"]
    errors = []
    if node["cluster_ip"] not in node["addresses"]:
        errors.append("%s: cluster_ip %s is not an address of any interface here (it has %s). Fix cluster_ip in the inventory."
                      % (host, node["cluster_ip"], ", ".join(node["addresses"]) or "none"))
    uid_owner = [user for user, fields in node["passwd"].items() if str(fields[1]) == str(node["uid"]) and user != name]
    if uid_owner:
        errors.append("%s: cluster_user_uid %s already belongs to user %s here. Choose a uid that is free on every node, "
                      "or free it on %s." % (host, node["uid"], uid_owner[0], host))
    gid_owner = [group for group, fields in node["group"].items() if str(fields[1]) == str(node["gid"]) and group != name]
    if gid_owner:
        errors.append("%s: cluster_user_gid %s already belongs to group %s here. Choose a gid that is free on every node "
                      "(set cluster_user_gid)." % (host, node["gid"], gid_owner[0]))
    existing = node["passwd"].get(name)
    if existing and str(existing[1]) != str(node["uid"]):
        errors.append("%s: user %s exists with uid %s, not cluster_user_uid %s. Set cluster_user_uid to match, or fix the "
                      "account on %s." % (host, name, existing[1], node["uid"], host))
    errors += _port_range_errors(host, node.get("port_range"))
    errors += _nfs_errors(host, node.get("nfs"))
    errors += _storage_errors(host, node.get("storage"), node["uid"], node["gid"])
    return errors


def _port_range_errors(host: str, port_range: dict[str, Any] | None) -> list[str]:
    """port_range: {writable, live ("32768\t60999"), wanted ("50000-59999")}, or None where it is not pinned."""
    if not port_range or port_range["writable"] or port_range["live"].split() == port_range["wanted"].split("-"):
        return []
    return ["%s: net.ipv4.ip_local_port_range cannot be set here (/proc/sys is read-only: a container?); it is %s, not "
            "cluster_nccl_port_range %s. Set firewall_pin_port_range: false for %s to keep its own range and open it to the "
            "cluster in the firewall instead." % (host, "-".join(port_range["live"].split()), port_range["wanted"], host)]


def _kernel_has(nfs: dict[str, Any], name: str) -> bool:
    """Whether the kernel has file system name: loaded, as a module, or built in."""
    return (name in nfs["filesystems"] or any(m.split(".ko")[0] == name for m in nfs["modules"])
            or ("/%s.ko" % name) in (nfs.get("builtin") or ""))


def nfs_kernel_errors(kernel: dict[str, Any]) -> list[str]:
    """What the kernel of a host that serves or mounts NFS lacks, for a host with no node record: a storage node
    outside group cluster. kernel: {host, server, client, filesystems, modules, builtin}, as _nfs_errors reads it."""
    return _nfs_errors(kernel["host"], kernel)


def _nfs_errors(host: str, nfs: dict[str, Any] | None) -> list[str]:
    """nfs: {server (this node serves with the kernel backend), client (it mounts the export), filesystems (of
    /proc/filesystems), modules (file names of nfsd/nfs modules found), builtin (modules.builtin's text)}, or None."""
    if not nfs:
        return []
    errors = []
    if nfs["server"] and not _kernel_has(nfs, "nfsd"):
        errors.append("%s: nfs_server_backend kernel needs the kernel's NFS server, which this kernel lacks (no nfsd in "
                      "/proc/filesystems or its modules). Set nfs_server_backend: ganesha (user space), or nfs_enabled: false "
                      "to use shared storage that is already mounted at cluster_shared_dir." % host)
    if nfs["client"] and not (_kernel_has(nfs, "nfs") or _kernel_has(nfs, "nfs4")):
        errors.append("%s: nfs_mount_state mounted needs the kernel's NFS client, which this kernel lacks (no nfs in "
                      "/proc/filesystems or its modules). Set nfs_mount_state: present (fstab only), or nfs_enabled: false "
                      "to use shared storage that is already mounted at cluster_shared_dir." % host)
    return errors


def _containing_mount(path: str, mounts: dict[str, Any]) -> tuple[str | None, Any]:
    """(mount point, its mount facts) of the mount that holds path: the longest mount point above it."""
    found = [(point, info) for point, info in mounts.items() if path == point or path.startswith(point.rstrip("/") + "/")]
    return max(found, key=lambda item: len(item[0]), default=(None, None))


def _gib(size: int) -> str:
    """Bytes as GiB with one decimal, the exact figure beside it: '3.2 GiB (3435973836 bytes)'."""
    return "%.1f GiB (%d bytes)" % (size / 2 ** 30, size)


def _storage_errors(host: str, storage: dict[str, Any] | None, uid: object, gid: object) -> list[str]:
    """storage: {path, stat (the stat module's), mounts (mount_facts' mount_points), min_free_bytes} of storage that the
    cluster brings (nfs_enabled: false), or None. The training user's uid and gid need not exist yet: its write
    permission is read from the directory's owner and mode (an ACL is not read: the round trip after these checks
    writes for real). The free space is the containing mount's (statvfs, what an unprivileged user may use); not
    judged where mount_facts could not read it (it warned then)."""
    if not storage:
        return []
    path, stat = storage["path"], storage["stat"]
    if not stat.get("exists"):
        return ["%s: cluster_shared_dir %s does not exist here. With nfs_enabled: false the shared storage is the "
                "cluster's own: mount it at %s on every node, set cluster_shared_dir to where it is mounted, or set "
                "nfs_enabled: true to serve it from cluster_nfs_server." % (host, path, path)]
    if not stat.get("isdir"):
        return ["%s: cluster_shared_dir %s is not a directory. Set cluster_shared_dir to a directory of the shared "
                "storage." % (host, path)]
    errors = []
    point, mount = _containing_mount(path, storage.get("mounts") or {})
    if mount and "ro" in str(mount.get("options", "")).split(","):
        errors.append("%s: %s is on a read-only mount (%s at %s, %s): checkpoints and logs cannot be written there. "
                      "Remount it read-write on %s, or set cluster_shared_dir to writable shared storage."
                      % (host, path, mount.get("device"), point, mount.get("fstype"), host))
    free, minimum = (mount or {}).get("size_available"), storage.get("min_free_bytes")
    if free is not None and minimum and free < minimum:
        errors.append("%s: only %s free in %s (%s at %s), below validate_storage_min_free_bytes %s: checkpoints and logs "
                      "need room. Free space on the storage, set cluster_shared_dir to storage with room, or lower "
                      "validate_storage_min_free_bytes." % (host, _gib(free), path, mount.get("device"), point, _gib(minimum)))
    mode = int(str(stat["mode"]), 8)
    owner, group = str(stat["uid"]), str(stat["gid"])
    if not ((owner == str(uid) and mode & 0o200) or (group == str(gid) and mode & 0o020) or mode & 0o002):
        errors.append("%s: the training user (uid %s) cannot write to %s: it belongs to %s:%s, mode %s. Give it to the "
                      "training user on the storage (chown %s:%s %s), or set cluster_shared_dir to a directory of the "
                      "share that it owns." % (host, uid, path, owner, group, stat["mode"], uid, gid, path))
    return errors


def storage_round_trip_errors(trip: dict[str, Any]) -> list[str]:
    """The round trip on storage the cluster brings, for one node: it wrote a file as the training user's uid,
    read the first node's, and removed its own. trip: {host, first, path, uid, written, write_error, seen,
    first_wrote, removed, remove_error}."""
    host, path = trip["host"], trip["path"]
    errors = []
    if not trip["written"]:
        errors.append("%s: the training user (uid %s) cannot create files in %s: %s. Give the directory to it on the "
                      "storage, or set cluster_shared_dir to a directory of the share that it owns."
                      % (host, trip["uid"], path, (trip["write_error"] or "failed").strip()))
    elif not trip["removed"]:
        errors.append("%s: the training user (uid %s) can create files in %s but not remove them: %s. Checkpoint "
                      "rotation needs both." % (host, trip["uid"], path, (trip["remove_error"] or "failed").strip()))
    if trip["first_wrote"] and not trip["seen"]:
        errors.append("%s: %s is not the storage that %s wrote to: a file written there on %s is not seen here (a "
                      "local directory, or another filesystem). Mount the same shared filesystem at %s on every node."
                      % (host, path, trip["first"], trip["first"], path))
    return errors


def by_node(nodes: Iterable[str], hostvars: Any, path: str | Iterable[Any], default: Any = None) -> dict[str, Any]:
    """{node: hostvars[node][path...]} for each node, default where the value is not there.

    path: a variable name, or a list of keys into it (["ansible_facts", "trainops_gpu", "gpu_count"]). Replaces the
    zip/extract idiom, which needs a default per level and reads as a riddle. A value that is there but null stays null.
    """
    keys = [path] if isinstance(path, str) else list(path)
    found: dict[str, Any] = {}
    for node in nodes:
        value: Any = hostvars[node] if node in hostvars else _MISSING
        for key in keys:
            try:
                value = value[key] if value is not _MISSING and value is not None else _MISSING
            except (KeyError, TypeError, IndexError):
                value = _MISSING
        found[node] = default if value is _MISSING else value
    return found
