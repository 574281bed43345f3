#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: allreduce_run
short_description: Run one all-reduce launch command of a verify rung and return its parsed result
version_added: 0.1.0
author:
  - trainops.cluster maintainers (@trainops)
description:
  - Runs one command of the all-reduce ladder. This is an C(mpirun) command line, or nccl-tests'
    C(all_reduce_perf) started directly. The module returns the command's output and the parsed result.
  - The command runs under a hard time limit (coreutils C(timeout)). At O(timeout) seconds its whole process
    group gets SIGTERM, and SIGKILL 2 seconds later. RV(timed_out) then says so, and the partial output is
    still parsed.
  - O(kind=nccl_tests) parses the text output of C(all_reduce_perf), run directly, under C(mpirun
    --tag-output) or under C(srun --label). It also reads the C(NCCL_DEBUG=INFO) log into RV(debug). O(kind=cpu) parses the line
    protocol of the verify role's CPU program C(cpu_allreduce.py).
  - With O(json_file), the JSON file that nccl-tests writes (C(-J)) supplies the result rows at full precision.
    The file holds rank 0's whole environment, so the module deletes it after reading, also when it cannot be
    parsed.
  - Never fails on a failed, aborted or timed-out run, whatever RV(rc) is. Judging the result is the controller's job
    (C(judge_rung) in C(plugins/plugin_utils/nccl_tests/rung_verdict.py)). The module fails only on bad arguments.
options:
  argv:
    description:
      - The command and its arguments, run without a shell.
      - Items are passed as they are; C(~) and C($NAME) are not expanded.
    type: list
    elements: str
    required: true
  kind:
    description:
      - Which output the command prints.
      - C(nccl_tests) is nccl-tests' text output, with NCCL's log and mpirun's messages mixed in.
      - C(cpu) is the JSON lines of the verify role's C(cpu_allreduce.py).
    type: str
    choices: [nccl_tests, cpu]
    default: nccl_tests
  timeout:
    description: Seconds the command may run before it is killed and reported as RV(timed_out).
    type: int
    default: 600
  environment:
    description:
      - Environment variables to add for the command, for example C(NCCL_DEBUG=INFO) or C(NCCL_NVLS_ENABLE=0).
      - Values must be strings or numbers. A boolean is refused, because NCCL would read C(True) as 0.
      - C(mpirun) hands a variable to remote ranks only when O(argv) exports it (C(-x NAME)).
    type: dict
    default: {}
  json_file:
    description:
      - The path given to nccl-tests with C(-J) (or C(--output_file)), relative to O(chdir). Only for
        O(kind=nccl_tests).
      - The command then runs with umask 0077, so that nccl-tests creates the file (which holds rank 0's whole
        environment) readable by its owner only. Give a path in a directory only that user can read.
      - A file left at this path by an earlier run is deleted before the command starts, because nccl-tests
        never overwrites a file. It would write to C(FILE.0), C(FILE.1) and so on instead.
      - After the run, the module reads the file that the output names in its C(# Writing JSON output to)
        line, when that is this path or C(FILE.N). Otherwise it reads this path. Then it deletes the file.
      - The rows come from the file when it holds complete rows. RV(result.source) then says
        C(nccl_tests_text+json).
      - nccl-tests' rank 0 writes the file on its own node. Run the command on the node of rank 0, or the file
        is not found here; a note in RV(result.notes) then says so.
    type: path
  chdir:
    description: Directory to run the command in. Defaults to the module's working directory.
    type: path
extends_documentation_fragment:
  - trainops.cluster.attributes
attributes:
  check_mode:
    support: none
    description: It launches processes (all_reduce_perf, mpirun and its ranks on other nodes), so it is skipped in check mode.
  platform:
    support: full
    platforms: posix
    description: Needs coreutils C(timeout) on the node, besides the command itself.
notes:
  - RV(output) can be large with C(NCCL_DEBUG=INFO) on many ranks. Avoid printing the registered variable whole.
  - C(result) has the shape of the rung parsers, documented in C(plugins/module_utils/nccl_tests/perf_text.py). Pass it to
    C(judge_rung) through the controller's filter, together with RV(debug) as the transports.
seealso:
  - name: nccl-tests
    description: The C(all_reduce_perf) benchmark, its options and output columns.
    link: https://github.com/NVIDIA/nccl-tests
"""

EXAMPLES = r"""
- name: All GPUs of two nodes, one process per GPU, with NCCL's log and the JSON output
  trainops.cluster.allreduce_run:
    argv:
      - mpirun
      - --tag-output
      - -np
      - "16"
      - -N
      - "8"
      - --host
      - node1:8,node2:8
      - -x
      - NCCL_DEBUG
      - /opt/nccl-tests/build/all_reduce_perf
      - -b
      - 8M
      - -e
      - 8G
      - -f
      - "2"
      - -g
      - "1"
      - -J
      - /home/trainer/.cache/trainops-verify/pair.json
    environment:
      NCCL_DEBUG: INFO
    # In a directory only trainer can read (mode 0700).
    json_file: /home/trainer/.cache/trainops-verify/pair.json
    timeout: 900
  register: rung
  become: true
  become_user: trainer

- name: CPU rung on nodes without GPUs
  trainops.cluster.allreduce_run:
    kind: cpu
    argv: [mpirun, --tag-output, -np, "3", --host, "node1,node2,node3", python3, /opt/trainops/cpu_allreduce.py]
    timeout: 120
  register: cpu_rung

- name: Show the largest size and the errors
  ansible.builtin.debug:
    msg: "{{ rung.result.rows[-1] | default(none) }} {{ rung.result.errors }} timed out: {{ rung.timed_out }}"
"""

RETURN = r"""
rc:
  description: Exit status of the command. 124 or 137 after a timeout, 127 when the command was not found.
  returned: always
  type: int
  sample: 0
timed_out:
  description: Whether the command was killed at O(timeout).
  returned: always
  type: bool
  sample: false
seconds:
  description: Wall-clock seconds the command ran.
  returned: always
  type: float
  sample: 41.27
cmd:
  description: O(argv) joined into one shell-quoted line, for the log.
  returned: always
  type: str
  sample: "mpirun --tag-output -np 16 -N 8 /opt/nccl-tests/build/all_reduce_perf -b 8M -e 8G -f 2 -g 1"
output:
  description:
    - The command's standard output. When it wrote to standard error, a C(--- stderr ---) line follows, then
      that text.
    - With C(NCCL_DEBUG=INFO) this holds NCCL's log. Store it with the report.
  returned: always
  type: str
  sample: "# nccl-tests version 2.19.6 nccl-headers=22809 nccl-library=22809\n..."
result:
  description:
    - The parsed run, in the same shape for both kinds.
    - O(kind=nccl_tests) uses parse_perf_output() on standard output and standard error together. With a usable
      JSON file, the rows come from parse_perf_json(). O(kind=cpu) uses parse_cpu_allreduce().
  returned: always
  type: dict
  contains:
    source:
      description:
        - Where the data came from. C(nccl_tests_text) means the text output only. C(cpu_allreduce) means the
          CPU program's lines.
        - C(nccl_tests_text+json) means the rows and RV(result.wrong_total) come from the JSON file. The rest
          comes from the text. Only footer fields and params that the text lacks are taken from the file.
      type: str
      sample: nccl_tests_text+json
    version:
      description: nccl-tests version; null for the CPU program.
      type: str
      sample: "2.19.6"
    nccl_library:
      description: NCCL version nccl-tests ran with.
      type: str
      sample: "2.28.9"
    nccl_headers:
      description: NCCL version nccl-tests was built against; a rung whose library differs fails.
      type: str
      sample: "2.28.9"
    collective:
      description: The collective measured.
      type: str
      sample: all_reduce
    params:
      description:
        - The run's parameters from nccl-tests' header (C(nthreads), C(ngpus), C(min_bytes), C(max_bytes), C(step),
          C(step_type), C(warmup_iters), C(iters), C(agg_iters), C(validation), C(graph), C(unalign),
          C(per_iter_timing)).
        - For the CPU program they are C(nranks), C(min_bytes), C(max_bytes) and C(validation).
      type: dict
      sample: {"nthreads": 1, "ngpus": 1, "min_bytes": 8388608, "max_bytes": 8589934592, "step": 2, "step_type": "factor"}
    ranks:
      description: One entry per rank, with C(rank), C(group), C(pid), C(host), C(device), C(busid) and C(name).
      type: list
      elements: dict
      sample: [{"rank": 0, "group": 0, "pid": 4101, "host": "node1", "device": 0, "busid": "0x18", "name": "NVIDIA H200"}]
    rows:
      description:
        - One entry per message size, with C(size), C(count), C(type), C(redop), C(root), C(out_of_place) and
          C(in_place).
        - Each side is C({time_us, algbw, busbw, wrong}) with bandwidths in GB/s, or null when it was not measured.
      type: list
      elements: dict
      sample: [{"size": 8589934592, "count": 2147483648, "type": "float", "redop": "sum", "root": -1,
                "out_of_place": {"time_us": 24707.6, "algbw": 347.66, "busbw": 347.66, "wrong": 0},
                "in_place": {"time_us": 24641.4, "algbw": 348.6, "busbw": 348.6, "wrong": 0}}]
    wrong_total:
      description: Sum of the wrong element counts; null when the run checked nothing (C(-c 0)).
      type: int
      sample: 0
    avg_busbw:
      description: Average bus bandwidth from the footer, in GB/s.
      type: float
      sample: 180.2
    out_of_bounds:
      description: Out-of-bounds values from the footer.
      type: int
      sample: 0
    json_output:
      description: The file that the C(# Writing JSON output to) line names, as printed.
      type: str
      sample: /home/trainer/.cache/trainops-verify/pair.json
    notes:
      description: Non-fatal remarks, for example a reduced maxBytes or a JSON file that was not used and why.
      type: list
      elements: str
    errors:
      description: Failure lines from the text (NCCL/CUDA failures, NCCL WARN, mpirun abort messages, signals, CPU error lines).
      type: list
      elements: str
    failed_processes:
      description: Processes mpirun reports as failed, with C(rank), C(host), C(pid), C(signal), C(signal_name) and C(exit_code).
      type: list
      elements: dict
    complete:
      description: Whether the run got to its end. For nccl-tests this means the footer was printed; for the CPU program, every rank reported every size.
      type: bool
      sample: true
debug:
  description:
    - The NCCL_DEBUG=INFO log read by parse_nccl_debug(). It has keys such as C(nccl_version), C(hosts),
      C(transports), C(transports_by_host), C(networks), C(channels), C(socket_interfaces), C(ib_devices),
      C(ib_no_device), C(net_plugin), C(warnings), C(ranks), C(nranks) and C(nnodes).
    - Mostly empty without C(NCCL_DEBUG=INFO). Null for O(kind=cpu).
  returned: always
  type: dict
  sample: {"nccl_version": "2.28.9", "transports": ["NET/IB", "P2P/CUMEM"], "nnodes": 2, "nranks": 16}
json_removed:
  description: JSON files of nccl-tests that the module deleted, before or after the run.
  returned: always
  type: list
  elements: str
  sample: [/home/trainer/.cache/trainops-verify/pair.json]
"""

import os
import re
import shlex
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.trainops.cluster.plugins.module_utils.command import environment_of, run_bounded
from ansible_collections.trainops.cluster.plugins.module_utils.nccl_tests.cpu_allreduce import parse_cpu_allreduce
from ansible_collections.trainops.cluster.plugins.module_utils.nccl_tests.nccl_debug import parse_nccl_debug
from ansible_collections.trainops.cluster.plugins.module_utils.nccl_tests.perf_json import parse_perf_json
from ansible_collections.trainops.cluster.plugins.module_utils.nccl_tests.perf_text import parse_perf_output

# The umask of a run that writes a JSON file: the file is created 0600.
PRIVATE_UMASK = 0o077
# Filled from the JSON file only where the text lacks them (a run whose stdout was lost).
JSON_FALLBACK_KEYS = ("nccl_library", "collective", "avg_busbw", "out_of_bounds")


def remove(path, removed, notes):
    try:
        os.remove(path)
    except FileNotFoundError:
        return
    except OSError as error:
        notes.append("could not delete nccl-tests JSON output %s: %s" % (path, error.strerror))
        return
    removed.append(path)


def written_json(result, json_file):
    """The file nccl-tests wrote: the one its output names, when that is json_file or a json_file.N it fell back to."""
    named = result.get("json_output")
    if not named:
        return json_file
    named = os.path.abspath(named)
    if named == json_file or re.match(re.escape(json_file) + r"\.\d+$", named):
        return named
    result["notes"].append("nccl-tests wrote its JSON output to %s, not to json_file %s; it was not read" % (named, json_file))
    return json_file


def with_json_rows(result, path, removed):
    """Take the rows of the JSON file at path when they are complete, then delete the file."""
    notes = result["notes"]
    if not os.path.exists(path):
        notes.append("JSON output %s not found on this host (not written, or rank 0 ran on another node)" % path)
        return result
    try:
        with open(path, errors="replace") as handle:
            text = handle.read()
    except OSError as error:
        text = None
        notes.append("JSON output %s could not be read: %s" % (path, error.strerror))
    remove(path, removed, notes)
    if text is None:
        return result
    parsed = parse_perf_json(text)
    if not (parsed["rows"] and parsed["complete"]):
        why = parsed["errors"][0] if parsed["errors"] else "no complete result rows"
        notes.append("JSON output %s not used: %s" % (path, why))
        return result
    merged = dict(result, source="nccl_tests_text+json", rows=parsed["rows"])
    wrong = [side["wrong"] for row in parsed["rows"] for side in (row["out_of_place"], row["in_place"])
             if side is not None and side["wrong"] is not None]
    merged["wrong_total"] = sum(wrong) if wrong else None
    for key in JSON_FALLBACK_KEYS:
        if merged[key] is None:
            merged[key] = parsed[key]
    if not merged["params"]:
        merged["params"] = parsed["params"]
    # ncclGetLastError() text: the text output carries the failures themselves, so it is only a remark here.
    notes.extend("JSON output: NCCL last error: %s" % error for error in parsed["errors"])
    return merged


def main():
    module = AnsibleModule(
        argument_spec=dict(
            argv=dict(type="list", elements="str", required=True),
            kind=dict(type="str", choices=["nccl_tests", "cpu"], default="nccl_tests"),
            timeout=dict(type="int", default=600),
            environment=dict(type="dict", default={}),
            json_file=dict(type="path"),
            chdir=dict(type="path"),
        ),
        supports_check_mode=False,
    )
    params = module.params
    argv, kind, timeout, json_file, chdir = params["argv"], params["kind"], params["timeout"], params["json_file"], params["chdir"]
    if not argv or not argv[0]:
        module.fail_json(msg="argv must name a command")
    if timeout < 1:
        module.fail_json(msg="timeout must be at least 1 second, got %d" % timeout)
    if json_file and kind != "nccl_tests":
        module.fail_json(msg="json_file applies to kind nccl_tests only")
    environment = environment_of(module, params["environment"])
    if chdir:
        if not os.path.isdir(chdir):
            module.fail_json(msg="chdir %s is not a directory" % chdir)
        # run_bounded has no cwd; the module is its own process, so changing its directory affects nothing else.
        os.chdir(chdir)
    removed = []
    notes = []
    if json_file:
        json_file = os.path.abspath(json_file)
        if os.path.isdir(json_file):
            module.fail_json(msg="json_file %s is a directory" % json_file)
        remove(json_file, removed, notes)

    start = time.monotonic()
    # nccl-tests creates the JSON file with the umask's mode, and it holds rank 0's whole environment: owner only.
    rc, out, err, timed_out = run_bounded(module, argv, timeout, environ_update=environment, umask=PRIVATE_UMASK if json_file else None)
    seconds = round(time.monotonic() - start, 3)

    text = out + ("\n" + err if err else "")
    if kind == "cpu":
        result, debug = parse_cpu_allreduce(text), None
    else:
        result, debug = parse_perf_output(text), parse_nccl_debug(text)
    result["notes"].extend(notes)
    if json_file:
        result = with_json_rows(result, written_json(result, json_file), removed)

    output = out
    if err:
        output += ("\n" if out and not out.endswith("\n") else "") + "--- stderr ---\n" + err
    # Explicit, or Ansible would fail the task on a non-zero rc: the controller judges the run.
    module.exit_json(changed=False, failed=False, rc=rc, timed_out=timed_out, seconds=seconds, cmd=shlex.join(argv), output=output,
                     result=result, debug=debug, json_removed=removed)


if __name__ == "__main__":
    main()
