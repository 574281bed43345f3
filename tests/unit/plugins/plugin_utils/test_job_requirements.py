# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What a job in the image needs of each node: the driver's CUDA, LLaMA-Factory's requirements."""

from ansible_collections.trainops.cluster.plugins.filter.drift import drift_compare, drift_values
from ansible_collections.trainops.cluster.plugins.plugin_utils.job_requirements import check

# The recorded H200 driver runs CUDA 13.0; the facts scenario's older node 570.172.08 runs 12.8.
NEW = {"driver": "580.95.05", "cuda (driver)": "13.0"}
OLD = {"driver": "570.172.08", "cuda (driver)": "12.8"}
IMAGE = {"python": "3.12.3", "torch": {"version": "2.9.0+cu130", "cuda": "13.0", "nccl": "2.27.7"},
         "packages": {"transformers": "4.57.1", "llamafactory": "0.9.4", "deepspeed": None}, "llamafactory_unmet": []}


def values(gpu, image):
    return drift_values({"driver_version": gpu["driver"], "cuda_version": gpu["cuda (driver)"], "available": True}, None, None, image)


def test_image_values_sit_beside_the_nodes_own():
    node = values(NEW, IMAGE)
    assert {k: v for k, v in node.items() if k.startswith("image ")} == {
        "image python": "3.12.3", "image torch": "2.9.0+cu130", "image torch cuda": "13.0", "image nccl": "2.27.7",
        "image llamafactory": "0.9.4", "image transformers": "4.57.1", "image llamafactory unmet": []}
    assert not any(k.startswith("image ") for k in drift_values({}, None, None, None))


def test_a_driver_of_an_older_cuda_major_fails_the_report_naming_the_node():
    by_host = {"node1": values(NEW, IMAGE), "node2": values(NEW, IMAGE), "node3": values(OLD, IMAGE)}
    result = drift_compare(by_host, {"image torch cuda": "critical"}, "warn", ["node1", "node2", "node3"])
    assert result["failed"]
    assert [f["host"] for f in result["requirements"]] == ["node3"]
    assert ("node3: the image's torch is built for CUDA 13.0, but the driver 570.172.08 runs CUDA up to 12.8: torch finds no "
            "usable GPU there. Install a driver for CUDA 13.0 or later on node3, or run an image built for CUDA 12.x.") in result["errors"]


def test_an_older_minor_cuda_warns_and_a_newer_driver_is_fine():
    image = dict(IMAGE, torch={"version": "2.7.1+cu128", "cuda": "12.8", "nccl": "2.26.2"})
    older = values({"driver": "550.163.01", "cuda (driver)": "12.4"}, image)
    findings = check({"node1": older, "node2": values(NEW, image)}, ["node1", "node2"])
    assert [(f["host"], f["severity"]) for f in findings] == [("node1", "warn")]
    assert "minor-version compatibility" in findings[0]["message"]


def test_cpu_torch_or_no_gpu_needs_no_driver():
    cpu = dict(IMAGE, torch={"version": "2.6.0", "cuda": None, "nccl": None})
    assert check({"node1": values(OLD, cpu), "node2": drift_values({}, None, None, IMAGE)}, ["node1", "node2"]) == []


def test_unmet_llamafactory_requirements_warn_with_what_is_installed():
    image = dict(IMAGE, llamafactory_unmet=[{"requirement": "transformers<=4.57.1,>=4.49.0", "installed": "4.58.0"},
                                            {"requirement": "peft>=0.14.0", "installed": None}])
    result = drift_compare({"node1": values(NEW, image)}, {}, "warn", ["node1"])
    assert not result["failed"]
    assert result["warnings"] == [
        "node1: the image's LLaMA-Factory 0.9.4 requires transformers<=4.57.1,>=4.49.0 (installed 4.58.0); peft>=0.14.0 "
        "(installed none): llamafactory-cli checks this at start and stops (unless DISABLE_VERSION_CHECK=1). Install those "
        "versions in the image."]
