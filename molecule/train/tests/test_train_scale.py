"""train_action=scale on the 3 CPU nodes: the job's own command on node1 alone, then node1 and node2, then all three
(the others stand by until their size), each size measured by the supervisor on node1 over the same steps after a
warmup, each started afresh; the controller shows what each size buys. The time to the table goes to scripts/benchmark
(the issue's 5 min); the bound here is a never-hang one."""

import json
import time

from test_train_job import COMMAND, OPTIONS, train, wait_for
from testbed_fixtures import CLUSTER, INVENTORY, timed

SCALE = dict(OPTIONS, train_action="scale", train_scale_warmup=3, train_scale_steps=10,
             train_command=COMMAND.replace("--steps 200", "--steps 100000").replace("--step-seconds 0.5", "--step-seconds 0.2"))


def test_scale_measures_one_two_and_three_nodes(node, assert_nothing_left):
    started = time.monotonic()
    run = train("-e", "train_job=scale", "-e", json.dumps(SCALE))
    timed("scale on 3 nodes: the table", time.monotonic() - started, 900)
    assert run.returncode == 0, run.stdout[-3000:]
    report = json.loads((INVENTORY.parent / "reports" / "train-scale.json").read_text())
    assert [(r["world"], r["nodes"]) for r in report["scale"]] == [(1, ["node1"]), (2, ["node1", "node2"]), (3, CLUSTER)]
    assert all(r["steps_per_second"] > 0 and r["error"] is None for r in report["scale"]), report["scale"]
    assert report["scale"][0]["speedup"] == 1.0 and report["verdict"].startswith("scaled: 2 nodes "), report["verdict"]
    assert "speedup" in run.stdout and "what bounds a size is not judged" in run.stdout
    print(report["verdict"])
    # Every node's part ended, stopped by the supervisor once the last size was measured.
    assert {report["nodes"][n]["state"] for n in CLUSTER} == {"stopped: scaling measured"}, report["nodes"]
    wait_for(lambda: all(node(n).run("podman ps -q").stdout.strip() == "" for n in CLUSTER), 30, "every node's container gone")
    assert_nothing_left()
