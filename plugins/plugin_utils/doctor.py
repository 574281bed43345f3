# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The doctor's checks as pure functions over what was read from the nodes.

Each check returns findings {check, node, status ("ok", "warn" or "fail"), detail, fix}; a check with nothing
wrong returns one "ok" finding per node it looked at, so the report shows who was checked.
"""

from __future__ import annotations

import ipaddress
from typing import Any, Collection, Iterable

from ansible_collections.trainops.cluster.plugins.module_utils.gpu import APPLICATION_XIDS, OUT_OF_SERVICE_XIDS
from ansible_collections.trainops.cluster.plugins.plugin_utils import gpu_health, inventory, storage_peers
from ansible_collections.trainops.cluster.plugins.plugin_utils import slurm as slurm_state

CHECKS = ("reachable", "versions", "names", "ssh", "interface", "ranks", "ports", "limits", "storage", "plan", "gpus",
          "slurm", "stacks")
# What lets root read the ranks' stacks where the kernel gives no reason of its own (py-spy failed all the same).
STACKS_FIX = "Grant root CAP_SYS_PTRACE (a container: --cap-add SYS_PTRACE) and keep kernel.yama.ptrace_scope at 2 or less."


# The advice with a slow read of the shared storage (the warning itself says it too, for validation's output).
READ_FIX = ("Stage datasets on local disk (a node-local directory) before training; raise the storage's throughput, or set "
            "validate_storage_min_read_mbps to what it is meant to give.")


def finding(check: str, node: str | None, status: str, detail: str, fix: str = "") -> dict[str, Any]:
    return {"check": check, "node": node, "status": status, "detail": detail, "fix": fix}


def _ok(check: str, nodes: Iterable[str], detail: str = "ok") -> list[dict[str, Any]]:
    return [finding(check, node, "ok", detail) for node in nodes]


def reachable(nodes: Iterable[str], unreachable: Collection[str]) -> list[dict[str, Any]]:
    return [finding("reachable", n, "fail", "unreachable from the controller; the checks below skip it",
                    "Power it on or fix the management network/SSH; the other nodes were still checked.")
            if n in unreachable else finding("reachable", n, "ok", "reachable") for n in nodes]


def versions(comparison: dict[str, Any], checked: Collection[str]) -> list[dict[str, Any]]:
    """Drift rows as findings; a node that could not be read (already named by `reachable`) is not an odd one."""
    out = []
    for row in comparison["rows"]:
        if row["consistent"] or row["severity"] == "ignore":
            continue
        status = "fail" if row["severity"] == "critical" else "warn"
        majority = row.get("majority")
        for host in (h for h in row["odd_hosts"] if h in checked):
            detail = "%s is %s%s" % (row["key"], row["values"].get(host), ", others %s" % majority if majority is not None else "")
            out.append(finding("versions", host, status, detail, "Install the same %s on every node (or run one image)." % row["key"]))
    return out or _ok("versions", comparison["hosts"], "same versions")


def names(nodes: list[dict[str, Any]], resolved: dict[str, dict[str, str | None]], hostnames: dict[str, str | None]) -> list[dict[str, Any]]:
    """nodes: node records; resolved: {src: {name: address or None}}; hostnames: {node: `hostname` output}."""
    out = []
    fix = "Run site.yml (role hosts) to rewrite the managed /etc/hosts block and the hostname."
    expected = {name: n["cluster_ip"] for n in nodes for name in n["names"]}
    owners: dict[str, list[str]] = {}
    for n in nodes:
        actual = hostnames.get(n["host"])
        if actual is not None:
            owners.setdefault(actual.split(".", 1)[0].lower(), []).append(n["host"])
    for n in nodes:
        src = n["host"]
        if src not in resolved:
            continue
        problems = []
        for name, address in sorted(resolved[src].items()):
            if address is None:
                problems.append("cannot resolve %s" % name)
            elif address.startswith("127.") or address == "::1":
                problems.append("resolves %s to loopback %s" % (name, address))
            elif address != expected.get(name):
                problems.append("resolves %s to %s, not %s" % (name, address, expected.get(name)))
        actual = hostnames.get(src)
        if actual is not None and actual.split(".", 1)[0].lower() != n["short"].lower():
            problems.append("its hostname is %s, not %s" % (actual, n["short"]))
        same = [h for h in owners.get((actual or "").split(".", 1)[0].lower(), []) if h != src]
        if same:
            problems.append("has the same hostname (%s) as %s" % (actual, ", ".join(same)))
        out.append(finding("names", src, "fail", "; ".join(problems), fix) if problems else finding("names", src, "ok", "all names resolve"))
    return out


def ssh(summary: dict[str, Any], nodes: Iterable[str]) -> list[dict[str, Any]]:
    fix = "Run site.yml (role cluster_user) to restore the cluster key, authorized_keys and known_hosts."
    failed: dict[str, list[str]] = {}
    for item in summary["failures"]:
        failed.setdefault(item["from"], []).append("-> %s (%s): %s" % (item["to"], item["via"], item["error"]))
    rows = {row[0]: row[1:] for row in summary["rows"]}
    return [finding("ssh", n, "fail", "; ".join(failed[n]), fix) if n in failed else finding("ssh", n, "ok", _ssh_proof(rows[n]))
            for n in nodes if n in rows]


def _ssh_proof(cells: list[str]) -> str:
    """What an ok row proved: logins, or (above the mesh's full size) configuration for the pairs not logged in."""
    logins, local = cells.count("ok"), cells.count("ok*")
    if not local:
        return "logs into every node (%d)" % logins
    return ("logs into %d nodes; %d more checked without a login (name -> training address, known_hosts; the port matrix "
            "connects to their port 22)" % (logins, local))


def users(nodes: Iterable[str], accounts: dict[str, list[Any] | None], user: dict[str, Any]) -> list[dict[str, Any]]:
    """accounts: {node: the training user's getent passwd fields [password, uid, gid, gecos, home, shell], or None};
    user: {name, uid, gid} from the inventory."""
    fix = ("Give %(name)s uid %(uid)s and gid %(gid)s on that node (usermod -u, groupmod -g, then chown its files): "
           "site.yml refuses to run until then." % user)
    out = []
    for node in nodes:
        fields = accounts.get(node)
        if not fields:
            out.append(finding("user", node, "fail", "no user %s" % user["name"], "Run site.yml (role cluster_user)."))
        elif (int(fields[1]), int(fields[2])) != (int(user["uid"]), int(user["gid"])):
            out.append(finding("user", node, "fail", "%s is uid %s gid %s, not %s:%s (cluster_user_uid, cluster_user_gid): its files "
                               "on shared storage belong to someone else on the other nodes"
                               % (user["name"], fields[1], fields[2], user["uid"], user["gid"]), fix))
        else:
            out.append(finding("user", node, "ok", "%s is %s:%s" % (user["name"], fields[1], fields[2])))
    return out


def interface(node: str, env: dict[str, str], interfaces: list[dict[str, Any]], cluster_ip: str,
              infiniband: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """env: the node's launch.env; interfaces: [{name, addresses}]; infiniband: [{device, port, state}]."""
    fix = "Run site.yml (role launch) to set NCCL_SOCKET_IFNAME to the interface holding cluster_ip."
    name = env.get("NCCL_SOCKET_IFNAME")
    if not name:
        return [finding("interface", node, "fail", "launch.env sets no NCCL_SOCKET_IFNAME", fix)]
    by_name = {i["name"]: i for i in interfaces}
    holder = [i["name"] for i in interfaces if any(a.split("/")[0] == cluster_ip for a in i.get("addresses", []))]
    out = []
    if name not in by_name:
        out.append(finding("interface", node, "fail", "NCCL_SOCKET_IFNAME=%s: no such interface (cluster_ip %s is on %s)"
                           % (name, cluster_ip, ", ".join(holder) or "no interface"), fix))
    elif name not in holder:
        out.append(finding("interface", node, "fail", "NCCL_SOCKET_IFNAME=%s does not hold cluster_ip %s (%s does)"
                           % (name, cluster_ip, ", ".join(holder) or "no interface"), fix))
    for held in holder:
        # An interface set down keeps its address: the checks above pass, and every path to and from the node times out.
        state = str(by_name[held].get("state") or "").upper()
        if state in ("DOWN", "LOWERLAYERDOWN", "NOTPRESENT", "DORMANT"):
            out.append(finding("interface", node, "fail", "%s is %s (it holds cluster_ip %s): every path to and from %s times out"
                               % (held, state, cluster_ip, node), "Bring the link up (ip link set %s up; cable, switch port)." % held))
    down = ["%s:%s %s" % (p["device"], p["port"], p.get("state")) for p in infiniband if "ACTIVE" not in str(p.get("state", "")).upper()]
    if down:
        out.append(finding("interface", node, "fail", "InfiniBand/RoCE ports not active: %s" % ", ".join(down),
                           "Check cables and the subnet manager (ibstat); NCCL falls back to slow sockets or hangs."))
    return out or [finding("interface", node, "ok", "NCCL_SOCKET_IFNAME=%s holds %s" % (name, cluster_ip))]


def ranks(nodes: list[dict[str, Any]], envs: dict[str, dict[str, str] | None], nproc: dict[str, int | None], port: int,
          listening: str | None, master: str | None = None, spares: Collection[str] = ()) -> list[dict[str, Any]]:
    """envs: {node: launch.env dict or None; absent: not checked}; nproc: {node: expected processes, None when unknown};
    listening: master port holder or None; master: the rendezvous master (cluster_master), None for the first node;
    spares: the hosts of group cluster_spare. The master has NODE_RANK 0, the others follow in inventory order
    (inventory.rank_order), the spares after them, outside the world (NNODES and WORLD_SIZE count the others alone).
    WORLD_SIZE is judged only when every node's processes are known."""
    fix = "Run site.yml (role launch) to rewrite launch.env."
    world_nodes = [n for n in nodes if n["host"] not in spares]
    order = inventory.rank_order([n["host"] for n in world_nodes], master) + [n["host"] for n in nodes if n["host"] in spares]
    rank = {host: index for index, host in enumerate(order)}
    head = next(n for n in nodes if n["host"] == order[0])
    out = []
    seen: dict[str | None, list[str]] = {}
    for n in nodes:
        env = envs.get(n["host"])
        if env is None:
            continue
        seen.setdefault(env.get("NODE_RANK"), []).append(n["host"])
    known = [nproc.get(n["host"]) for n in world_nodes]
    world = sum(count or 0 for count in known) if None not in known else None
    for n in nodes:
        host, env = n["host"], envs.get(n["host"])
        if env is None:
            if host in envs:
                out.append(finding("ranks", host, "fail", "no launch environment (%s missing)" % "launch.env", fix))
            continue
        problems = []
        if env.get("NODE_RANK") != str(rank[host]):
            others = [h for h in seen.get(env.get("NODE_RANK"), []) if h != host]
            problems.append("NODE_RANK=%s, expected %d%s" % (env.get("NODE_RANK"), rank[host], " (also on %s)" % ", ".join(others) if others else ""))
        addr = env.get("MASTER_ADDR", "")
        try:
            loopback = ipaddress.ip_address(addr).is_loopback
        except ValueError:
            loopback = addr == "localhost"
        if loopback:
            problems.append("MASTER_ADDR=%s is loopback: every node would wait for itself" % addr)
        elif addr != head["cluster_ip"]:
            problems.append("MASTER_ADDR=%s, expected %s (%s)" % (addr, head["cluster_ip"], head["host"]))
        if env.get("MASTER_PORT") != str(port):
            problems.append("MASTER_PORT=%s, expected %s" % (env.get("MASTER_PORT"), port))
        if env.get("NNODES") != str(len(world_nodes)):
            problems.append("NNODES=%s, expected %d" % (env.get("NNODES"), len(world_nodes)))
        if env.get("NPROC_PER_NODE") != str(nproc.get(host)):
            problems.append("NPROC_PER_NODE=%s, expected %s" % (env.get("NPROC_PER_NODE"), nproc.get(host)))
        if world is not None and env.get("WORLD_SIZE") != str(world):
            problems.append("WORLD_SIZE=%s, the GPUs add up to %d" % (env.get("WORLD_SIZE"), world))
        placed = ("spare: NODE_RANK %s, outside the world until a job's restart brings it in" if host in spares else "rank %s") % rank[host]
        out.append(finding("ranks", host, "fail", "; ".join(problems), fix) if problems else finding("ranks", host, "ok", placed))
    if listening:
        out.append(finding("ranks", head["host"], "warn", "master port %s is in use on %s: %s" % (port, head["host"], listening),
                           "A job (or a stale one) holds the rendezvous port; stop it before launching."))
    return out


def ports(summary: dict[str, Any], nodes: Iterable[str]) -> list[dict[str, Any]]:
    fix = "Open the port between cluster nodes (run site.yml, role firewall) and check security groups in between."
    failed: dict[str, list[str]] = {}
    for item in summary["failures"]:
        failed.setdefault(item["to"], []).append("%s -> %s:%s %s" % (item["from"], item["to"], item["via"], item["error"]))
    return [finding("ports", n, "fail", "; ".join(failed[n]), fix) if n in failed else finding("ports", n, "ok", "reachable on every port")
            for n in nodes]


def limits(node: str, shm_bytes: int | None, memlock: str | int | None, where: str, min_shm_bytes: int) -> list[dict[str, Any]]:
    """where: 'inside trainops-run' or 'on the host ...' (no wrapper installed)."""
    out = []
    if "trainops-run" in where and "no trainops-run" not in where:
        shm_fix = "Run site.yml (role training_image) to restore --ipc host (or a large --shm-size) in trainops-run."
    else:
        shm_fix = "Enlarge the host's /dev/shm (tmpfs size=), or train in the image with trainops-run (set training_image)."
    if shm_bytes is None:
        return [finding("limits", node, "fail", "could not read /dev/shm %s" % where, "Check the launch wrapper.")]
    if shm_bytes < min_shm_bytes:
        out.append(finding("limits", node, "fail", "/dev/shm %s is %d MiB (< %d MiB): NCCL's shared memory and data loaders run out"
                           % (where, shm_bytes // 2 ** 20, min_shm_bytes // 2 ** 20), shm_fix))
    # ulimit -l is in KiB.
    if memlock not in ("unlimited", None) and int(memlock) < 2 ** 20:
        out.append(finding("limits", node, "warn", "memlock %s is %s KiB: RDMA (InfiniBand) cannot register buffers" % (where, memlock),
                           "Raise the locked-memory limit (ulimit -l unlimited, --ulimit memlock=-1:-1)."))
    return out or [finding("limits", node, "ok", "/dev/shm %d MiB, memlock %s %s" % (shm_bytes // 2 ** 20, memlock, where))]


def storage(nodes: Iterable[str], state: dict[str, dict[str, Any] | None], path: str, min_free_bytes: int,
            outlier_fraction: float | None = None, server: str | None = None) -> list[dict[str, Any]]:
    """state: {node: {expect_fstab, present, expect_mounted, mounted, source, writable, free_bytes, sees, read_mbps,
    read_seconds, read_warning}} as read on each node. Storage the cluster brings has no fstab entry to expect and mounted None: not
    judged, its round trip (writable, sees) is. read_mbps and read_warning are the read throughput check's (module
    storage_throughput, which judged the figure): a slow read is a warning finding beside the node's other one, and so
    is a read more than outlier_fraction below the other nodes' (storage_peers; server, the NFS server, left out)."""
    served = "Run site.yml (role shared_storage) to restore the fstab entry and the mount."
    brought = ("The storage is the cluster's own (nfs_enabled: false): mount the same filesystem at %s on every node, "
               "writable by the training user." % path)
    sources: set[str] = {s["source"] for s in state.values() if s and s.get("source")}
    out = []
    for node in nodes:
        s = state.get(node)
        if s is None:
            continue
        problems = []
        if s.get("expect_fstab", True) and not s.get("present"):
            problems.append("no %s entry in /etc/fstab" % path)
        elif len(sources) > 1:
            problems.append("%s comes from %s, other nodes mount %s" % (path, s.get("source"), ", ".join(sorted(sources - {s.get("source")}))))
        if s.get("expect_mounted") and s.get("mounted") is False:
            problems.append("%s is not mounted" % path)
        if s.get("expect_mounted") and s.get("mounted") is not False:
            if not s.get("writable"):
                problems.append("the training user cannot write to %s" % path)
            if s.get("sees") is False:
                problems.append("does not see the file another node wrote to %s" % path)
        free = s.get("free_bytes")
        if free is not None and free < min_free_bytes:
            problems.append("only %d GiB free in %s (< %d GiB)" % (free // 2 ** 30, path, min_free_bytes // 2 ** 30))
        fix = served if s.get("expect_fstab", True) else brought
        read = ", read at %s MB/s with every node at once" % s["read_mbps"] if s.get("read_mbps") is not None else ""
        out.append(finding("storage", node, "fail", "; ".join(problems), fix) if problems
                   else finding("storage", node, "ok", "%s in place%s" % (path, read)))
        if s.get("read_warning"):
            out.append(finding("storage", node, "warn", s["read_warning"], READ_FIX))
    if outlier_fraction is not None:
        reads = {node: {"mbps": (state.get(node) or {}).get("read_mbps"), "seconds": (state.get(node) or {}).get("read_seconds")}
                 for node in nodes}
        for node, text in storage_peers.slower_than_peers(reads, outlier_fraction, path, server).items():
            out.append(finding("storage", node, "warn", text, READ_FIX))
    return out


def plan(config: dict[str, Any], tp: int, pp: int, world: int) -> list[dict[str, Any]]:
    """The parallel plan against the model's config.json: tp divides the heads and KV heads, pp the layers, tp*pp the world."""
    heads = config.get("num_attention_heads")
    kv = config.get("num_key_value_heads", heads)
    layers = config.get("num_hidden_layers")
    problems = []
    if heads and heads % tp:
        problems.append("tensor parallel %d does not divide %d attention heads" % (tp, heads))
    if kv and kv % tp and tp % kv:
        problems.append("tensor parallel %d does not divide %d KV heads (nor replicates them evenly)" % (tp, kv))
    if layers and layers % pp:
        problems.append("pipeline parallel %d does not divide %d layers" % (pp, layers))
    if world % (tp * pp):
        problems.append("tp x pp = %d does not divide the world size %d" % (tp * pp, world))
    if problems:
        divisors = [d for d in range(1, (heads or 1) + 1) if heads and heads % d == 0 and d <= world]
        return [finding("plan", "-", "fail", "; ".join(problems), "Use a tp among %s (dividing the heads and the world size)." % divisors)]
    return [finding("plan", "-", "ok", "tp %d x pp %d fits %s heads, %s layers, world %d" % (tp, pp, heads, layers, world))]


def gpus(node: str, facts: dict[str, Any] | None, expected: int | None) -> list[dict[str, Any]]:
    if facts is None:
        return []
    out = []
    count = facts.get("gpu_count", 0)
    if expected is not None and count != expected:
        reason = (" (%s)" % facts["reason"]) if facts.get("reason") else ""
        out.append(finding("gpus", node, "fail", "%d GPUs, expected %d%s" % (count, expected, reason),
                           "Check nvidia-smi and the driver; a missing GPU often follows an Xid 79 (fell off the bus)."))
    xids = facts.get("xid_errors") or []
    if xids:
        # The Xid table the job runner reads too (module_utils/gpu.py): a node this fails, a restart leaves out.
        broken = sorted({x["xid"] for x in xids if x["xid"] in OUT_OF_SERVICE_XIDS})
        strange = sorted({x["xid"] for x in xids} - OUT_OF_SERVICE_XIDS - APPLICATION_XIDS)
        if broken:
            fix = ("Xid %s takes a GPU out of service: reset it (nvidia-smi -r) or reboot the node, and ask the provider to replace "
                   "a GPU that fails again; a job's restart leaves this node out until then." % ", ".join(map(str, broken)))
        elif strange:
            fix = "Look up Xid %s in NVIDIA's table; drain the node if it repeats." % ", ".join(map(str, strange))
        else:
            fix = "The program's own fault (Xid 13, 31, 43, 45): the GPU stays fit; look at the job's log."
        out.append(finding("gpus", node, "fail" if broken else "warn",
                           "Xid errors since boot: %s" % ", ".join("%s on %s" % (x["xid"], x["pci"]) for x in xids[:5]), fix))
    gpus = facts.get("gpus") or []
    problems = [p for gpu in gpus for p in gpu_health.problems(gpu)] + gpu_health.among(gpus)
    out.extend(finding("gpu health", node, p["status"], gpu_health.text(p), p["fix"]) for p in problems)
    healthy = "; ECC, memory and clocks healthy" if facts.get("gpus") else ""
    return out or [finding("gpus", node, "ok", "%d GPUs, no Xid errors%s" % (count, healthy))]


def slurm(records: list[dict[str, Any]], checked: Collection[str], shown: dict[str, dict[str, str | None]] | None,
          gpus: dict[str, int | None], munge: dict[str, str | None], controller: str) -> list[dict[str, Any]]:
    """Slurm's view of the checked nodes: shown is parse_show_node() of the controller's scontrol (None: it could not
    be read), munge {node: key checksum or None}."""
    if shown is None:
        return [finding("slurm", controller, "fail", "slurmctld did not answer scontrol on %s" % controller,
                        "Check slurmctld there (systemctl status slurmctld, /var/log/slurm/slurmctld.log).")]
    seen = [r for r in records if r["host"] in checked]
    problems = slurm_state.check_records(seen, shown, gpus, munge)
    out = [finding("slurm", node, "fail", problem, fix) for node, problem, fix in problems]
    named = {node for node, _problem, _fix in problems}
    return out + [finding("slurm", r["host"], "ok", "takes work (%s)" % shown[r["short"]].get("State"))
                  for r in seen if r["host"] not in named]


def stacks(node: str, facts: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Whether a stall's diagnosis reads the ranks' Python stacks on node (module stack_access's result): a warning
    where it cannot, with what to grant; the diagnosis then shows what the kernel tells of each rank instead."""
    if not facts:
        return []
    why = facts.get("error") or ("ptrace is denied" if facts.get("grant") else None)
    if not why:
        return [finding("stacks", node, "ok", "py-spy reads a rank's stack as root" if facts.get("tried")
                        else "ptrace allowed (train.yml's start installs py-spy)")]
    return [finding("stacks", node, "warn", "a stall's diagnosis cannot read the ranks' Python stacks (%s): it shows what the "
                                            "kernel tells of each rank instead" % why, facts.get("grant") or STACKS_FIX)]


def summarize(findings: list[dict[str, Any]]) -> dict[str, Any]:
    """{ok, failed_checks, rows: [[check, node, status, detail, fix]]} in check order."""
    order = {c: i for i, c in enumerate(CHECKS)}
    items = sorted(findings, key=lambda f: (order.get(f["check"], 99), f["status"] == "ok", str(f["node"])))
    failed = sorted({f["check"] for f in findings if f["status"] == "fail"}, key=lambda c: order.get(c, 99))
    return {"ok": not failed, "failed_checks": failed, "findings": items,
            "rows": [[f["check"], f["node"], f["status"].upper(), f["detail"], f["fix"]] for f in items]}


def parse_env(text: str | None) -> dict[str, str] | None:
    """KEY=VALUE lines of a launch.env (comments and blanks skipped) -> dict; None stays None."""
    if text is None:
        return None
    pairs = (line.split("=", 1) for line in text.splitlines() if "=" in line and not line.lstrip().startswith("#"))
    return dict((key.strip(), value.strip()) for key, value in pairs)


def majority(values: Iterable[Any]) -> Any:
    counts: dict[Any, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return max(counts, key=lambda value: counts[value]) if counts else None


def run_all(data: dict[str, Any]) -> dict[str, Any]:
    """Every check over what the doctor read (see roles/doctor); returns summarize()'s result."""
    nodes = data["nodes"]
    names_all = [n["host"] for n in nodes]
    checked = [n for n in names_all if n not in data["unreachable"]]
    records = [n for n in nodes if n["host"] in checked]
    findings = reachable(names_all, data["unreachable"])
    findings += versions(data["drift"], checked)
    # Every node's names are expected (a down node's too); only the checked nodes resolved them.
    findings += names(nodes, data["resolved"], data["hostnames"])
    findings += users(checked, data["accounts"], data["user"])
    findings += ssh(data["mesh"], checked)
    envs = dict((n, parse_env(data["envs"].get(n))) for n in checked)
    for n in records:
        host = n["host"]
        comm = data["comm"].get(host) or {}
        findings += interface(host, envs[host] or {}, comm.get("interfaces") or [], n["cluster_ip"], comm.get("infiniband") or [])
    gpus_by_node = dict((host, (data["gpus"].get(host) or {}).get("gpu_count", 0)) for host in checked)
    # The launch role's rule: launch_nproc_per_node, else the GPU count (1 without GPUs); unknown on unchecked nodes.
    nproc = dict((host, data.get("nproc_per_node") or max(gpus_by_node.get(host, 0), 1)) if host in checked else (host, None)
                 for host in names_all)
    findings += ranks(nodes, envs, nproc, data["master_port"], data["master_listening"], data.get("master"),
                      data.get("spares") or ())
    findings += ports(data["ports"], checked)
    for host in checked:
        lim = data["limits"].get(host) or {}
        findings += limits(host, lim.get("shm_bytes"), lim.get("memlock"), lim.get("where", ""), data["min_shm_bytes"])
    findings += storage(checked, data["storage"], data["shared_dir"], data["min_free_bytes"], data.get("storage_outlier_fraction"),
                        data.get("nfs_server"))
    if data.get("plan"):
        world = sum(n or 0 for host, n in nproc.items() if host not in (data.get("spares") or ()))
        findings += plan(data["plan"]["config"], data["plan"]["tp"], data["plan"]["pp"], world)
    expected = data.get("expected_gpus")
    if expected is None:
        expected = majority([gpus_by_node[h] for h in checked])
    for host in checked:
        findings += gpus(host, data["gpus"].get(host), expected)
    if data.get("slurm"):
        shown = data["slurm"]["show"]
        findings += slurm(nodes, checked, slurm_state.parse_show_node(shown) if shown is not None else None,
                          dict((h, gpus_by_node[h]) for h in checked), data["slurm"]["munge"], data["slurm"]["controller"])
    for host in checked:
        findings += stacks(host, (data.get("stacks") or {}).get(host))
    return summarize(findings)
