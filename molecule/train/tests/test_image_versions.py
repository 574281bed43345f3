"""What runs inside the training image, read there and compared like the nodes' own versions: the image's Python
and torch are the rungs' and the jobs', not the hosts'."""

import json

from testbed_fixtures import CLUSTER, HOSTVARS, INVENTORY


def test_drift_report_holds_the_images_python_and_torch_for_every_node(node):
    report = json.loads((INVENTORY.parent / "reports" / "drift.json").read_text())
    rows = {r["key"]: r for r in report["rows"]}
    image, run_args = HOSTVARS["node1"]["training_image"], HOSTVARS["node1"]["training_image_run_args"]
    # Read again here, independently of the module, as a job in the image would see them (with the limits every
    # container on these nodes needs: this VM's hard limits cannot be raised). check_output quotes each argument,
    # so every run argument gets its own placeholder.
    python, torch = node("node2").check_output(
        "podman run --rm --network none " + "%s " * len(run_args) + "%s python3 -c %s",
        *run_args, image, "import platform, torch; print(platform.python_version(), torch.__version__)").split()
    for key, expected in (("image python", python), ("image torch", torch)):
        assert rows[key]["values"] == {name: expected for name in CLUSTER}, key
        assert rows[key]["severity"] == "critical" and rows[key]["status"] == "ok"
    # CPU torch: no CUDA to hold a driver to, so nothing is required of the nodes' drivers.
    assert set(rows["image torch cuda"]["values"].values()) == {None}
    assert report["requirements"] == [] and not report["failed"]
    # The hosts' own Python is not the training environment here: a difference of it would only warn.
    assert rows["python"]["severity"] == "warn"
