# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Strip the prefixes launchers put in front of a job's output lines.

Open MPI 4.1 ``mpirun --tag-output`` / ``--timestamp-output`` tags and Slurm ``srun --label`` labels: text in,
[(rank, stream, line)] out, which every parser of the all-reduce ladder reads its lines through.

Node side: shipped to the nodes inside the modules that import it (allreduce_run, torchrun_run), and with the job
runner (roles/train/files/trainops_job links this file).
"""

from __future__ import annotations

import re

# Open MPI prefixes each line with "[jobid,rank]<stream>:" under --tag-output, with ctime() in front under
# --timestamp-output, and "<stream>:" alone with --timestamp-output but no tags. The job id is a number in 4.x;
# it is matched loosely so that a named job (PRRTE) passes too.
_CTIME = r'[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}'
_MPI_TAG_RE = re.compile(r'(?:%s)?\[[^\[\],\s]+,(\d+)\]<(stdout|stderr|stddiag)>:' % _CTIME)
_MPI_TIMESTAMP_ONLY_RE = re.compile(r'^%s<(stdout|stderr|stddiag)>:' % _CTIME)
# Slurm's `srun --label` puts the task number in front of every line a task writes, right-aligned to the width of
# the highest one (" 0: ", "12: "); srun's own messages ("srun: error: ...") have none.
_SRUN_LABEL_RE = re.compile(r'^ *(\d+): ')


def strip_mpi_tags(text: str | None) -> list[tuple[int | None, str | None, str]]:
    """Open MPI or Slurm output -> [(rank or None, stream or None, line)] in order.

    Handles `--tag-output` ("[1,3]<stderr>:text"), `--tag-output --timestamp-output` (ctime before the tag),
    `--timestamp-output` alone (rank None), `srun --label` ("12: text", stream None, the task number as rank) and
    untagged text (rank and stream None). rank is the MPI_COMM_WORLD rank of the process that wrote the line. Open
    MPI 4.1 tags every chunk it forwards, so a line flushed in two pieces can carry a second tag in the middle,
    possibly after another rank's text: the pieces are joined per rank and stream, and the line is emitted when it
    ends.
    """
    out: list[tuple[int | None, str | None, str]] = []
    pending: dict[tuple[int, str], str] = {}
    for raw in (text or '').splitlines():
        label = _SRUN_LABEL_RE.match(raw)
        if label:
            out.append((int(label.group(1)), None, raw[label.end():]))
            continue
        only_stamp = _MPI_TIMESTAMP_ONLY_RE.match(raw)
        if only_stamp:
            out.append((None, only_stamp.group(1), raw[only_stamp.end():]))
            continue
        tags = list(_MPI_TAG_RE.finditer(raw))
        if not tags:
            out.append((None, None, raw))
            continue
        if tags[0].start() > 0:
            out.append((None, None, raw[:tags[0].start()]))
        for position, tag in enumerate(tags):
            key = (int(tag.group(1)), tag.group(2))
            last = position == len(tags) - 1
            piece = raw[tag.end():] if last else raw[tag.end():tags[position + 1].start()]
            if last:
                out.append((key[0], key[1], pending.pop(key, '') + piece))
            else:
                pending[key] = pending.get(key, '') + piece
    for (rank, stream), piece in pending.items():
        out.append((rank, stream, piece))
    return out


def _lines(text: str | None) -> list[str]:
    return [line for _rank, _stream, line in strip_mpi_tags(text)]
