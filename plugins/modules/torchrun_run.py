#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: torchrun_run
short_description: Run this node's part of a torchrun launch under a hard limit, and say who reached the master
version_added: 0.1.0
author:
  - trainops.cluster maintainers (@trainops)
description:
  - Runs one node's torchrun command (the same command on every node, which reads the node's rank and master from
    its launch environment) and returns its output, parsed.
  - Meanwhile it connects to the master's address and port (C(MASTER_ADDR):C(MASTER_PORT) of O(launch_env)) until
    that succeeds or O(rendezvous_timeout) passes, so a node that cannot reach the rendezvous says why (timed out,
    refused) instead of hanging.
  - The command is stopped at O(timeout) seconds, or at O(rendezvous_timeout) seconds when no worker has started
    by then (torchrun starts workers, the processes with C(LOCAL_RANK), only when every node has joined; torch's own
    limit is minutes). RV(stopped) says which. Every process that carries O(run_id) in its
    environment (variable C(TRAINOPS_RUN_ID), also inside a container started with C(--env TRAINOPS_RUN_ID)) is then
    ended, SIGTERM first and SIGKILL after 5 seconds (the container engine's own processes 5 seconds later, so that
    it records and removes its container); RV(cleanup) says what was found.
  - Never fails on a failed or timed-out launch; the controller judges all nodes together (C(judge_allreduce) and
    C(judge_training) in C(plugins/plugin_utils/torchrun_verdict.py)). Fails only on bad arguments.
options:
  argv:
    description: The command and its arguments, run without a shell (e.g. C(trainops-env sh -c 'exec torchrun ...')).
    type: list
    elements: str
    required: true
  run_id:
    description: Marks this launch's processes; exported as C(TRAINOPS_RUN_ID).
    type: str
    required: true
  launch_env:
    description: This node's launch environment, read for C(MASTER_ADDR), C(MASTER_PORT), C(NODE_RANK) and C(NNODES).
    type: path
    default: /etc/trainops/launch.env
  timeout:
    description: Seconds the whole command may run.
    type: int
    default: 300
  rendezvous_timeout:
    description: Seconds the probe of the master keeps trying.
    type: int
    default: 30
  environment:
    description: More variables for the command (strings or numbers).
    type: dict
    default: {}
extends_documentation_fragment:
  - trainops.cluster.attributes
attributes:
  check_mode:
    support: none
    description: A launch starts processes on every node, so it is skipped in check mode.
  platform:
    support: full
    platforms: linux
    description: Reads C(/proc) to find the launch's processes.
seealso:
  - name: torchrun (Elastic Launch)
    description: torchrun's options and its failure summary.
    link: https://pytorch.org/docs/stable/elastic/run.html
"""

EXAMPLES = r"""
- name: The all-reduce rung on every node at once, on the host, as the training user
  trainops.cluster.torchrun_run:
    argv:
      - trainops-env
      - sh
      - -c
      - exec torchrun --nnodes="$NNODES" --node_rank="$NODE_RANK" --nproc_per_node="$NPROC_PER_NODE"
        --master_addr="$MASTER_ADDR" --master_port="$MASTER_PORT" --rdzv_conf=timeout=20 "$@"
      - torchrun
      - /opt/trainops/bin/trainops_allreduce.py
    run_id: trainops-torchrun-20261201T120000-4242
    timeout: 120
    rendezvous_timeout: 20
  become: true
  become_user: train
  register: launch
"""

RETURN = r"""
rc:
  description: Exit status of the command; negative (the signal) when it was stopped.
  returned: always
  type: int
  sample: 0
timed_out:
  description: Whether the command was stopped, at O(timeout) or at O(rendezvous_timeout).
  returned: always
  type: bool
  sample: false
stopped:
  description: Why the command was stopped; C(timeout), C(not ready) (no worker started within O(rendezvous_timeout)), or null.
  returned: always
  type: str
  sample: not ready
seconds:
  description: Wall-clock seconds the command ran.
  returned: always
  type: float
  sample: 11.3
cmd:
  description: O(argv) as one shell-quoted line.
  returned: always
  type: str
output:
  description: Standard output, then standard error after a C(--- stderr ---) line.
  returned: always
  type: str
launch:
  description: The variables of O(launch_env) as this node read them; null when it could not be read.
  returned: always
  type: dict
  sample: {"NNODES": "3", "NODE_RANK": "1", "MASTER_ADDR": "10.82.0.11", "MASTER_PORT": "29500"}
probe:
  description: The connection to the master, with C(address), C(port), C(ok), C(error) and C(seconds) to the first success.
  returned: always
  type: dict
  sample: {"address": "10.82.0.11", "port": 29500, "ok": false, "error": "timed out", "seconds": 3.0}
parsed:
  description: The output read by C(parse_output()) (C(records), C(failures), C(errors), C(clients)).
  returned: always
  type: dict
nccl_debug:
  description: NCCL's C(NCCL_DEBUG=INFO) log read by C(parse_nccl_debug()) (version, interfaces, transports); null without it.
  returned: always
  type: dict
cleanup:
  description: Processes of O(run_id) still there after the command (C(found)), those that needed SIGKILL (C(killed))
    and those that survived it (C(left)), each C({pid, state, comm}).
  returned: always
  type: dict
  sample: {"found": [], "killed": [], "left": []}
"""

import shlex
import threading
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.trainops.cluster.plugins.module_utils.command import environment_of, run_watched
from ansible_collections.trainops.cluster.plugins.module_utils.ports import probe
from ansible_collections.trainops.cluster.plugins.module_utils.processes import end_run, find
from ansible_collections.trainops.cluster.plugins.module_utils.nccl_tests.nccl_debug import parse_nccl_debug
from ansible_collections.trainops.cluster.plugins.module_utils.torchrun import parse_output, read_env_file, strip_prefixes

# One connect attempt to the master; a dropped port costs this long before it is reported.
CONNECT_TIMEOUT = 3


def read_launch(path):
    try:
        with open(path) as handle:
            return read_env_file(handle.read())
    except OSError:
        return None


def probe_master(launch, seconds):
    """Connect to the master until it answers or seconds pass, in a thread: {address, port, ok, error, seconds}."""
    try:
        item = {"address": launch["MASTER_ADDR"], "port": int(launch["MASTER_PORT"])}
    except (KeyError, TypeError, ValueError):
        return None, {"address": None, "port": None, "ok": False, "error": "MASTER_ADDR or MASTER_PORT not set"}
    found = dict(item, ok=False, error="not probed", seconds=0.0)

    def run():
        found.update(probe(item, CONNECT_TIMEOUT, time.monotonic() + seconds))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, found


def main():
    module = AnsibleModule(
        argument_spec=dict(
            argv=dict(type="list", elements="str", required=True),
            run_id=dict(type="str", required=True),
            launch_env=dict(type="path", default="/etc/trainops/launch.env"),
            timeout=dict(type="int", default=300),
            rendezvous_timeout=dict(type="int", default=30),
            environment=dict(type="dict", default={}),
        ),
        supports_check_mode=False,
    )
    params = module.params
    if not params["argv"] or not params["argv"][0]:
        module.fail_json(msg="argv must name a command")
    if params["timeout"] < 1 or params["rendezvous_timeout"] < 1:
        module.fail_json(msg="timeout and rendezvous_timeout must be at least 1 second")
    environment = environment_of(module, params["environment"])
    environment.update(TRAINOPS_RUN_ID=params["run_id"], TRAINOPS_LAUNCH_TIME="%.3f" % time.time(), PYTHONUNBUFFERED="1")

    launch = read_launch(params["launch_env"])
    thread, probed = probe_master(launch or {}, params["rendezvous_timeout"])
    stopped_by_watchdog = {}

    def workers_started():
        # torchrun starts the workers (they alone carry LOCAL_RANK) only once every node's agent has joined.
        return bool(find("TRAINOPS_RUN_ID", params["run_id"], having="LOCAL_RANK"))

    def stop():
        stopped_by_watchdog.update(end_run("TRAINOPS_RUN_ID", params["run_id"]))

    start = time.monotonic()
    rc, out, err, stopped = run_watched(module, params["argv"], environment, params["timeout"], workers_started,
                                        params["rendezvous_timeout"], stop)
    seconds = round(time.monotonic() - start, 3)
    after = end_run("TRAINOPS_RUN_ID", params["run_id"])
    cleanup = {key: stopped_by_watchdog.get(key, []) + after[key] for key in ("found", "killed")}
    cleanup["left"] = after["left"]
    if thread:
        thread.join(CONNECT_TIMEOUT + 1)
    output = out + (("\n" if out and not out.endswith("\n") else "") + "--- stderr ---\n" + err if err else "")
    nccl_debug = parse_nccl_debug(strip_prefixes(output)) if "NCCL INFO" in output else None
    module.exit_json(changed=False, failed=False, rc=rc, timed_out=stopped is not None, stopped=stopped, seconds=seconds,
                     cmd=shlex.join(params["argv"]), output=output, launch=launch, probe=probed, parsed=parse_output(output),
                     nccl_debug=nccl_debug, cleanup=cleanup)


if __name__ == "__main__":
    main()
