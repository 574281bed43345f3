"""The field report's third trap rebuilt (issue 50), run by scripts/record-train-fixtures, not in the suite: every rank
reads its batches from one dataset file on shared storage that reads slowly, and the job crawls, its GPUs (here its
CPUs) idle at every load; the same job with the data staged (train_stage) reads the node's own copy. Recorded: both
jobs' folders at their verdicts (field-report, field-report-staged); printed and timed: steps/s before and after.

Shared storage made slow for real: the kernel's blkio throttle (cgroup v1, blkio.throttle.read_bps_device) on every
rank's reads from the disk that holds it (this VM's vda, the nodes' bind-mounted /mnt/shared), set from the host on the
ranks' own cgroups once they run; the ranks read past the page cache (train_ddp.py --data, O_DIRECT: a dataset larger
than the node's memory is read again every epoch; a plain read after POSIX_FADV_DONTNEED still found most pages cached
here, 2.9 MB of the disk's in 100 s). The stage's folder is a tmpfs on each node (/dev/shm): a node's own disk
that is not the shared storage's, as a server's local NVMe is not its NFS server's. Not slowed here: the stage's own
copy (its process is not a rank), one read of the data per node against every rank's read of it every epoch."""

import json
import os
import subprocess
import time
from pathlib import Path

from test_train_job import COMMAND, LIGHT, OPTIONS, RANK, SHARED, events, train, wait_for
from test_train_recovery import status
from testbed_fixtures import timed

DATASET = SHARED / "datasets" / "fieldreport"
SIZE_MB, READ_KB, RATE = 16, 512, 1 << 20  # each rank reads 512 KiB a step at 1 MiB/s: about 0.5 s a step
BASE = COMMAND.replace("--steps 200", "--steps 100000").replace("--save-every 5 --step-seconds 0.5", "--save-every 100000 --step-seconds 0")
ON_SHARED = BASE + " --data /mnt/shared/datasets/fieldreport/data.bin --read-kb %d" % READ_KB
STAGED = BASE + ' --data "$TRAINOPS_STAGE_DIR/fieldreport/data.bin" --read-kb %d' % READ_KB


def disk_of(path):
    """major:minor of the whole disk that holds path (the nodes' shared bind mount: this VM's vda): blkio throttles a
    disk, not a partition of it."""
    dev = os.stat(path).st_dev
    block = Path("/sys/dev/block/%d:%d" % (os.major(dev), os.minor(dev))).resolve()
    return ((block.parent if (block / "partition").exists() else block) / "dev").read_text().strip()


def throttle_ranks(job, count=3):
    """The blkio throttle on every rank's cgroup (the ranks of this job's containers, seen from the host: the rank
    processes themselves, not torchrun or the engine's command, whose command lines hold the script too and which run
    before the ranks' container exists); returns the cgroups throttled once count ranks run."""
    found = {}

    def ranks():
        for pid in subprocess.run(["pgrep", "-f", RANK], capture_output=True, text=True, check=False).stdout.split():
            try:
                environ = Path("/proc/%s/environ" % pid).read_bytes().split(b"\0")
                cgroup = [line.split(":", 2)[2] for line in Path("/proc/%s/cgroup" % pid).read_text().splitlines() if ":blkio:" in line]
            except OSError:
                continue
            if ("TRAINOPS_JOB=%s" % job).encode() in environ and cgroup:
                found[pid] = cgroup[0]
        return len(found) >= count
    wait_for(ranks, 120, "%d ranks of %s" % (count, job))
    for cgroup in set(found.values()):
        Path("/sys/fs/cgroup/blkio%s/blkio.throttle.read_bps_device" % cgroup).write_text("%s %d\n" % (disk_of(DATASET), RATE))
    return sorted(set(found.values()))


def steps_per_second(job, seconds=30):
    progress = SHARED / "jobs" / job / "node1.progress.json"

    def step():
        return json.loads(progress.read_text()).get("step") or 0
    first, began = step(), time.monotonic()
    time.sleep(seconds)
    return (step() - first) / (time.monotonic() - began)


def test_ranks_reading_slow_shared_storage_are_input_bound_and_the_stage_lifts_it(assert_nothing_left, record):
    DATASET.mkdir(parents=True, exist_ok=True)
    (DATASET / "data.bin").write_bytes(os.urandom(SIZE_MB << 20))
    figures = {}
    for job, command, stage in (("fieldreport", ON_SHARED, {}), ("fieldstaged", STAGED, {
            "train_stage": ["/mnt/shared/datasets/fieldreport"], "train_stage_dir": "/dev/shm/trainops-stage/fieldstaged"})):
        run = train("-e", "train_job=%s" % job, "-e", json.dumps(dict(OPTIONS, train_command=command, train_stall_seconds=60, **LIGHT, **stage)))
        assert run.returncode == 0, run.stdout[-3000:]
        throttled, started = throttle_ranks(job), time.time()
        try:
            print("%s: reads of %s throttled to %d B/s in its ranks' %d cgroups" % (job, disk_of(DATASET), RATE, len(throttled)))

            def input_bound():
                return [e for e in events(job) if e["event"] == "slow" and e.get("kind") == "input-bound"]
            if not stage:
                wait_for(input_bound, 180, "%s named input-bound" % job)
                found = input_bound()[0]
                timed("input-bound named (ranks reading slow shared storage)", found["at"] - started)
                print("named %.1f s after the throttle: %s" % (found["at"] - started, found["text"]))
                said = status(job)[1]["verdict"]
                assert said.startswith("running, slow: input-bound: every node's ranks wait for their data"), said
                record(job, "field-report")
            else:
                time.sleep(60)  # three windows of the sampler, judged by the supervisor
                said = status(job)[1]["verdict"]
                assert not input_bound() and "input-bound" not in said, (said, input_bound())
                # On these 2-core nodes its ranks then wait on each other in the all-reduce of a tiny model: recorded, the
                # words of a communication-bound job that sends little with nothing queued (test_recorded_jobs.py).
                record(job, "field-report-staged", ladder=True)
            figures[job] = steps_per_second(job)
            print("%s: %.2f steps/s (%s)" % (job, figures[job], said))
        finally:
            train("-e", "train_job=%s" % job, "-e", "train_action=stop", "-e", "cluster_report_page=false")
    timed("steps/s, ranks reading slow shared storage", figures["fieldreport"])
    timed("steps/s, the same job with its data staged", figures["fieldstaged"])
    assert figures["fieldstaged"] > 2 * figures["fieldreport"], figures
    assert_nothing_left()
