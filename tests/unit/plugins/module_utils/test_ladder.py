# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from pathlib import Path

from ansible_collections.trainops.cluster.plugins.module_utils import gpu, ladder, nccl_tests

FIXTURES = Path(__file__).parents[3] / "fixtures"
SETTINGS = {
    "all_reduce_perf": "/opt/nccl-tests/build/all_reduce_perf", "mpirun": "mpirun", "env_wrapper": "trainops-env",
    "python": "python3", "cpu_program": "/opt/trainops/cpu_allreduce.py", "cpu_args": ["--max-bytes", "1048576"],
    "min_bytes": 8, "max_bytes": "8G", "gpu_max_bytes": "128M", "iters": 20, "warmup": 5, "json_file": None,
    "mca": {"btl_tcp_if_include": "10.0.0.0/24"}, "export_env": ["NCCL_DEBUG"], "mpirun_args": [],
}


def test_pair_waves():
    assert ladder.pair_waves(["a", "b"]) == [[["a", "b"]]]
    assert ladder.pair_waves(["a", "b", "c", "d"]) == [[["a", "b"], ["c", "d"]]]
    assert ladder.pair_waves(["a", "b", "c", "d", "e"]) == [[["a", "b"], ["c", "d"]], [["e", "a"]]]
    assert ladder.pair_waves(["a"]) == []


def test_plan_gpu_cluster():
    steps = ladder.plan(["n1", "n2", "n3"], {"n1": 8, "n2": 8, "n3": 8}, SETTINGS)
    assert [(s["rung"], s["wave"], len(s["runs"])) for s in steps] == [
        ("gpu", None, 3), ("node", None, 3), ("pairs", 1, 1), ("pairs", 2, 1), ("all", None, 1)]
    gpu_run = steps[0]["runs"][1]
    assert gpu_run["leader"] == "n2" and gpu_run["ranks"] == 1
    assert gpu_run["argv"] == ["trainops-env", "/opt/nccl-tests/build/all_reduce_perf", "-b", "8", "-e", "128M", "-f", "2",
                               "-g", "1", "-c", "1", "-n", "20", "-w", "5"]
    assert steps[1]["runs"][0]["argv"][8:10] == ["-g", "8"] and steps[1]["runs"][0]["ranks"] == 8
    every = steps[-1]["runs"][0]
    assert every["ranks"] == 24 and every["hosts"] == ["n1", "n2", "n3"]
    assert every["argv"][:9] == ["mpirun", "--tag-output", "--bind-to", "none", "-np", "24", "-H", "n1:8,n2:8,n3:8", "--mca"]
    assert every["argv"][9:14] == ["btl_tcp_if_include", "10.0.0.0/24", "-x", "NCCL_DEBUG", "trainops-env"]
    assert every["argv"][every["argv"].index("-g") + 1] == "1"  # one rank per GPU
    assert steps[3]["runs"][0]["hosts"] == ["n3", "n1"]


def test_plan_two_nodes_and_one_node():
    steps = ladder.plan(["n1", "n2"], {"n1": 1, "n2": 1}, SETTINGS)
    assert [(s["rung"], s["skipped"] is None) for s in steps] == [("gpu", True), ("node", False), ("pairs", False), ("all", True)]
    single = ladder.plan(["n1"], {"n1": 2}, SETTINGS)
    assert [(s["rung"], s["skipped"]) for s in single][2:] == [
        ("pairs", "skipped: needs at least 2 nodes"), ("all", "skipped: needs at least 2 nodes")]


def test_plan_cpu_cluster():
    steps = ladder.plan(["n1", "n2", "n3"], {"n1": 0, "n2": 0, "n3": 0}, SETTINGS)
    assert [s["skipped"] for s in steps[:4]] == ["skipped: no GPUs on n1, n2, n3"] * 4
    cpu = steps[4]["runs"][0]
    assert cpu["kind"] == "cpu" and cpu["ranks"] == 3 and cpu["leader"] == "n1"
    assert cpu["argv"][-5:] == ["trainops-env", "python3", "/opt/trainops/cpu_allreduce.py", "--max-bytes", "1048576"]
    assert "-H" in cpu["argv"] and cpu["argv"][cpu["argv"].index("-H") + 1] == "n1:1,n2:1,n3:1"


def h200_facts():
    h200 = FIXTURES / "gpu" / "h200x2"
    return gpu.gather(smi_xml=(h200 / "nvidia-smi-q.xml").read_text(), query_csv=(h200 / "query-gpu.csv").read_text(),
                      nvlink=(h200 / "nvlink-s.txt").read_text())


def node_output():
    text = (FIXTURES / "gpu" / "h200x2" / "all_reduce_perf.txt").read_text()
    return {"rc": 0, "timed_out": False, "seconds": 40.0, "result": nccl_tests.parse_perf_output(text), "debug": None}


def test_judge_real_h200_node_rung():
    step = ladder.plan(["vm"], {"vm": 2}, SETTINGS)[1]
    verdict = ladder.judge_step(step, {"vm": node_output()}, {"vm": h200_facts()}, {"vm": {}}, 0.5)
    run = verdict["runs"][0]
    assert verdict["passed"] and run["passed"], run["reasons"]
    assert run["busbw_gbps"] == 348.6 and run["limit_gbps"] == 478.1 and run["pct_of_limit"] == 72.9
    assert run["threshold_gbps"] == 239.1
    verdict = ladder.judge_step(step, {"vm": node_output()}, {"vm": h200_facts()}, {"vm": {}}, 0.8)
    assert not verdict["passed"]
    assert verdict["runs"][0]["reasons"] == ["busbw 348.6 GB/s < threshold 382.5 GB/s (80% of 478 GB/s NVLink)"]


def test_judge_timeout_and_unreachable():
    step = ladder.plan(["n1", "n2", "n3"], {"n1": 0, "n2": 0, "n3": 0}, SETTINGS)[4]
    partial = {"rc": 124, "timed_out": True, "seconds": 60.2, "result": nccl_tests.parse_cpu_allreduce(""), "debug": None}
    verdict = ladder.judge_step(step, {"n1": partial}, {}, {}, 0.5)
    reasons = verdict["runs"][0]["reasons"]
    assert not verdict["passed"] and reasons[0] == "timed out after 60.2s on n1; not checked on n1, n2, n3"
    verdict = ladder.judge_step(step, {}, {}, {}, 0.5)
    assert verdict["runs"][0]["reasons"] == ["n1: the run could not start (node unreachable or setup failed)"]


def test_judge_timeout_says_what_the_cleanup_found_on_each_node():
    step = ladder.plan(["n1", "n2", "n3"], {"n1": 0, "n2": 0, "n3": 0}, SETTINGS)[4]
    partial = {"rc": 124, "timed_out": True, "seconds": 32.1, "result": nccl_tests.parse_cpu_allreduce(""), "debug": None}
    # As the role's cleanup reports: n3's rank was stopped (SIGSTOP) and had to be killed, n1 was already clean,
    # n2 did not answer (no lines at all).
    cleanup = {"n1": [], "n2": None, "n3": ["killed 4242 T python3", "killed 4250 S orted"]}
    reasons = ladder.judge_step(step, {"n1": partial}, {}, {}, 0.5, cleanup)["runs"][0]["reasons"]
    assert reasons[0] == ("timed out after 32.1s on n1; still running, killed by the cleanup: n3 python3 (stopped), orted (sleeping); "
                          "nothing of it left on n1; not checked on n2")
    stuck = dict(cleanup, n2=["killed 77 D all_reduce_perf", "left 77 D all_reduce_perf", "garbage"])
    reasons = ladder.judge_step(step, {"n1": partial}, {}, {}, 0.5, stuck)["runs"][0]["reasons"]
    assert "n2 all_reduce_perf (uninterruptible)" in reasons[0]
    assert "n2: all_reduce_perf (pid 77, uninterruptible) survived SIGKILL" in reasons


def test_report_rows():
    steps = ladder.plan(["vm"], {"vm": 2}, SETTINGS)
    verdicts = [ladder.judge_step(steps[1], {"vm": node_output()}, {"vm": h200_facts()}, {"vm": {}}, 0.5), ladder.judge_step(steps[2], {}, {}, {}, 0.5)]
    rows = ladder.report_rows(verdicts)
    assert rows[0][:5] == ["all GPUs of each node", "vm", "2", "348.6", "73%"] and rows[0][7] == "PASS"
    assert rows[1][7:] == ["skipped", "skipped: needs at least 2 nodes"]


def test_network_verdict():
    blocked = {"ok": False, "messages": ["node2 -> node1 (29500): timed out"]}
    verdict = ladder.network_verdict(blocked, ["node1", "node2"])
    assert not verdict["passed"] and verdict["runs"][0]["reasons"] == ["node2 -> node1 (29500): timed out"]
    assert ladder.report_rows([verdict])[0][:3] == ["ports between nodes", "node1,node2", "-"]


def test_network_verdict_one_node():
    """One node: no port matrix runs (verify.yml passes an empty one); the rung is skipped, passes and shows why."""
    verdict = ladder.network_verdict({}, ["node1"])
    assert verdict["passed"] and verdict["skipped"] == "skipped: one node" and verdict["runs"] == []
    assert ladder.report_rows([verdict]) == [["ports between nodes", "-", "-", "-", "-", "-", "-", "skipped", "skipped: one node"]]
    # A matrix left over from an earlier stage changes nothing.
    assert ladder.network_verdict({"ok": False, "messages": ["stale"]}, ["node1"]) == verdict


def four_nodes_output(name, seconds):
    text = (FIXTURES / "gpu" / "h200x2-nodes" / name).read_text()
    return {"rc": 0, "timed_out": False, "seconds": seconds, "result": nccl_tests.parse_perf_output(text),
            "debug": nccl_tests.parse_nccl_debug(text)}


# Comm facts as on those nodes: train0 is a veth, which has no speed, and no InfiniBand.
VETH = {"infiniband": [], "interfaces": [{"name": "train0", "state": "UP", "speed_mbps": None}]}
NODES = ["gpu1", "gpu2", "gpu3", "gpu4"]


def test_judge_real_four_node_rungs_over_sockets():
    steps = ladder.plan(NODES, dict.fromkeys(NODES, 1), SETTINGS)
    assert [(s["rung"], s["skipped"] is None) for s in steps] == [("gpu", True), ("node", False), ("pairs", True), ("all", True)]
    comm = dict.fromkeys(NODES, VETH)
    pairs = ladder.judge_step(steps[2], {"gpu3": four_nodes_output("pair_gpu3_gpu4.txt", 20.9)}, {}, comm, 0.5)
    assert [run["leader"] for run in pairs["runs"]] == ["gpu1", "gpu3"]
    assert pairs["runs"][0]["reasons"] == ["gpu1: the run could not start (node unreachable or setup failed)"]
    pair = pairs["runs"][1]
    assert pair["passed"] and pair["busbw_gbps"] == 1.78 and pair["transports"] == ["NET/Socket"]
    assert pair["limit_gbps"] is None and pair["pct_of_limit"] is None
    every = ladder.judge_step(steps[3], {"gpu1": four_nodes_output("all_nodes.txt", 35.9)}, {}, comm, 0.5)
    run = every["runs"][0]
    assert every["passed"] and run["reasons"] == [] and run["ranks"] == 4 and run["busbw_gbps"] == 1.64
    assert run["basis"] == "no active InfiniBand/RoCE port and no Ethernet speed known"


def test_judge_real_four_nodes_names_socket_use_where_facts_list_an_hca():
    step = ladder.plan(NODES, dict.fromkeys(NODES, 1), SETTINGS)[3]
    hca = [{"device": "mlx5_0", "port": 1, "state": "1: DOWN", "rate_gbps": 400.0, "link_layer": "InfiniBand"}]
    comm = dict(dict.fromkeys(NODES, VETH), gpu3=dict(VETH, infiniband=hca))
    run = ladder.judge_step(step, {"gpu1": four_nodes_output("all_nodes.txt", 35.9)}, {}, comm, 0.5)["runs"][0]
    assert not run["passed"]
    assert run["reasons"] == ["NET/Socket used although IB devices exist on gpu3"]
