# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What launchers, loggers and torch put before each line of a node's output, so that readers see the line itself.

Node side: imported by torchrun.py (the torchrun rungs, a job's failure) and by _progress.py, which the job runner on
the nodes carries (roles/train/files/trainops_job links both files): standard library only, no import of the
collection's own (relative imports alone).
"""

from __future__ import annotations

import re

# Terminal colours: Ray's and vLLM's labels, torchtitan's and rich's log lines.
ANSI_RE = re.compile(r"\x1b\[[\d;]*[A-Za-z]")
# torchrun --tee's "[default0]:", torch's own "[rank3]:" (2.2 on: its excepthook labels each line of a rank's traceback,
# pytorch PR #118190, and TORCH_LOGS lines carry it too), torchtune's multi-node "[trainer0|0]:", mpirun --tag-output's
# "[1,0]<stdout>:", srun --label's " 0: "; not Composer's "[batch=10/100]:", which heads its step's lines.
RANK_RE = re.compile(r"^(?:\[[^\]=]*\]:|\[[^\]]*\]<\w+>:|\s*\d+: )")
# The same rank and process labels where several ranks' lines run together (torchrun's tee copies a line before its
# newline; a relayed bar repainted without a line end).
RANK_INSIDE_RE = re.compile(r"(?<=.)(?=\[(?:rank|default)\d+\]:|\[\w+\|\d+\]:|\([^()]*\bpid=\d+[^()]*\) )")
# Launchers that relay a node's output label each line outside the prefixes above; "host" is the node, where named.
# - Ray's driver prints its workers' lines behind "(RayTrainWorker pid=8, ip=10.96.0.12) ", "ip=" only for another
#   node, in colour ("\x1b[36m(...)\x1b[0m "): ray python/ray/_private/worker.py print_worker_logs. vLLM's worker
#   processes label their own output "(VllmWorker rank=1 pid=12231) ", "(VllmWorkerProcess pid=9) ",
#   "(EngineCore_0 pid=5) ", in colour unless NO_COLOR: vllm/utils decorate_logs and _add_prefix (v0:
#   vllm/executor/multiproc_worker_utils.py).
PROCESS_RE = re.compile(r"^(?:\x1b\[[\d;]*m)*\([^()]*\bpid=\d+(?:, ip=(?P<host>[^)\s]+))?\)(?:\x1b\[[\d;]*m)* ")
# - kubectl logs --prefix (a Kubeflow PyTorchJob's pods): "[pod/trainer-worker-1/pytorch] ", the pod for the node.
POD_RE = re.compile(r"^\[pod/(?P<host>[^/\]\s]+)(?:/[^\]\s]*)?\] ")
# - pdsh, DeepSpeed's multi-node launcher (deepspeed --hostfile: deepspeed/launcher/multinode_runner.py PDSHRunner),
#   writes every line of a node's output as "node2: " + line (pdsh src/pdsh/dsh.c: out("%S: %s", host, buf)). srun
#   --label's "0: " is no host: RANK_RE takes it.
PDSH_RE = re.compile(r"^(?!\d+: )(?P<host>[\w.-]+): ")
# Loggers that relay a line put their record's fields before it:
# - glog's, which torch's C++ and (2.4 on) its Python logging use: "E0501 10:00:00.123000 140245 .../api.py:869] ";
# - Python logging's usual formats: DeepSpeed's "[2024-05-01 10:00:00,123] [ERROR] [launch.py:321:main] ",
#   transformers' and LLaMA-Factory's "[INFO|trainer.py:2414] 2024-05-01 10:00:00,123 >> ", "2024-05-01
#   10:00:00,123 - root - ERROR - " (torchtitan's behind "[titan] "), torch 2.1-2.3's "[2023-11-28 09:52:03,012]
#   torch.distributed.elastic.multiprocessing.api: [ERROR] ", basicConfig's "ERROR:torch.distributed.run:";
# - vLLM's, on every line of a record (a worker's traceback relayed by its engine): its level, month-day time and
#   file:line, "ERROR 07-19 06:58:27 worker_base.py:340] " (2024's releases), "ERROR 06-16 02:08:15 [multiproc_worker_utils.py:238] "
#   (2025's: the place in brackets), behind Ray's or its own process label (vllm-project/vllm issues 6564, 19670).
LOGGING_RE = re.compile(
    r"^(?:[IWEFD]\d{4} [\d:.]+ +\d+ [^\]\s]+:\d+\] "
    r"|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[?[\w.-]+:\d+\] "
    r"|\[[A-Z]+\|[\w.-]+:\d+\] (?:[\d-]+ [\d:,.]+ >> ?)?"
    r"|\[[\w.-]+\] (?=\d{4}-\d\d-\d\d)"
    r"|\[?\d{4}-\d\d-\d\d[ T][\d:,.]+\]?(?: - (?:[\w.]+ - )?[A-Z]+ -| \[?[A-Z]+\]?| [\w.]+: \[[A-Z]+\])? (?:\[[\w.-]+:\d+(?::\w+)?\] )?"
    r"|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):[\w.]+:)")


# How a line with a label may begin: no label is looked for behind anything else.
_LABEL_STARTS = frozenset("[( \t\x1b0123456789IWEFDC")


def split(line: str) -> tuple[str, str]:
    """(the first rank or process label in front of the line, e.g. "[rank0]:", or ""; the line without colours and
    without the rank, process and logging labels in front of it, however many)."""
    line = ANSI_RE.sub("", line) if "\x1b" in line else line
    if line[:1] not in _LABEL_STARTS:
        return "", line
    first = None
    while True:
        for label in (RANK_RE, PROCESS_RE, POD_RE, LOGGING_RE):
            found = label.match(line)
            if found and found.end():
                if first is None and label is not LOGGING_RE:
                    first = found.group(0).strip()
                line = line[found.end():]
                break
        else:
            return first or "", line
