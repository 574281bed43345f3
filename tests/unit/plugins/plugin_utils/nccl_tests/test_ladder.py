# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
from pathlib import Path

from ansible_collections.trainops.cluster.plugins.module_utils import gpu
from ansible_collections.trainops.cluster.plugins.module_utils.nccl_tests import cpu_allreduce, nccl_debug, perf_text
from ansible_collections.trainops.cluster.plugins.plugin_utils.nccl_tests import ladder

FIXTURES = Path(__file__).parents[4] / "fixtures"
SETTINGS = {
    "all_reduce_perf": "/opt/nccl-tests/build/all_reduce_perf", "mpirun": "mpirun", "env_wrapper": "trainops-env",
    "python": "python3", "cpu_program": "/opt/trainops/cpu_allreduce.py", "cpu_args": ["--max-bytes", "1048576"],
    "min_bytes": 8, "max_bytes": "8G", "gpu_max_bytes": "128M", "iters": 20, "warmup": 5, "json_dir": None,
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


def test_runs_preload_the_nccl_of_the_build():
    # As on the 1x H200: the build linked the pip NCCL, the loader found the system's (no rpath in the binaries).
    settings = dict(SETTINGS, nccl_library="/opt/nccl-tests/build/libnccl.so.2")
    steps = ladder.plan(["n1", "n2"], {"n1": 1, "n2": 1}, settings)
    single = steps[0]["runs"][0]["argv"]
    assert single[:4] == ["trainops-env", "env", "LD_PRELOAD=/opt/nccl-tests/build/libnccl.so.2", "/opt/nccl-tests/build/all_reduce_perf"]
    across = steps[-1]["runs"][0]["argv"]
    # After mpirun and the wrapper: only the ranks get it, not mpirun or its daemons.
    assert across[across.index("trainops-env") + 1:across.index("trainops-env") + 4] == [
        "env", "LD_PRELOAD=/opt/nccl-tests/build/libnccl.so.2", "/opt/nccl-tests/build/all_reduce_perf"]
    assert "env" not in ladder.plan(["n1", "n2"], {"n1": 1, "n2": 1}, SETTINGS)[-1]["runs"][0]["argv"]


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


def test_srun_launches_the_same_rungs_as_one_slurm_step_each():
    settings = dict(SETTINGS, launcher="srun", srun_mpi="pmix", srun_immediate="10", srun_args=[],
                    slurm_names={"n1": "node1", "n2": "node2", "n3": "node3"})
    cpu = ladder.plan(["n1", "n2", "n3"], {"n1": 0, "n2": 0, "n3": 0}, settings)[4]["runs"][0]
    assert cpu["argv"] == ["srun", "--label", "--mpi=pmix", "--nodes=3", "--ntasks=3", "--ntasks-per-node=1",
                           "--nodelist=node1,node2,node3", "--immediate=10", "--kill-on-bad-exit=1",
                           "trainops-env", "python3", "/opt/trainops/cpu_allreduce.py", "--max-bytes", "1048576"]
    steps = ladder.plan(["n1", "n2"], {"n1": 8, "n2": 8}, settings)
    # Within a node no launcher; across nodes a task per GPU, and every GPU of a node visible to each of its tasks.
    assert steps[1]["runs"][0]["argv"][0] == "trainops-env"
    across = steps[-1]["runs"][0]["argv"]
    assert across[:across.index("trainops-env")] == [
        "srun", "--label", "--mpi=pmix", "--nodes=2", "--ntasks=16", "--ntasks-per-node=8", "--nodelist=node1,node2",
        "--immediate=10", "--kill-on-bad-exit=1", "--gres=gpu:8"]
    assert [s["rung"] for s in steps] == [s["rung"] for s in ladder.plan(["n1", "n2"], {"n1": 8, "n2": 8}, SETTINGS)]


def h200_facts():
    h200 = FIXTURES / "gpu" / "h200x2"
    return gpu.gather(smi_xml=(h200 / "nvidia-smi-q.xml").read_text(), query_csv=(h200 / "query-gpu.csv").read_text(),
                      nvlink=(h200 / "nvlink-s.txt").read_text())


def node_output():
    text = (FIXTURES / "gpu" / "h200x2" / "all_reduce_perf.txt").read_text()
    return {"rc": 0, "timed_out": False, "seconds": 40.0, "result": perf_text.parse_perf_output(text), "debug": None}


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
    partial = {"rc": 124, "timed_out": True, "seconds": 60.2, "result": cpu_allreduce.parse_cpu_allreduce(""), "debug": None}
    verdict = ladder.judge_step(step, {"n1": partial}, {}, {}, 0.5)
    reasons = verdict["runs"][0]["reasons"]
    assert not verdict["passed"] and reasons[0] == "timed out after 60.2s on n1; not checked on n1, n2, n3"
    verdict = ladder.judge_step(step, {}, {}, {}, 0.5)
    assert verdict["runs"][0]["reasons"] == ["n1: the run could not start (node unreachable or setup failed)"]


def test_judge_timeout_says_what_the_cleanup_found_on_each_node():
    step = ladder.plan(["n1", "n2", "n3"], {"n1": 0, "n2": 0, "n3": 0}, SETTINGS)[4]
    partial = {"rc": 124, "timed_out": True, "seconds": 32.1, "result": cpu_allreduce.parse_cpu_allreduce(""), "debug": None}
    # As end_run reports: n3's rank was stopped (SIGSTOP) and needed SIGKILL, n1 was already clean, n2 did not
    # answer (its registered result is an unreachable one, without "found").
    nothing = {"found": [], "killed": [], "left": []}
    python3, orted = {"pid": 4242, "state": "stopped", "comm": "python3"}, {"pid": 4250, "state": "sleeping", "comm": "orted"}
    cleanup = {"n1": nothing, "n2": {"unreachable": True}, "n3": {"found": [python3, orted], "killed": [python3], "left": []}}
    reasons = ladder.judge_step(step, {"n1": partial}, {}, {}, 0.5, cleanup)["runs"][0]["reasons"]
    assert reasons[0] == ("timed out after 32.1s on n1; still running, ended by the cleanup: n3 python3 (stopped), orted (sleeping); "
                          "nothing of it left on n1; not checked on n2")
    perf = {"pid": 77, "state": "uninterruptible", "comm": "all_reduce_perf"}
    stuck = dict(cleanup, n2={"found": [perf], "killed": [perf], "left": [perf]})
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
    assert verdict["verdict"] == "FAIL" and ladder.report_rows([verdict])[0][7] == "FAIL"


def test_network_verdict_one_node():
    """One node: no port matrix runs (verify.yml passes an empty one); the rung is skipped, not passed, and shows why."""
    verdict = ladder.network_verdict({}, ["node1"])
    assert verdict["passed"] is None and verdict["verdict"] == "skipped"
    assert verdict["skipped"] == "skipped: one node" and verdict["runs"] == []
    assert ladder.report_rows([verdict]) == [["ports between nodes", "-", "-", "-", "-", "-", "-", "skipped", "skipped: one node"]]
    # A matrix left over from an earlier stage changes nothing.
    assert ladder.network_verdict({"ok": False, "messages": ["stale"]}, ["node1"]) == verdict


def four_nodes_output(name, seconds, as_recorded=False):
    text = (FIXTURES / "gpu" / "h200x2-nodes" / name).read_text()
    if not as_recorded:  # that run loaded another NCCL than it was built with; here, as a matching build prints it
        text = text.replace("nccl-headers=22809 nccl-library=22803", "nccl-headers=22803 nccl-library=22803")
    return {"rc": 0, "timed_out": False, "seconds": seconds, "result": perf_text.parse_perf_output(text),
            "debug": nccl_debug.parse_nccl_debug(text)}


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


def test_the_recorded_run_that_loaded_another_nccl_than_its_build_fails():
    # As recorded on the GPU test machine: built with torch's pip NCCL 2.28.9, the system's 2.28.3 won at run time.
    step = ladder.plan(NODES, dict.fromkeys(NODES, 1), SETTINGS)[3]
    run = ladder.judge_step(step, {"gpu1": four_nodes_output("all_nodes.txt", 35.9, as_recorded=True)}, {}, dict.fromkeys(NODES, VETH), 0.5)["runs"][0]
    assert not run["passed"]
    assert run["reasons"] == ["NCCL 2.28.3 loaded, but nccl-tests was built against NCCL 2.28.9: another libnccl.so.2 won at "
                              "run time (LD_LIBRARY_PATH, ldconfig)"]


def test_judge_real_four_nodes_names_socket_use_where_facts_list_an_hca():
    step = ladder.plan(NODES, dict.fromkeys(NODES, 1), SETTINGS)[3]
    hca = [{"device": "mlx5_0", "port": 1, "state": "1: DOWN", "rate_gbps": 400.0, "link_layer": "InfiniBand"}]
    comm = dict(dict.fromkeys(NODES, VETH), gpu3=dict(VETH, infiniband=hca))
    run = ladder.judge_step(step, {"gpu1": four_nodes_output("all_nodes.txt", 35.9)}, {}, comm, 0.5)["runs"][0]
    assert not run["passed"]
    assert run["reasons"] == ["NET/Socket used although IB devices exist on gpu3"]


def failed_rungs(verdicts):
    """What the role's final assert (and the torchrun role) count as failed: rejectattr('passed') | rejectattr('skipped')."""
    return [v["rung"] for v in verdicts if not v["passed"] and not v["skipped"]]


def test_a_skipped_step_is_never_passed():
    """verify.json and the table say skipped, passed is None; only rungs that ran and failed count as failed."""
    steps = ladder.plan(["vm"], {"vm": 2}, SETTINGS)
    skipped = ladder.judge_step(steps[2], {}, {}, {}, 0.5)
    assert skipped == {"rung": "pairs", "label": "node pairs", "wave": None, "skipped": "skipped: needs at least 2 nodes",
                       "passed": None, "verdict": "skipped", "runs": []}
    # As step.yml records a step after a failed one: the stop reason replaces the plan's.
    stopped = ladder.judge_step(dict(steps[1], skipped="not run: one GPU on each node failed"), {"vm": node_output()},
                                {"vm": h200_facts()}, {}, 0.5)
    assert stopped["passed"] is None and stopped["verdict"] == "skipped" and stopped["runs"] == []
    failed = ladder.judge_step(steps[1], {}, {}, {}, 0.5)
    verdicts = [ladder.network_verdict({}, ["vm"]), failed, skipped, stopped]
    assert failed_rungs(verdicts) == ["node"]
    assert [row[7] for row in ladder.report_rows(verdicts)] == ["skipped", "FAIL", "skipped", "skipped"]


def one_gpu_output():
    """The recorded node run as one rank would print it (rank 1's device line dropped): a run of the one-GPU rung."""
    text = (FIXTURES / "gpu" / "h200x2" / "all_reduce_perf.txt").read_text()
    text = "".join(line for line in text.splitlines(True) if "Rank  1 " not in line)
    return {"rc": 0, "timed_out": False, "seconds": 3.0, "result": perf_text.parse_perf_output(text), "debug": None}


def test_one_gpu_rung_is_not_judged():
    """One rank crosses no link: its busbw holds nothing, so the run says not judged rather than PASS."""
    step = ladder.plan(["vm"], {"vm": 2}, SETTINGS)[0]
    for min_busbw in (None, 100.0):
        verdict = ladder.judge_step(step, {"vm": one_gpu_output()}, {"vm": h200_facts()}, {}, 0.5, min_busbw_gbps=min_busbw)
        run = verdict["runs"][0]
        assert verdict["passed"] and run["passed"] and run["reasons"] == [] and run["threshold_gbps"] is None
        assert verdict["verdict"] == run["verdict"] == "not judged"
        assert run["not_judged"] == "not judged: one GPU on vm, no link exercised"
        assert ladder.report_rows([verdict])[0][7:] == ["not judged", "not judged: one GPU on vm, no link exercised"]
    # A run that failed is FAIL for what failed, with nothing about thresholds.
    failed = ladder.judge_step(step, {"vm": dict(one_gpu_output(), rc=1)}, {"vm": h200_facts()}, {}, 0.5)["runs"][0]
    assert (failed["verdict"], failed["not_judged"], failed["reasons"]) == ("FAIL", None, ["trainops-env exited with 1"])


def test_judged_run_says_pass():
    verdict = ladder.judge_step(ladder.plan(["vm"], {"vm": 2}, SETTINGS)[1], {"vm": node_output()}, {"vm": h200_facts()}, {}, 0.5)
    assert verdict["verdict"] == verdict["runs"][0]["verdict"] == "PASS" and verdict["runs"][0]["not_judged"] is None


def test_no_link_limit_is_not_judged_and_names_the_link():
    """Over veths no limit is known: not judged, naming each node's interface, unless verify_min_busbw_gbps is set."""
    step = ladder.plan(NODES, dict.fromkeys(NODES, 1), SETTINGS)[3]
    comm = dict.fromkeys(NODES, VETH)
    output = {"gpu1": four_nodes_output("all_nodes.txt", 35.9)}
    verdict = ladder.judge_step(step, output, {}, comm, 0.5)
    run = verdict["runs"][0]
    why = "not judged: no link limit known for gpu1's train0, gpu2's train0, gpu3's train0, gpu4's train0"
    assert verdict["passed"] and verdict["verdict"] == run["verdict"] == "not judged" and run["not_judged"] == why
    assert failed_rungs([verdict]) == []
    assert ladder.report_rows([verdict])[0][7:] == ["not judged", why]
    # The interface the facts name for NCCL wins over the list of interfaces that are up.
    named = dict(comm, gpu2=dict(VETH, nccl_socket_ifname="eth1"))
    assert "gpu2's eth1" in ladder.judge_step(step, output, {}, named, 0.5)["runs"][0]["not_judged"]

    judged = ladder.judge_step(step, output, {}, comm, 0.5, min_busbw_gbps=1.5)
    run = judged["runs"][0]
    assert judged["verdict"] == run["verdict"] == "PASS" and run["not_judged"] is None and run["threshold_gbps"] == 1.5
    assert run["basis"] == "verify_min_busbw_gbps 1.5 GB/s (no link limit known for gpu1's train0, gpu2's train0, gpu3's train0, gpu4's train0)"
    too_slow = ladder.judge_step(step, output, {}, comm, 0.5, min_busbw_gbps=2.0)
    assert too_slow["verdict"] == "FAIL" and not too_slow["passed"]
    assert too_slow["runs"][0]["reasons"] == ["busbw 1.6 GB/s < threshold 2.0 GB/s"]


def test_node_rung_without_link_facts_is_not_judged():
    step = ladder.plan(["vm"], {"vm": 2}, SETTINGS)[1]
    run = ladder.judge_step(step, {"vm": node_output()}, {"vm": {"nvlink": None}}, {}, 0.5)["runs"][0]
    assert run["verdict"] == "not judged" and run["not_judged"] == "not judged: no link limit known for vm's GPU links (no NVLink or PCIe facts)"


def test_cpu_rung_stays_pass():
    """The CPU rung proves the launch path, not bandwidth (it has no scope): a clean run passes as before."""
    nodes = ["node1", "node2", "node3"]
    step = ladder.plan(nodes, dict.fromkeys(nodes, 0), SETTINGS)[4]
    text = (FIXTURES / "nccl_tests" / "cpu_allreduce_3ranks.txt").read_text()
    out = {"rc": 0, "timed_out": False, "seconds": 2.0, "result": cpu_allreduce.parse_cpu_allreduce(text), "debug": None}
    verdict = ladder.judge_step(step, {"node1": out}, {}, {}, 0.5, min_busbw_gbps=1000.0)
    assert verdict["verdict"] == "PASS" and verdict["runs"][0]["not_judged"] is None, verdict["runs"][0]["reasons"]


def test_a_gpu_node_without_gpus_fails_the_gpu_cluster():
    """A node that lost its GPUs must not turn the cluster into a CPU one that passes on the CPU rung."""
    nodes = ["node1", "node2", "node3"]
    facts = {"node2": {"reason": "nvidia-smi failed (rc 9): NVIDIA-SMI has failed"}}
    steps = ladder.plan(nodes, {"node1": 8, "node2": 0, "node3": 8}, SETTINGS, gpu_facts=facts)
    assert "cpu" not in [s["rung"] for s in steps]
    assert [(s["rung"], s["skipped"]) for s in steps] == [("gpus", None)] + [
        (rung, "not run: GPUs on each node failed") for rung in ("gpu", "node", "pairs", "all")]
    verdict = ladder.judge_step(steps[0], {}, {}, {}, 0.5)
    assert verdict["passed"] is False and verdict["verdict"] == "FAIL"
    assert verdict["runs"][0]["reasons"] == ["node2 reports 0 GPUs, the others 8: nvidia-smi failed (rc 9): NVIDIA-SMI has failed"]
    assert ladder.report_rows([verdict])[0][:2] == ["GPUs on each node", "node1,node2,node3"]
    assert failed_rungs([verdict] + [ladder.judge_step(s, {}, {}, {}, 0.5) for s in steps[1:]]) == ["gpus"]


def test_fewer_gpus_than_the_others_or_than_expected():
    nodes = ["node1", "node2", "node3", "node4"]
    steps = ladder.plan(nodes, {"node1": 8, "node2": 4, "node3": 8, "node4": 0}, SETTINGS)
    assert steps[0]["problems"] == ["node2 reports 4 GPUs, 8 on node1, node3", "node4 reports 0 GPUs, 8 on node1, node3"]
    # Every node lost its GPUs: only verify_expect_gpus can tell that from a cluster that never had any.
    steps = ladder.plan(nodes[:2], {"node1": 0, "node2": 0}, SETTINGS, expect_gpus=8)
    assert steps[0]["problems"] == ["node1 reports 0 GPUs, expected 8 (verify_expect_gpus)",
                                    "node2 reports 0 GPUs, expected 8 (verify_expect_gpus)"]
    assert ladder.plan(nodes[:2], {"node1": 1, "node2": 1}, SETTINGS, expect_gpus=1)[0]["rung"] == "gpu"
    assert ladder.gpu_shortfall(nodes, dict.fromkeys(nodes, 0)) == []


def test_node_without_nvlink_is_judged_against_pcie_from_real_facts():
    """The recorded 2x H200 XML without its NVLink status: the node rung is measured against PCIe Gen5 x16 from gpu_facts."""
    h200 = FIXTURES / "gpu" / "h200x2"
    facts = gpu.gather(smi_xml=(h200 / "nvidia-smi-q.xml").read_text(), query_csv=(h200 / "query-gpu.csv").read_text(), nvlink="")
    assert facts["nvlink"] is None
    step = ladder.plan(["vm"], {"vm": 2}, SETTINGS)[1]
    run = ladder.judge_step(step, {"vm": node_output()}, {"vm": facts}, {}, 0.5)["runs"][0]
    assert run["verdict"] == "PASS" and run["limit_gbps"] == 63.0 and run["threshold_gbps"] == 31.5
    assert run["basis"] == "PCIe Gen5 x16: 63.0 GB/s per direction (no NVLink); threshold 50 % of it (verify_min_fraction)"


def test_json_output_goes_to_a_private_per_run_file():
    """nccl-tests' JSON holds rank 0's environment: a per-run, per-leader name in the private json_dir, not a fixed /tmp path."""
    private = dict(SETTINGS, json_dir="/home/train/.cache/trainops-verify", run_id="trainops-verify-20261201T120000-4242")
    steps = ladder.plan(["n1", "n2", "n3"], dict.fromkeys(["n1", "n2", "n3"], 8), private)
    files = [(run["leader"], run["json_file"]) for step in steps for run in step["runs"]]
    assert ("n2", "/home/train/.cache/trainops-verify/trainops-verify-20261201T120000-4242-n2.json") in files
    assert all(path.startswith(private["json_dir"] + "/" + private["run_id"] + "-" + leader) for leader, path in files)
    every = steps[-1]["runs"][0]["argv"]
    assert every[every.index("-J") + 1] == "/home/train/.cache/trainops-verify/trainops-verify-20261201T120000-4242-n1.json"
    assert all(run["json_file"] is None and "-J" not in run["argv"] for step in ladder.plan(["n1"], {"n1": 2}, SETTINGS) for run in step["runs"])


def test_without_verify_min_fraction_the_links_table_sets_the_threshold():
    step = ladder.plan(["vm"], {"vm": 2}, SETTINGS)[1]
    run = ladder.judge_step(step, {"vm": node_output()}, {"vm": h200_facts()}, {"vm": {}}, None)["runs"][0]
    # NVLink 478.1 GB/s: 60 %, the table's, and the verdict says so; the recorded 2x H200 (348.5 GB/s, 73 %) passes.
    assert run["threshold_gbps"] == 286.9 and run["verdict"] == "PASS", run
    assert run["basis"].endswith("; threshold 60 % of it (the table's for NVLink)"), run["basis"]
    assert ladder.fraction_for({"kind": "Ethernet"}, None) == (0.5, "the default, no table entry for Ethernet")
    assert ladder.fraction_for({"kind": "InfiniBand"}, None)[0] == 0.6 and ladder.fraction_for({"kind": "NVLink"}, 0.8) == (0.8, "verify_min_fraction")


def node_output_on(name, share=1.0):
    """The recorded H200 node's run as node `name` ran it, every busbw of its rows scaled by `share` (a node whose NVLink
    runs at that share of its peers')."""
    text = (FIXTURES / "gpu" / "h200x2" / "all_reduce_perf.txt").read_text().replace(" on         vm ", " on %10s " % name)
    output = {"rc": 0, "timed_out": False, "seconds": 40.0, "result": perf_text.parse_perf_output(text), "debug": None}
    result = dict(output["result"], rows=[dict(row, **{side: dict(row[side], busbw=round(row[side]["busbw"] * share, 1))
                                                       for side in ("out_of_place", "in_place") if row.get(side)})
                                          for row in output["result"]["rows"]])
    return dict(output, result=result)


def test_a_node_slower_than_its_peers_fails_though_above_the_links_threshold():
    # Four nodes of the recorded H200 pair (348.6 GB/s busbw, 73 % of NVLink's 478): n3's at 85 % of that still passes
    # the link's 60 % and is named against its peers' median.
    nodes = ["n1", "n2", "n3", "n4"]
    step = ladder.plan(nodes, dict.fromkeys(nodes, 2), SETTINGS)[1]
    outputs = {n: node_output_on(n, 0.85 if n == "n3" else 1.0) for n in nodes}
    facts = dict.fromkeys(nodes, h200_facts())
    verdict = ladder.judge_step(step, outputs, facts, dict.fromkeys(nodes, {}), None, outlier_fraction=0.1)
    assert [run["passed"] for run in verdict["runs"]] == [True, True, False, True] and verdict["verdict"] == "FAIL"
    assert verdict["runs"][2]["reasons"] == [
        "busbw 296 GB/s is 85 % of the other runs' median 349 GB/s (n3): this node is slower than its peers "
        "(verify_outlier_fraction 0.1)"]
    # Within the fraction, or not compared (null), or too few peers: no reason.
    near = dict(outputs, n3=node_output_on("n3", 0.95))
    assert ladder.judge_step(step, near, facts, dict.fromkeys(nodes, {}), None, outlier_fraction=0.1)["passed"]
    assert ladder.judge_step(step, outputs, facts, dict.fromkeys(nodes, {}), None)["passed"]
    two = ladder.plan(nodes[:2], dict.fromkeys(nodes, 2), SETTINGS)[1]
    assert ladder.judge_step(two, outputs, facts, dict.fromkeys(nodes, {}), None, outlier_fraction=0.1)["passed"]
