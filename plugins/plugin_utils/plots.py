# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The report page's plots, drawn with matplotlib on the controller as SVG to embed in the page.

Deterministic output (no date, a fixed id salt), so a plot is kept in a cache by its data: a page built again from
reports whose curves did not change (the doctor's, say) draws nothing and does not even import matplotlib (1 s).
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import os
import re
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from ansible_collections.trainops.cluster.plugins.module_utils._job_events import Event

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# Colours the page's browser test looks for: a measured line, the link's limit.
BUSBW = "#1f6feb"
LIMIT = "#bf8700"
LOSS = "#8250df"
# The step plot's event markers: a stall the supervisor saw, a restart it made.
STALL = LIMIT
RESTART = "#cf222e"
MAX_NAMED = 8
# The time plot draws each node's windows as a line without markers: a node's line shows from its second window on, so a
# plot of nodes with one window each is drawn empty.
MIN_WINDOWS = 2
# (Any keys: matplotlib's stubs take rc_context's keys as the literal names of its parameters.)
RC: dict[Any, Any] = {"svg.hashsalt": "trainops", "svg.fonttype": "none", "font.size": 9, "axes.spines.top": False, "axes.spines.right": False}


def available() -> str | None:
    """None when plots can be drawn, else why not."""
    if importlib.util.find_spec("matplotlib") is None:
        return "matplotlib is not installed on the controller (pip install -r requirements.txt)"
    return None


class Cache:
    """SVGs by a hash of what they show, in one directory; prune() removes those this build did not use."""

    def __init__(self, directory: str):
        self.directory = directory
        self.used: set[str] = set()

    def get(self, data: object, draw: Callable[[], str]) -> str:
        name = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:32] + ".svg"
        self.used.add(name)
        path = os.path.join(self.directory, name)
        try:
            with open(path) as handle:
                return handle.read()
        except FileNotFoundError:
            pass
        svg = draw()
        os.makedirs(self.directory, exist_ok=True)
        with open(path + ".tmp", "w") as handle:
            handle.write(svg)
        os.replace(path + ".tmp", path)
        return svg

    def prune(self) -> None:
        for name in os.listdir(self.directory) if os.path.isdir(self.directory) else []:
            if name.endswith(".svg") and name not in self.used:
                os.remove(os.path.join(self.directory, name))


def _figure(height: float) -> Figure:
    from matplotlib.figure import Figure  # imported only when a plot is drawn (1 s)

    return Figure(figsize=(6.4, height))


def _svg(figure: Figure) -> str:
    out = io.StringIO()
    figure.savefig(out, format="svg", metadata={"Date": None}, bbox_inches="tight")
    # Embedded in HTML: the XML declaration and DOCTYPE would be text there.
    return re.sub(r"^.*?(<svg\b)", r"\1", out.getvalue(), count=1, flags=re.S)


def _size_label(value: float, _position: object) -> str:
    for unit, scale in (("G", 2 ** 30), ("M", 2 ** 20), ("K", 2 ** 10)):
        if value >= scale:
            return "%g%s" % (value / scale, unit)
    return "%g" % value


def _draw_busbw(series: Sequence[tuple[str, Sequence[Sequence[float]]]], limit_gbps: float | None) -> str:
    from matplotlib import rc_context
    from matplotlib.ticker import FuncFormatter

    with rc_context(RC):
        figure = _figure(2.8)
        axes = figure.subplots()
        # One line per run; past a handful the legend would hide the plot, so the runs go unnamed.
        named = len(series) <= MAX_NAMED
        for index, (name, points) in enumerate(series):
            sizes, values = zip(*points)
            axes.plot(sizes, values, marker="o", markersize=3, linewidth=1.6, label=name if named else None,
                      color=BUSBW if index == 0 or not named else None, alpha=1 if named else 0.5)
        if limit_gbps:
            axes.axhline(limit_gbps, color=LIMIT, linestyle="--", linewidth=1.4, label="link limit %.4g GB/s" % limit_gbps)
        axes.set_xscale("log", base=2)
        axes.xaxis.set_major_formatter(FuncFormatter(_size_label))
        axes.set_xlabel("message size (bytes)")
        axes.set_ylabel("busbw (GB/s)")
        axes.set_ylim(bottom=0)
        axes.grid(True, alpha=0.3)
        axes.legend(loc="upper left", fontsize=8, frameon=False)
        return _svg(figure)


def _draw_loss(points: Sequence[Sequence[float]], resumed_at: int | None) -> str:
    from matplotlib import rc_context

    with rc_context(RC):
        figure = _figure(2.6)
        axes = figure.subplots()
        steps, values = zip(*points)
        axes.plot(steps, values, color=LOSS, linewidth=1.6, label="loss")
        if resumed_at:
            axes.axvline(resumed_at, color=LIMIT, linestyle="--", linewidth=1.2, label="resumed at step %d" % resumed_at)
        axes.set_xlabel("step")
        axes.set_ylabel("loss")
        axes.grid(True, alpha=0.3)
        axes.legend(loc="upper right", fontsize=8, frameon=False)
        return _svg(figure)


def _draw_steps(series: Sequence[Sequence[Any]], marks: Iterable[Sequence[Any]]) -> str:
    from matplotlib import rc_context

    with rc_context(RC):
        figure = _figure(2.6)
        axes = figure.subplots()
        named = len(series) <= MAX_NAMED
        for index, (node, points) in enumerate(series):
            seconds, steps = zip(*points)
            axes.plot(seconds, steps, marker="o", markersize=2, linewidth=1.6, label=node if named else None,
                      color=BUSBW if index == 0 else "C%d" % index, alpha=1 if named else 0.5)
        # Each marker named at its line's top: stalls repeat, and a legend entry per restart would hide the lines.
        for at, label in marks:
            axes.axvline(at, color=RESTART if label.startswith(Event.RESTART) else STALL, linestyle="--", linewidth=1.2)
            axes.annotate(label, (at, 1), xycoords=("data", "axes fraction"), xytext=(2, -2), textcoords="offset points",
                          rotation=90, va="top", fontsize=8)
        axes.set_xlabel("seconds since the first step")
        axes.set_ylabel("step")
        axes.set_ylim(bottom=0)
        axes.grid(True, alpha=0.3)
        if named:
            axes.legend(loc="lower right", fontsize=8, frameon=False)
        return _svg(figure)


def _draw_perf(series: Sequence[Sequence[Any]]) -> str:
    from matplotlib import rc_context

    gpus = any(point[3] is not None for _node, points in series for point in points)
    with rc_context(RC):
        figure = _figure(3.6 if gpus else 2.6)
        panels = figure.subplots(2, 1, sharex=True) if gpus else [figure.subplots()]
        named = len(series) <= MAX_NAMED
        for index, (node, points) in enumerate(series):
            color = BUSBW if index == 0 else "C%d" % index
            seconds = [p[0] for p in points]
            panels[0].plot(seconds, [p[1] for p in points], linewidth=1.6, color=color, label="%s busy" % node if named else None)
            waits = [p[2] for p in points]
            if any(w is not None for w in waits):
                panels[0].plot(seconds, [w if w is not None else float("nan") for w in waits], linewidth=1.2, linestyle="--",
                               color=color, label="%s in collectives" % node if named else None)
            if gpus:
                panels[1].plot(seconds, [p[3] if p[3] is not None else float("nan") for p in points], linewidth=1.6, color=color,
                               label=node if named else None)
        panels[0].set_ylabel("% of the time")
        if gpus:
            panels[1].set_ylabel("GPU util %")
        for axes in panels:
            axes.set_ylim(0, 105)
            axes.grid(True, alpha=0.3)
        panels[-1].set_xlabel("seconds since the job's first step (or its first window)")
        if named:
            panels[0].legend(loc="lower left", fontsize=7, frameon=False, ncol=2)
        return _svg(figure)


def _draw_scale(points: Sequence[Sequence[float]], unit: str) -> str:
    from matplotlib import rc_context

    with rc_context(RC):
        figure = _figure(2.6)
        axes = figure.subplots()
        nodes, values = zip(*points)
        axes.plot(nodes, values, marker="o", markersize=4, color=BUSBW, linewidth=1.6, label="measured")
        # Ideal: each added node adds the smallest size's throughput per node.
        per_node = values[0] / nodes[0]
        axes.plot(nodes, [per_node * n for n in nodes], color=LIMIT, linestyle="--", linewidth=1.2, label="linear from %d node%s"
                  % (nodes[0], "s" if nodes[0] > 1 else ""))
        axes.set_xticks(list(nodes))
        axes.set_xlabel("nodes")
        axes.set_ylabel(unit)
        axes.set_ylim(bottom=0)
        axes.grid(True, alpha=0.3)
        axes.legend(loc="upper left", fontsize=8, frameon=False)
        return _svg(figure)


def scale(cache: Cache, rows: list[dict[str, Any]]) -> str | None:
    """train_action=scale's throughput against the nodes, with the line of linear scaling from the smallest size:
    samples per second where every measured size has them, else steps per second times the nodes (each node's share of
    the work per step being the same). rows: jobs.scale_table's. None with fewer than two measured sizes."""
    measured = [r for r in rows if r.get("steps_per_second")]
    if len(measured) < 2 or available():
        return None
    if all(r.get("samples_per_second") for r in measured):
        points, unit = [[r["world"], r["samples_per_second"]] for r in measured], "samples/s"
    else:
        points, unit = [[r["world"], r["steps_per_second"] * r["world"]] for r in measured], "steps/s x nodes"
    return cache.get(["scale", points, unit], lambda: _draw_scale(points, unit))


def busbw(cache: Cache, series: Iterable[tuple[str, Sequence[Sequence[float]]]], limit_gbps: float | None = None) -> str | None:
    """busbw (GB/s) against message size (bytes, log scale) for each run of a rung, and the link's limit when known.

    series: [(name, [[size, busbw_gbps]])]. Returns the SVG text, or None without a point or without matplotlib.
    """
    series = [(name, points) for name, points in series if points]
    if not series or available():
        return None
    return cache.get(["busbw", series, limit_gbps], lambda: _draw_busbw(series, limit_gbps))


def loss(cache: Cache, points: Sequence[Sequence[float]] | None, resumed_at: int | None = None) -> str | None:
    """Training loss by step; a vertical line where the run resumed from its checkpoint. None without points."""
    if not points or available():
        return None
    return cache.get(["loss", points, resumed_at], lambda: _draw_loss(points, resumed_at))


def _windows(series: list) -> int:
    """The most windows a node of the time plot has with a figure to draw (a window without one draws nothing)."""
    return max((sum(1 for point in points if any(value is not None for value in point[1:])) for _node, points in series), default=0)


def perf(cache: Cache, series: Sequence[Sequence[Any]]) -> str | None:
    """Where each node's ranks spend their time, window by window: the busy share (a straggler's stays on top) and, where
    stacks were read, the share waiting in collectives (dashed); the GPUs' utilization below where read.

    series: [[node, [[seconds, busy %, in collectives % or None, GPU % or None]]]]. None without MIN_WINDOWS windows on
    a node (perf_short says so) or without matplotlib.
    """
    series = [[node, points] for node, points in series if points]
    if _windows(series) < MIN_WINDOWS or available():
        return None
    return cache.get(["perf", series], lambda: _draw_perf(series))


def perf_short(series: list) -> str | None:
    """The line the page shows in place of the time plot where the nodes have windows but too few to draw a line
    (a short job, or one just started); None where there is no window at all, or enough."""
    windows = _windows(series)
    if not series or windows >= MIN_WINDOWS:
        return None
    return "not enough windows yet to draw (%d of the %d needed)" % (windows, MIN_WINDOWS)


def steps(cache: Cache, series: Sequence[Sequence[Any]], marks: Iterable[Sequence[Any]] = ()) -> str | None:
    """A job's step against time, one line per node, a dashed vertical line at each stall and restart.

    series: [[node, [[seconds, step]]]]; marks: [[seconds, label]]. Returns the SVG text, or None without a point or
    without matplotlib.
    """
    series = [[node, points] for node, points in series if points]
    if not series or available():
        return None
    return cache.get(["steps", series, list(marks)], lambda: _draw_steps(series, marks))
