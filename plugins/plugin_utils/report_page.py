# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Build the cluster report page: read the stages' JSON reports, judge (cluster_page.py), draw
(plots.py), and render the role report_page's Jinja2 template into one self-contained HTML file."""

from __future__ import annotations

import datetime
import glob
import json
import os
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

from ansible_collections.trainops.cluster.plugins.plugin_utils import cluster_page
from ansible_collections.trainops.cluster.plugins.plugin_utils import plots


def _load(path: str) -> tuple[Any, str]:
    """A report and when it was written (UTC, as text)."""
    with open(path) as handle:
        report = json.load(handle)
    stamp = datetime.datetime.fromtimestamp(os.stat(path).st_mtime, datetime.timezone.utc)
    return report, stamp.strftime("%Y-%m-%d %H:%M:%S UTC")


def read_reports(reports_dir: str) -> tuple[dict[str, Any], dict[str, str], list[str]]:
    """({stage: parsed report or None}, {stage: when written, UTC}, [problems]) for the stages of cluster_page.STAGES
    and the reports of cluster_page.EXTRAS."""
    reports: dict[str, Any] = {}
    made: dict[str, str] = {}
    problems: list[str] = []
    for key, name in [(key, name) for key, name, _title in cluster_page.STAGES] + list(cluster_page.EXTRAS):
        reports[key] = None
        try:
            reports[key], made[key] = _load(os.path.join(reports_dir, name))
        except FileNotFoundError:
            continue
        except (OSError, ValueError) as error:
            problems.append("%s could not be read: %s" % (name, error))
    return reports, made, problems


def read_job_reports(reports_dir: str) -> tuple[dict[str, Any], dict[str, str], list[str]]:
    """({job: its status report}, {job: when written, UTC}, [problems]) for every train-<job>.json (roles/train's
    train_report), in the order of the files' names."""
    reports: dict[str, Any] = {}
    made: dict[str, str] = {}
    problems: list[str] = []
    for name in sorted(glob.glob("train-*.json", root_dir=reports_dir)):
        job = name[len("train-"):-len(".json")]
        try:
            reports[job], made[job] = _load(os.path.join(reports_dir, name))
        except FileNotFoundError:
            continue  # deleted between the listing and the read
        except (OSError, ValueError) as error:
            problems.append("%s could not be read: %s" % (name, error))
    return reports, made, problems


def draw(model: dict[str, Any], cache: plots.Cache) -> dict[str, Any]:
    """The SVG plots of the page: {"rungs": [svg or None per ladder rung], "loss": svg or None (the torchrun rung's),
    "jobs": [{"steps", "loss", "scale", "perf": svg or None, "perf_short": the line shown in place of a time plot with
    too few windows, or None} per job]}."""
    rungs = []
    for rung in model["ladder"] or []:
        limits = [run["limit_gbps"] for run in rung["runs"] if run["limit_gbps"]]
        rungs.append(plots.busbw(cache, [(run["name"], run["curve"]) for run in rung["runs"]], min(limits) if limits else None))
    training = next((v for v in model["torchrun"] or [] if v.get("rung") == "train"), None)
    loss = plots.loss(cache, training.get("losses"), training.get("resumed_at")) if training else None
    jobs = [{"steps": plots.steps(cache, job["progress"]["nodes"], job["progress"]["marks"]) if job["progress"] else None,
             "loss": plots.loss(cache, job["losses"]), "scale": plots.scale(cache, job.get("scale") or []),
             "perf": plots.perf(cache, job.get("perf") or []), "perf_short": plots.perf_short(job.get("perf") or [])}
            for job in model["jobs"]]
    return {"rungs": rungs, "loss": loss, "jobs": jobs}


def build(reports_dir: str, template: str, title: str, now: datetime.datetime | None = None) -> tuple[str, Any]:
    """The page's HTML and its model's verdict. template: the path of the page's Jinja2 template. The plots are kept
    in reports_dir/.plots between builds (plots.Cache)."""
    reports, made, problems = read_reports(reports_dir)
    job_reports, job_made, job_problems = read_job_reports(reports_dir)
    model = cluster_page.page(reports, made, job_reports, job_made)
    cache = plots.Cache(os.path.join(reports_dir, ".plots"))
    drawn = draw(model, cache)
    cache.prune()
    environment = Environment(loader=FileSystemLoader(os.path.dirname(template)), autoescape=select_autoescape(default=True),
                              undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    html = environment.get_template(os.path.basename(template)).render(
        title=title, model=model, plots=drawn, problems=problems + job_problems, plots_missing=plots.available(),
        built=(now or datetime.datetime.now(datetime.timezone.utc)).strftime("%Y-%m-%d %H:%M:%S UTC"))
    return html, model["verdict"]
