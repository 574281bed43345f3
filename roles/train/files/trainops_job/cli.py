# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""trainops-job ACTION NAME [ARG]: this node's part of job NAME (settings: /etc/trainops/jobs/NAME.json).

As root (train.yml, systemd's unit, Slurm's task):
  stage NAME            before the start, on every node: the stage (train_stage) copied to local disk and checked against
                        the manifest the first node makes meanwhile; JSON
  prepare NAME          before the start: the job's folder, this node's old records gone, the job record (first node)
  run NAME              the job's process: the command, its log, fail fast, the supervisor's requests, the exit record
  start NAME            run NAME detached from the caller (a node without systemd)
  stopping NAME         before any node is stopped: this node's part ending now is a stop
  stop NAME             this node's part stopped (the command ends first, then the engine), what is left swept; JSON
  sweep NAME            whatever of the job is left on this node ended (the unit's ExecStopPost); JSON
  report NAME           this node's report: state, exit, progress, log tail (first node: job record, supervisor); JSON
  diagnose NAME STALL   this node's answer to the supervisor's stall STALL (the runner starts it)
As the training user:
  stop-local NAME BY N  node BY failed in attempt N (over SSH from BY): this node's part of that attempt ends
  tee NAME ATTEMPT      the command's output from stdin into the node's log and progress record (the runner's)
  supervise NAME PID [EPOCH FROM]
                        the job's supervisor while runner PID runs (the runner's): the first node's (epoch 1), or
                        EPOCH's, taken from node FROM whose supervisor went silent (succession)
  wait NAME SECONDS     until the job ends, stalls or SECONDS pass (train_action=watch): ended, stalled or watching
"""

from __future__ import annotations

import json
import sys
from typing import Any, Callable

from . import records

# Each action imports the modules it needs when it runs, not here: the whole package (runner, supervisor, diagnosis, ...)
# took ~0.2 s to import on every call, a sixth of the stage's time on the GPU test machine (issue 50: within 1.3x of rsync).


def _printed(data: Any, status: int = 0) -> int:
    json.dump(data, sys.stdout)
    sys.stdout.write("\n")
    return status


def _stage(job: records.Job) -> int:
    """The stage's result as JSON; what makes it impossible on stderr, naming this node, and exit status 1."""
    from . import stage
    try:
        return _printed(stage.stage_here(job))
    except (stage.StageError, OSError) as exc:
        print("trainops-job: %s: %s" % (job.node, exc), file=sys.stderr)
        return 1


def _prepare(job: records.Job) -> int:
    from . import lifecycle
    lifecycle.prepare(job)
    return 0


def _run(job: records.Job) -> int:
    """The runner; should it fail, the traceback's last line in the node's log too, where status shows it (the runner's
    own output goes to the journal, or Slurm's output file on the node)."""
    from . import runner
    try:
        return runner.Runner(job).run()
    except Exception as exc:
        try:
            job.write_text(job.node_path("log"), "trainops-job: the runner on %s failed: %s: %s\n" % (job.node, type(exc).__name__, exc), "a")
        except OSError:
            pass  # the traceback still goes to the runner's own output
        raise


def _start(job: records.Job) -> int:
    from . import lifecycle
    return lifecycle.start(job)


def _stopping(job: records.Job) -> int:
    from . import lifecycle
    lifecycle.stopping(job)
    return 0


def _stop(job: records.Job) -> int:
    from . import lifecycle
    return _printed(lifecycle.stop(job))


def _sweep(job: records.Job) -> int:
    from . import lifecycle
    swept = lifecycle.sweep(job)
    return _printed(swept, 1 if swept["left"] else 0)


def _report(job: records.Job) -> int:
    from . import report
    return _printed(report.report(job))


def _diagnose(job: records.Job, stall: str) -> int:
    from . import diagnosis
    job.write(job.node_path("diagnosis"), diagnosis.diagnose(job, int(stall)))
    return 0


def _stop_local(job: records.Job, by: str, attempt: str) -> int:
    from . import lifecycle
    lifecycle.stop_local(job, by, attempt)
    return 0


def _tee(job: records.Job, attempt: str) -> int:
    from . import tee
    return tee.tee(job, sys.stdin.buffer.fileno(), attempt=int(attempt))


def _supervise(job: records.Job, pid: str, epoch: str = "1", taken_from: str | None = None) -> int:
    from . import supervisor
    return supervisor.main(job, int(pid), int(epoch), taken_from)


def _wait(job: records.Job, seconds: str) -> int:
    from . import supervisor
    print(supervisor.wait(job, float(seconds)))
    return 0


def _absent(action: str) -> int:
    """No job of that name was started on this node: nothing to report, stop or sweep."""
    if action == "report":
        from . import report
        return _printed(report.absent())
    return _printed({"stopped": False, "running": False, "ended": [], "left": [], "unstaged": False})


# Each action: what it does with the job (and its one argument, where it takes one), and its exit status.
_ACTIONS: dict[str, Callable[..., int]] = {
    "stage": _stage,
    "prepare": _prepare,
    "run": _run,
    "start": _start,
    "stopping": _stopping,
    "stop": _stop,
    "sweep": _sweep,
    "report": _report,
    "diagnose": _diagnose,
    "stop-local": _stop_local,
    "tee": _tee,
    "supervise": _supervise,
    "wait": _wait,
}


def main(argv: list[str]) -> int:
    takes = {"diagnose": (1,), "stop-local": (2,), "supervise": (1, 3), "wait": (1,), "tee": (1,)}
    if len(argv) < 2 or argv[0] not in _ACTIONS or len(argv) - 2 not in takes.get(argv[0], (0,)):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    action, name = argv[0], argv[1]
    try:
        job = records.Job.load(name)
    except ValueError as exc:
        print("trainops-job: %s" % exc, file=sys.stderr)
        return 2
    except FileNotFoundError:
        if action in ("report", "stop", "stopping", "sweep"):
            return _absent(action)
        print("trainops-job: no job %s on this node (%s/%s.json)" % (name, records.CONF_DIR, name), file=sys.stderr)
        return 2
    return _ACTIONS[action](job, *argv[2:])
