"""A chosen rendezvous master (cluster_master): the launch stage (launch.yml, which site.yml imports) gives node2
NODE_RANK 0 and makes its cluster_ip every node's MASTER_ADDR, the torchrun rung rendezvouses there (node2 hosts the
store), and a master outside group cluster is refused by site.yml before anything changes. launch.yml without it
restores node1."""

import json

from testbed_fixtures import CLUSTER, HOSTVARS, playbook

ENV = "/etc/trainops/launch.env"
# site.yml's launch stage alone (validation is tagged always); the rung alone, without the training run.
LAUNCH = ["--tags", "launch"]
RUNG = ["--tags", "torchrun", "-e", "torchrun_train=false"]
CHOSEN = ["-e", "cluster_master=node2"]


def launch_envs(node):
    """Every node's launch.env as {node: {name: value}}."""
    return {name: dict(line.split("=", 1) for line in node(name).file(ENV).content_string.splitlines()
                       if line and not line.startswith("#")) for name in CLUSTER}


def placement(envs):
    return {name: env["NODE_RANK"] for name, env in envs.items()}, {env["MASTER_ADDR"] for env in envs.values()}


def test_a_master_outside_group_cluster_is_refused_before_anything_changes(node, tmp_path):
    before = {name: node(name).file(ENV).sha256sum for name in CLUSTER}
    run = playbook("site.yml", *LAUNCH, "-e", "cluster_master=node9", "-e", "cluster_report_dir=%s" % tmp_path)
    assert run.returncode != 0
    assert "cluster_master node9 is not a host of group cluster (node1, node2, node3)" in run.stdout, run.stdout[-3000:]
    assert "nothing was changed on any node" in run.stdout
    assert {name: node(name).file(ENV).sha256sum for name in CLUSTER} == before


def test_a_chosen_master_gets_rank_0_and_the_rendezvous(node, tmp_path, assert_nothing_left):
    # Reports of their own: the other tests read the scenario's ladder run's (node1 the master).
    reports = ["-e", "cluster_report_dir=%s" % (tmp_path / "reports")]
    try:
        run = playbook("launch.yml", *CHOSEN, *reports)
        assert run.returncode == 0, run.stdout[-3000:]
        # node2 first, the others in inventory order after it; every node meets at node2.
        assert placement(launch_envs(node)) == ({"node2": "0", "node1": "1", "node3": "2"}, {HOSTVARS["node2"]["cluster_ip"]})

        rung = playbook("verify.yml", *RUNG, *CHOSEN, *reports)
        verdicts = {v["rung"]: v for v in json.loads((tmp_path / "reports" / "torchrun.json").read_text())}
        assert rung.returncode == 0, verdicts["torchrun"]["reasons"] or rung.stdout[-3000:]
        verdict = verdicts["torchrun"]
        assert verdict["passed"] and verdict["world_size"] == 3, verdict["reasons"]
        # torchrun numbers the ranks node by node in NODE_RANK order: global rank 0 ran on node2.
        assert [(r["rank"], r["node"]) for r in verdict["ranks"]] == [(0, "node2"), (1, "node1"), (2, "node3")]
        # The default launcher (the scenario's ladder run goes through srun): each node's rank in the image, from here.
        assert (tmp_path / "reports" / "torchrun" / "allreduce-node2.log").read_text().startswith("$ /usr/local/bin/trainops-run sh -c")
        assert_nothing_left()
    finally:
        # launch.yml is site.yml's launch stage without the validation the first test proved (about 4 s, not 20-30).
        restore = playbook("launch.yml", *reports)
    assert restore.returncode == 0, restore.stdout[-3000:]
    assert placement(launch_envs(node)) == ({name: str(rank) for rank, name in enumerate(CLUSTER)}, {HOSTVARS["node1"]["cluster_ip"]})
