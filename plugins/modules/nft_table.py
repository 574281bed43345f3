#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: nft_table
short_description: Load one nftables table from a file, detect drift of the live table, and arm a rollback
version_added: 0.1.0
author: trainops.cluster maintainers (@trainops)
description:
  - Loads O(src), an C(nft -f) file that defines exactly the table O(family) O(name), atomically, leaving every
    other table (Docker's, the distribution's) alone.
  - Loads it when O(src) changed since the last load, and also when the live table no longer matches what
    was loaded (someone edited the rules at run time), so a re-run repairs drift and otherwise changes nothing.
  - Before loading, it can arm a rollback, a systemd timer that restores the previous table after
    O(rollback_seconds) (to the second) unless the caller stops the timer once it has proved that it can still
    connect.
options:
  src:
    description: The ruleset file on the node; it must define the table O(family) O(name) and nothing else.
    type: path
    required: true
  family:
    description: The table's family.
    type: str
    default: inet
  name:
    description: The table's name.
    type: str
    required: true
  state_dir:
    description: Where the listing of the last load and the matching source checksum are kept.
    type: path
    default: /var/lib/trainops
  rollback_seconds:
    description: Arm a rollback to the previous table that fires after this many seconds; 0 arms none.
    type: int
    default: 0
extends_documentation_fragment:
  - trainops.cluster.attributes
attributes:
  check_mode:
    support: full
    description: Reports whether the table would be loaded, without loading it.
  diff_mode:
    support: full
    description: Shows the live table before, and after the load (in check mode, the file that would be loaded).
  platform:
    support: full
    platforms: posix
    description: Linux with the C(nft) command; the rollback needs systemd.
notes:
  - Listings are taken with C(nft -s) (no counter values), so traffic does not count as drift.
"""

EXAMPLES = r"""
- name: Load the cluster firewall, with a rollback armed
  trainops.cluster.nft_table:
    src: /etc/trainops/firewall.nft
    name: trainops
    rollback_seconds: 60
  register: fw

- name: Cancel the rollback once the controller can still connect
  ansible.builtin.systemd_service:
    name: "{{ fw.rollback_unit }}.timer"
    state: stopped
  when: fw.rollback_unit is truthy
"""

RETURN = r"""
drift:
  description: The live table differed from the one loaded last time.
  returned: always
  type: bool
  sample: false
rollback_unit:
  description: Name of the transient systemd unit that restores the previous table, or null when none was armed.
  returned: always
  type: str
  sample: trainops-nft-rollback-trainops
"""

import hashlib
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.trainops.cluster.plugins.module_utils.command import run_bounded

NFT_TIMEOUT = 30


def read(path):
    try:
        with open(path) as handle:
            return handle.read()
    except OSError:
        return None


def write(module, path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as handle:
        handle.write(text)
    module.atomic_move(tmp, path)


def nft(module, nft_bin, *args):
    rc, out, err, timed_out = run_bounded(module, [nft_bin] + list(args), NFT_TIMEOUT)
    return rc, out, err or ("nft timed out" if timed_out else "")


def main():
    module = AnsibleModule(
        argument_spec=dict(
            src=dict(type="path", required=True),
            family=dict(type="str", default="inet"),
            name=dict(type="str", required=True),
            state_dir=dict(type="path", default="/var/lib/trainops"),
            rollback_seconds=dict(type="int", default=0),
        ),
        supports_check_mode=True,
    )
    p = module.params
    nft_bin = module.get_bin_path("nft", required=True)
    table = [p["family"], p["name"]]
    source = read(p["src"])
    if source is None:
        module.fail_json(msg="cannot read %s" % p["src"])

    rc, live, err = nft(module, nft_bin, "-s", "list", "table", *table)
    live = live if rc == 0 else ""
    base = os.path.join(p["state_dir"], "nft-%s-%s" % tuple(table))
    loaded = read(base + ".loaded")
    source_sum = hashlib.sha256(source.encode()).hexdigest()
    drift = loaded is not None and live != loaded
    changed = drift or read(base + ".src.sha256") != source_sum
    result = dict(changed=changed, drift=drift, rollback_unit=None)
    if not changed or module.check_mode:
        if module._diff and changed:
            result["diff"] = dict(before=live, after=source, before_header="live table", after_header=p["src"])
        module.exit_json(**result)

    rc, out, err = nft(module, nft_bin, "-c", "-f", p["src"])
    if rc != 0:
        module.fail_json(msg="%s does not load: %s" % (p["src"], err.strip()), **result)
    os.makedirs(p["state_dir"], mode=0o700, exist_ok=True)
    if p["rollback_seconds"] > 0:
        restore = "table %s %s\ndelete table %s %s\n%s" % (tuple(table) * 2 + (live,))
        write(module, base + ".rollback", restore)
        unit = "trainops-nft-rollback-%s" % p["name"]
        systemctl = module.get_bin_path("systemctl", required=True)
        # A rollback left armed or fired by an earlier run would make systemd-run refuse the unit name.
        run_bounded(module, [systemctl, "stop", unit + ".timer"], NFT_TIMEOUT)
        run_bounded(module, [systemctl, "reset-failed", unit + ".timer", unit + ".service"], NFT_TIMEOUT)
        # AccuracySec: a timer's default of 1 min lets systemd fire it up to a minute late (at a point of each minute
        # fixed by the boot ID, so every container on a host is late alike), and the caller waits rollback_seconds.
        rc, out, err, timed_out = run_bounded(module, [
            module.get_bin_path("systemd-run", required=True), "--unit", unit, "--on-active=%ds" % p["rollback_seconds"],
            "--timer-property=AccuracySec=1s",
            "--description", "Restore nftables table %s %s unless the new rules are confirmed" % tuple(table),
            nft_bin, "-f", base + ".rollback"], NFT_TIMEOUT)
        if rc != 0:
            module.fail_json(msg="cannot arm the rollback, so the rules were not loaded: %s" % err.strip(), **result)
        result["rollback_unit"] = unit
    rc, out, err = nft(module, nft_bin, "-f", p["src"])
    if rc != 0:
        module.fail_json(msg="loading %s failed: %s" % (p["src"], err.strip()), **result)
    rc, now, err = nft(module, nft_bin, "-s", "list", "table", *table)
    write(module, base + ".loaded", now)
    write(module, base + ".src.sha256", source_sum)
    if module._diff:
        result["diff"] = dict(before=live, after=now, before_header="live table", after_header="loaded table")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
