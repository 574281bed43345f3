# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Decide one rung of the all-reduce ladder: pass or fail a parsed rung result, with reasons in words.

Reasons name ranks and hosts: missing or misplaced ranks, failed processes and error lines, an incomplete run,
a NCCL library other than the build's, wrong values or no validation, busbw below the threshold, NET/Socket used
although InfiniBand exists.
"""

from __future__ import annotations

from typing import Any, Collection, Iterable

_MAX_ERROR_REASONS = 5


def _short_host(name: object) -> str:
    """nccl-tests and NCCL cut hostnames at the first dot; compare names the same way."""
    return str(name).split('.', 1)[0].lower()


def _spans(numbers: Iterable[int]) -> str:
    """[0, 1, 2, 5] -> '0-2, 5'."""
    spans: list[list[int]] = []
    for number in sorted(numbers):
        if spans and number == spans[-1][1] + 1:
            spans[-1][1] = number
        else:
            spans.append([number, number])
    return ', '.join(str(a) if a == b else '%d-%d' % (a, b) for a, b in spans)


def _ranks_text(numbers: Collection[int]) -> str:
    return ('rank %s' if len(numbers) == 1 else 'ranks %s') % _spans(numbers)


def _expected_placement(expected_ranks: int | Iterable[int] | dict[Any, str | None],
                        expected_hosts: Iterable[str] | None) -> tuple[dict[int, str | None], bool]:
    """-> ({rank: expected host or None}, placement_is_given)."""
    if isinstance(expected_ranks, dict):
        return {int(rank): host for rank, host in expected_ranks.items()}, True
    ranks = list(range(expected_ranks)) if isinstance(expected_ranks, int) else [int(rank) for rank in expected_ranks]
    hosts = list(expected_hosts or [])
    # mpirun's default by-slot mapping with -N/ppr puts consecutive ranks on one node: used only to name hosts.
    per_host = len(ranks) // len(hosts) if hosts and ranks and len(ranks) % len(hosts) == 0 else None
    if per_host and ranks == list(range(len(ranks))):
        return {rank: hosts[rank // per_host] for rank in ranks}, False
    return {rank: None for rank in ranks}, False


def _rank_reasons(result: dict[str, Any], expected_ranks: int | Iterable[int] | dict[Any, str | None] | None,
                  expected_hosts: Iterable[str] | None) -> list[str]:
    reasons: list[str] = []
    found: dict[int, str | None] = {}
    for entry in result.get('ranks') or []:
        if entry.get('rank') is not None:
            found[entry['rank']] = entry.get('host')
    found_hosts = set(_short_host(host) for host in found.values() if host)
    if expected_ranks is not None:
        placement, given = _expected_placement(expected_ranks, expected_hosts)
        missing: dict[str | None, list[int]] = {}
        for rank in sorted(set(placement) - set(found)):
            missing.setdefault(placement[rank], []).append(rank)
        for host, ranks in sorted(missing.items(), key=lambda item: item[1][0]):
            reasons.append('%s%s missing' % (_ranks_text(ranks), ' (%s)' % host if host else ''))
        extra = sorted(set(found) - set(placement))
        if extra:
            reasons.append('unexpected %s' % _ranks_text(extra))
        if given:
            for rank in sorted(set(found) & set(placement)):
                if placement[rank] and found[rank] and _short_host(found[rank]) != _short_host(placement[rank]):
                    reasons.append('rank %d ran on %s, expected %s' % (rank, found[rank], placement[rank]))
    if expected_hosts is not None:
        wanted = dict((_short_host(host), host) for host in expected_hosts)
        for short in sorted(set(wanted) - found_hosts):
            reasons.append('host %s missing: no rank ran there' % wanted[short])
        strangers: dict[str, list[int]] = {}
        for rank, host in found.items():
            if host and _short_host(host) not in wanted:
                strangers.setdefault(host, []).append(rank)
        for host, ranks in sorted(strangers.items()):
            reasons.append('%s ran on unexpected host %s' % (_ranks_text(ranks), host))
    return reasons


def _failure_reasons(result: dict[str, Any]) -> list[str]:
    reasons = []
    for proc in result.get('failed_processes') or []:
        where = ' (%s)' % proc['host'] if proc.get('host') else ''
        who = 'MPI rank %d%s' % (proc['rank'], where) if proc.get('rank') is not None else 'process %s%s' % (proc.get('pid'), where)
        if proc.get('signal') is not None:
            name = ' (%s)' % proc['signal_name'] if proc.get('signal_name') else ''
            reasons.append('%s exited on signal %d%s' % (who, proc['signal'], name))
        elif proc.get('exit_code') is not None:
            reasons.append('%s exited with code %d' % (who, proc['exit_code']))
        else:
            reasons.append('%s failed' % who)
    errors = result.get('errors') or []
    reasons.extend('error: %s' % line for line in errors[:_MAX_ERROR_REASONS])
    if len(errors) > _MAX_ERROR_REASONS:
        reasons.append('... and %d more error lines' % (len(errors) - _MAX_ERROR_REASONS))
    return reasons


def busbw_curve(rows: list[dict[str, Any]] | None) -> list[list[float]]:
    """[[size, best busbw of in-place and out-of-place]] in size order: the run's bandwidth curve, for the report page."""
    best: dict[int, float] = {}
    for row in rows or []:
        values = [side['busbw'] for side in (row['out_of_place'], row['in_place']) if side is not None and side['busbw'] is not None]
        if values:
            best[row['size']] = max(values + ([best[row['size']]] if row['size'] in best else []))
    return [[size, best[size]] for size in sorted(best)]


def _largest(rows: list[dict[str, Any]]) -> tuple[int | None, float | None]:
    """-> (size, best busbw over both halves of the rows of that size) of the largest size measured."""
    if not rows:
        return None, None
    size = max(row['size'] for row in rows)
    values = [side['busbw'] for row in rows if row['size'] == size for side in (row['out_of_place'], row['in_place'])
              if side is not None and side['busbw'] is not None]
    return size, (max(values) if values else None)


def _socket_reason(ib_present: bool | Iterable[str] | None, transports: dict[str, Any] | Iterable[str] | None) -> str | None:
    """NET/Socket carried data although InfiniBand exists: name the hosts where that is known."""
    if isinstance(transports, dict):
        used = transports.get('transports') or []
        socket_hosts = [host for host, names in (transports.get('transports_by_host') or {}).items() if 'NET/Socket' in names]
        ib_hosts = set(_short_host(host) for host, devices in (transports.get('ib_devices_by_host') or {}).items() if devices)
    else:
        used = list(transports or [])
        socket_hosts = []
        ib_hosts = set()
    if 'NET/Socket' not in used:
        return None
    everywhere = ib_present is True
    if isinstance(ib_present, (list, tuple, set)):
        ib_hosts |= set(_short_host(host) for host in ib_present)
    if socket_hosts:
        flagged = sorted(host for host in socket_hosts if everywhere or _short_host(host) in ib_hosts)
        return 'NET/Socket used although IB devices exist on %s' % ', '.join(flagged) if flagged else None
    if everywhere or ib_hosts:
        return 'NET/Socket used although IB devices exist%s' % (' on %s' % ', '.join(sorted(ib_hosts)) if ib_hosts else '')
    return None


def judge_rung(result: dict[str, Any], expected_ranks: int | Iterable[int] | dict[Any, str | None] | None,
               expected_hosts: Iterable[str] | None, min_busbw_gbps: float | None = None,
               ib_present: bool | Iterable[str] | None = False, transports: dict[str, Any] | Iterable[str] | None = None,
               limit: dict[str, Any] | None = None, require_validation: bool = True) -> dict[str, Any]:
    """Verdict for one rung from a parse_* result.

    expected_ranks: a count N (ranks 0..N-1), a list of ranks, or {rank: host} (then placement is checked too);
    with a count and expected_hosts dividing it, missing ranks are named with the host mpirun's by-slot mapping
    would have used. expected_hosts: hosts that must have run a rank (compared by short name). min_busbw_gbps: the
    threshold for busbw at the largest size (best of in-place and out-of-place). ib_present: True, or the hosts
    that have InfiniBand/RoCE devices (from facts). transports: parse_nccl_debug()'s result (hosts are then named)
    or a list of transport names. limit: link_limit_gbps()'s result, for pct_of_limit and the wording.
    require_validation: a run without data checks (-c 0) fails, since nothing then proves the values right.

    Returns {passed, reasons (human, naming ranks and hosts), busbw_gbps, size_bytes, threshold_gbps, limit_gbps,
    pct_of_limit (busbw in % of the limit, when known), transports}.
    """
    reasons = _failure_reasons(result)
    rows = result.get('rows') or []
    if not result.get('complete'):
        last = '; last size %d B' % rows[-1]['size'] if rows else ''
        reasons.append('output incomplete: no end-of-run footer (aborted, killed or timed out%s)' % last)
    if not rows:
        reasons.append('no result rows')
    reasons.extend(_rank_reasons(result, expected_ranks, expected_hosts))
    built, loaded = result.get('nccl_headers'), result.get('nccl_library')
    if built and loaded and built != loaded:
        # The field reports' first suspect for hangs: another libnccl than the build's won at run time.
        reasons.append('NCCL %s loaded, but nccl-tests was built against NCCL %s: another libnccl.so.2 won at run time '
                       '(LD_LIBRARY_PATH, ldconfig)' % (loaded, built))
    wrong_total = result.get('wrong_total')
    if wrong_total:
        sizes = sorted(set(row['size'] for row in rows for side in (row['out_of_place'], row['in_place']) if side and side['wrong']))
        shown = ', '.join(str(size) for size in sizes[:_MAX_ERROR_REASONS]) + (', ...' if len(sizes) > _MAX_ERROR_REASONS else '')
        reasons.append('%d wrong value%s (at %s B)' % (wrong_total, '' if wrong_total == 1 else 's', shown))
    elif wrong_total is None and rows and require_validation:
        reasons.append('values not checked: the run had no data validation (-c 0)')
    size, busbw = _largest(rows)
    limit_gbps = (limit or {}).get('limit_gbps')
    if min_busbw_gbps is not None:
        if busbw is None:
            reasons.append('no busbw measured')
        elif busbw < min_busbw_gbps:
            of_limit = ''
            if limit_gbps:
                of_limit = ' (%.0f%% of %.0f GB/s %s)' % (100.0 * min_busbw_gbps / limit_gbps, limit_gbps, (limit or {}).get('kind') or 'limit')
            reasons.append('busbw %.1f GB/s < threshold %.1f GB/s%s' % (busbw, min_busbw_gbps, of_limit))
    socket = _socket_reason(ib_present, transports)
    if socket:
        reasons.append(socket)
    used = transports.get('transports') if isinstance(transports, dict) else transports
    return {
        'passed': not reasons,
        'reasons': reasons,
        'busbw_gbps': busbw,
        'size_bytes': size,
        'threshold_gbps': min_busbw_gbps,
        'limit_gbps': limit_gbps,
        'pct_of_limit': round(100.0 * busbw / limit_gbps, 1) if busbw is not None and limit_gbps else None,
        'transports': list(used) if used is not None else None,
    }
