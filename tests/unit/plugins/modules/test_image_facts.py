# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""image_facts against a fake engine that runs the real probe with this Python, in a fake image's site directory
(a torch module and the distributions' metadata), so the probe's reading of versions and requirements is the one
that runs in an image."""

import os
import sys

import pytest

from ansible_collections.trainops.cluster.plugins.modules import image_facts
import helpers.modules

# run --rm --network none [run args] --entrypoint PYTHON IMAGE -c PROBE PACKAGE...: the image is a directory of
# FAKE_IMAGES; "python3" there is this interpreter (the fake's own, set by its first line) with the image's site
# directory first on its path.
FAKE = r'''import os, sys
args = sys.argv[1:]
with open(os.environ["FAKE_ENGINE_CALLS"], "a") as log: log.write(" ".join(a for a in args if "\n" not in a) + "\n")
at = args.index("--entrypoint")
python, image = args[at + 1], args[at + 2]
site = os.path.join(os.environ["FAKE_IMAGES"], image)
if not os.path.isdir(site) or python != "python3":
    print('Error: executable file `%s` not found in $PATH' % python, file=sys.stderr); sys.exit(127)
env = dict(os.environ, PYTHONPATH=site, PYTHONNOUSERSITE="1")
os.execve(sys.executable, [sys.executable] + args[at + 3:], env)
'''
TORCH = '''__version__ = "2.9.0+cu128"
class version: cuda = "12.8"
class cuda:
    class nccl:
        @staticmethod
        def version(): return (2, 27, 5)
'''


def dist(site, name, version, requires=()):
    info = site / ("%s-%s.dist-info" % (name, version))
    info.mkdir(parents=True)
    lines = ["Metadata-Version: 2.1", "Name: " + name, "Version: " + version] + ["Requires-Dist: " + r for r in requires]
    (info / "METADATA").write_text("\n".join(lines) + "\n")


@pytest.fixture(name="engine")
def engine_fixture(tmp_path, monkeypatch):
    bindir, images = tmp_path / "bin", tmp_path / "images"
    bindir.mkdir()
    (bindir / "podman").write_text("#!%s\n%s" % (sys.executable, FAKE))
    (bindir / "podman").chmod(0o755)
    site = images / "train"
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text(TORCH)
    dist(site, "llamafactory", "0.9.4", ["transformers<=4.57.1,>=4.49.0", "peft>=0.14.0", 'deepspeed>=0.16; extra == "deepspeed"'])
    dist(site, "transformers", "4.58.0")
    dist(site, "peft", "0.17.1")
    monkeypatch.setenv("FAKE_IMAGES", str(images))
    monkeypatch.setenv("FAKE_ENGINE_CALLS", str(tmp_path / "calls"))
    monkeypatch.setenv("PATH", "%s:%s" % (bindir, os.environ["PATH"]))
    return tmp_path


def run(capsys, args, check_mode=False):
    return helpers.modules.run_module(image_facts, capsys, _ansible_check_mode=check_mode, **args)


def test_reads_python_torch_packages_and_unmet_requirements(engine, capsys):
    result = run(capsys, {"image": "train", "packages": ["transformers", "llamafactory", "deepspeed"], "run_args": ["--ulimit", "nofile=20000:20000"]})
    facts = result["ansible_facts"]["trainops_image"]
    assert result["changed"] is False
    assert facts["python"] == "%d.%d.%d" % sys.version_info[:3]
    assert facts["torch"] == {"version": "2.9.0+cu128", "cuda": "12.8", "nccl": "2.27.5"}
    assert facts["packages"] == {"transformers": "4.58.0", "llamafactory": "0.9.4", "deepspeed": None}
    # The requirement of an extra not asked for is not a requirement; a met one is not listed.
    assert facts["llamafactory_unmet"] == [{"requirement": "transformers<=4.57.1,>=4.49.0", "installed": "4.58.0"}]
    assert facts["unavailable"] == {}
    call = (engine / "calls").read_text()
    assert call.startswith("run --rm --network none --ulimit nofile=20000:20000 --entrypoint python3 train -c")


def test_an_image_without_the_python_is_reported_not_failed(engine, capsys):
    result = run(capsys, {"image": "probe:1"}, check_mode=True)
    facts = result["ansible_facts"]["trainops_image"]
    assert not result.get("failed")
    assert (facts["python"], facts["torch"], facts["llamafactory_unmet"]) == (None, None, None)
    assert facts["unavailable"]["probe"] == "podman exited 127: Error: executable file `python3` not found in $PATH"


def test_an_image_without_torch_or_llamafactory(engine, capsys):
    site = engine / "images" / "plain"
    site.mkdir()
    facts = run(capsys, {"image": "plain", "packages": ["transformers"]})["ansible_facts"]["trainops_image"]
    assert (facts["torch"], facts["llamafactory_unmet"], facts["packages"]) == (None, None, {"transformers": None})
    assert facts["unavailable"]["torch"].startswith("ModuleNotFoundError")
