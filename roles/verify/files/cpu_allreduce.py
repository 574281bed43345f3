#!/usr/bin/env python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""CPU rung of the all-reduce ladder: a real MPI_Allreduce across the nodes, checked element by element.

Run under mpirun, one process per node:
  mpirun ... python3 cpu_allreduce.py [--min-bytes N] [--max-bytes N] [--factor F] [--iters N] [--warmup N]

Needs only Python 3.9+ and mpi4py (Debian: python3-mpi4py with openmpi-bin); buffers are array.array('f'), so no
numpy. Defaults: --min-bytes 8, --max-bytes 16777216 (16 MiB), --factor 2, --iters 10, --warmup 2, which takes a
few seconds on three small nodes over TCP.

For each size from min to max (times factor, rounded down to whole float32 elements) every rank fills its send
buffer with (rank + 1) * m(i), where m(i) = i % period + 1, runs warmup + iters MPI_Allreduce(SUM) into a separate
receive buffer and compares every element with m(i) * size * (size + 1) / 2. The period keeps every partial sum an
integer below 2**24, so the float32 sums are exact in any reduction order; a missing, doubled or shifted
contribution changes the result.

Prints one JSON line per rank and size on stdout, the protocol that parse_cpu_allreduce() in
plugins/module_utils/nccl_tests/cpu_allreduce.py reads:
  {"rank": 0, "size": 3, "host": "node1", "bytes": 1048576, "seconds": 0.0121, "wrong": 0, "pid": 3101,
   "count": 262144, "dtype": "float", "op": "sum", "in_place": false}
seconds is the mean time of one MPI_Allreduce after a barrier; wrong counts the elements that differ. A rank that
cannot go on prints {"rank", "size", "host", "pid", "error"}, aborts the job and exits non-zero.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from array import array

FLOAT32_EXACT = 2 ** 24
MAX_PERIOD = 251
DEFAULTS = {'min_bytes': 8, 'max_bytes': 16 * 1024 * 1024, 'factor': 2, 'iters': 10, 'warmup': 2}


def pattern_period(nranks):
    """Length of the repeating pattern m(i) = i % period + 1 for which period * nranks * (nranks + 1) / 2 stays exact."""
    period = min(MAX_PERIOD, (FLOAT32_EXACT - 1) // (nranks * (nranks + 1) // 2))
    if period < 1:
        raise ValueError('%d ranks are too many for exact float32 sums' % nranks)
    return period


def _repeat(block, count):
    buf = block * (count // len(block) + 1)
    del buf[count:]
    return buf


def send_buffer(rank, count, period):
    """Elements (rank + 1) * (i % period + 1), i = 0 .. count - 1, as float32."""
    return _repeat(array('f', [(rank + 1) * (k + 1) for k in range(period)]), count)


def expected_sum(nranks, count, period):
    """What every element i of the reduced buffer must be: (i % period + 1) * nranks * (nranks + 1) / 2."""
    return _repeat(array('f', [(k + 1) * (nranks * (nranks + 1) // 2) for k in range(period)]), count)


def count_wrong(received, expected):
    """Number of elements that differ; comparing the bytes first keeps the common case fast."""
    if received.tobytes() == expected.tobytes():
        return 0
    wrong = sum(1 for got, want in zip(received, expected) if got != want)
    return wrong + abs(len(received) - len(expected))


def message_sizes(min_bytes, max_bytes, factor):
    """[(bytes, count)] from min_bytes to max_bytes, each a whole number of float32 elements, without repeats."""
    sizes = []
    nbytes = min_bytes
    while nbytes <= max_bytes:
        count = max(1, nbytes // 4)
        if not sizes or sizes[-1][1] != count:
            sizes.append((count * 4, count))
        nbytes *= factor
    return sizes


class _Parser(argparse.ArgumentParser):
    """Bad arguments raise, so that they are reported as an error line of the protocol like any other failure."""

    def error(self, message):
        raise ValueError(message)


def parse_args(argv):
    parser = _Parser(description='MPI_Allreduce (float32 sum) over a range of sizes, one JSON line per rank and size.')
    for name, help_text in (('min-bytes', 'smallest message in bytes'), ('max-bytes', 'largest message in bytes'),
                            ('factor', 'multiply the size by this between steps'), ('iters', 'timed iterations per size'),
                            ('warmup', 'untimed iterations per size')):
        parser.add_argument('--' + name, type=int, default=DEFAULTS[name.replace('-', '_')], help='%s (default %%(default)s)' % help_text)
    options = parser.parse_args(argv)
    if options.min_bytes < 1 or options.max_bytes < options.min_bytes:
        raise ValueError('need 1 <= --min-bytes <= --max-bytes, got %d and %d' % (options.min_bytes, options.max_bytes))
    if options.factor < 2 or options.iters < 1 or options.warmup < 0:
        raise ValueError('need --factor >= 2, --iters >= 1 and --warmup >= 0')
    return options


def emit(record):
    sys.stdout.write(json.dumps(record) + '\n')
    sys.stdout.flush()


def measure(mpi, comm, options, host):
    rank, nranks = comm.Get_rank(), comm.Get_size()
    period = pattern_period(nranks)
    sizes = message_sizes(options.min_bytes, options.max_bytes, options.factor)
    if rank == 0:
        sys.stdout.write('# cpu_allreduce: %d ranks, float32 sum, %d..%d B, factor %d, warmup %d, iters %d\n'
                         % (nranks, sizes[0][0], sizes[-1][0], options.factor, options.warmup, options.iters))
    for nbytes, count in sizes:
        send = send_buffer(rank, count, period)
        expected = expected_sum(nranks, count, period)
        recv = array('f', [-1.0]) * count
        for _warmup in range(options.warmup):
            comm.Allreduce([send, mpi.FLOAT], [recv, mpi.FLOAT], op=mpi.SUM)
        comm.Barrier()
        start = mpi.Wtime()
        for _iteration in range(options.iters):
            comm.Allreduce([send, mpi.FLOAT], [recv, mpi.FLOAT], op=mpi.SUM)
        seconds = (mpi.Wtime() - start) / options.iters
        emit({'rank': rank, 'size': nranks, 'host': host, 'bytes': nbytes, 'seconds': round(seconds, 9),
              'wrong': count_wrong(recv, expected), 'pid': os.getpid(), 'count': count, 'dtype': 'float', 'op': 'sum',
              'in_place': False})


def _launcher_rank():
    """Rank and world size from the launcher's environment, for an error line written before MPI is up."""
    for rank_var, size_var in (('OMPI_COMM_WORLD_RANK', 'OMPI_COMM_WORLD_SIZE'), ('PMIX_RANK', 'PMIX_SIZE'), ('PMI_RANK', 'PMI_SIZE')):
        if os.environ.get(rank_var, '').isdigit():
            size = os.environ.get(size_var, '')
            return int(os.environ[rank_var]), int(size) if size.isdigit() else None
    return 0, 1


def main(argv=None):
    rank, nranks = _launcher_rank()
    host = socket.gethostname()
    comm = None
    try:
        options = parse_args(argv)
        from mpi4py import MPI  # pylint: disable=import-outside-toplevel  # so that the checks above import without MPI
        comm = MPI.COMM_WORLD
        rank, nranks = comm.Get_rank(), comm.Get_size()
        measure(MPI, comm, options, host)
    except Exception as error:  # pylint: disable=broad-except  # any failure becomes an error line of the protocol
        emit({'rank': rank, 'size': nranks, 'host': host, 'pid': os.getpid(), 'error': '%s: %s' % (type(error).__name__, error)})
        if comm is not None:
            # The other ranks may wait in a collective for this one: end the whole job.
            comm.Abort(1)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
