"""Packaging: the conda environment mirrors pyproject, imports stay light."""

import os
import re
import subprocess
import sys

import keras
import pytest
import yaml

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib
from conftest import REPO_ROOT

import capsules_keras
from capsules_keras import _startup

FRAMEWORKS = ("torch", "jax", "jaxlib", "tensorflow")


def _pyproject():
    with open(os.path.join(REPO_ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["project"]


def test_environment_yml_mirrors_pyproject():
    project = _pyproject()
    extras = project["optional-dependencies"]
    expected = set(project["dependencies"]) | set(extras["all"]) | set(extras["dev"])
    with open(os.path.join(REPO_ROOT, "environment.yml")) as f:
        env = yaml.safe_load(f)
    conda = [d for d in env["dependencies"] if isinstance(d, str)]
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    listed = {d for d in conda + pip if not d.startswith(("python", "pip", "-e"))}
    assert listed == expected
    python = next(d for d in conda if d.startswith("python"))
    assert python == "python" + project["requires-python"]


def test_all_extra_is_the_union_of_the_backends_and_plots():
    extras = _pyproject()["optional-dependencies"]
    backends = set(extras["torch"]) | set(extras["jax"]) | set(extras["tensorflow"])
    assert set(extras["all"]) == backends | set(extras["plots"])
    assert set(extras["plots"]) <= set(extras["dev"])
    assert not any(d.startswith("matplotlib") for d in _pyproject()["dependencies"])


def test_public_api():
    for name in ("Squash", "PrimaryCaps", "DigitCaps", "Length", "Mask", "MarginLoss"):
        assert name in capsules_keras.__all__
        assert getattr(capsules_keras, name).__module__.startswith("capsules_keras.")
    assert capsules_keras.__version__ == _pyproject()["version"]


@pytest.fixture(scope="module")
def lean_interpreter(mnist_path, tmp_path_factory):
    """A fresh interpreter where matplotlib cannot be imported (a lean
    install, no `plots` extra): which frameworks `import capsules_keras`
    loads beyond keras'; then import, build, train from the command line and
    report; then `plots`. One process for both tests below: an interpreter
    costs seconds.

    Returns:
        `(result, output_dir)`: the finished process and its runs folder.
    """
    output_dir = tmp_path_factory.mktemp("lean")
    script = f"""
import sys
sys.modules["matplotlib"] = None  # as if it were not installed
import keras
before = set(sys.modules)
import capsules_keras
new = {{m.split('.')[0] for m in set(sys.modules) - before}}
print("frameworks:", sorted(new & set({FRAMEWORKS!r})))
from capsules_keras import layers, losses, models, routing, training, train
assert train.main([
    "--data", {mnist_path!r}, "--max-train-samples", "100",
    "--max-test-samples", "60", "--batch-size", "50", "--epochs", "1",
    "--output-dir", {str(output_dir)!r}, "--verbose", "0",
    "--conv-filters", "16", "--primary-capsules", "4",
]) == 0
try:
    import capsules_keras.plots
except ImportError as error:
    print("plots:", error)
"""
    env = {**os.environ, "KERAS_BACKEND": keras.backend.backend()}
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO_ROOT,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result, output_dir


def test_import_loads_no_framework_beyond_keras(lean_interpreter):
    """`import capsules_keras` loads no torch/jax/tensorflow that keras did not."""
    result, _ = lean_interpreter
    assert "frameworks: []" in result.stdout.splitlines(), result.stdout


def test_make_demo_runs_the_quick_preset_on_a_real_backend():
    with open(os.path.join(REPO_ROOT, "Makefile")) as f:
        makefile = f.read()
    (default,) = re.findall(r"^DEMO_BACKEND \?= (\S+)$", makefile, re.MULTILINE)
    assert default in ("torch", "jax", "tensorflow")
    # Not as a sub-make of `make test`: no inherited flags, no directory lines.
    unset = ("KERAS_BACKEND", "MAKEFLAGS", "MAKELEVEL", "MFLAGS")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    dry_run = subprocess.run(
        ["make", "--no-print-directory", "--dry-run", "--always-make", "demo"]
        + ["DATA=some.npz"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    (command,) = [
        " ".join(line.split())
        for line in dry_run.replace("\\\n", " ").splitlines()
        if "capsules_keras.train" in line
    ]
    assert "-m capsules_keras.train --preset quick" in command
    assert '--data "some.npz"' in command
    assert f"KERAS_BACKEND=${{KERAS_BACKEND:-{default}}}" in command


def test_everything_but_the_figures_works_without_matplotlib(lean_interpreter):
    """A lean install: everything runs; `plots` names the extra."""
    result, output_dir = lean_interpreter
    assert "plots: " in result.stdout and "capsules-keras[plots]" in result.stdout
    (run,) = os.listdir(output_dir)
    with open(os.path.join(output_dir, run, "report.md")) as f:
        assert "No figures: they need matplotlib" in f.read()
    assert not [name for name in os.listdir(output_dir / run) if name.endswith(".png")]


def test_the_command_line_starts_quietly():
    # As a user starts it: no log level of ours in the environment. A run
    # seeds first, which starts tensorflow on every backend where it is
    # installed; then the command line's help.
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    script = (
        "import runpy, sys\n"
        "from capsules_keras.training.fit import seed_run\n"
        "seed_run(0)\n"
        "sys.argv = ['train', '--help']\n"
        "runpy.run_module('capsules_keras.train', run_name='__main__')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
    )
    assert result.returncode == 0 and result.stdout.startswith("usage:")
    assert result.stderr == ""


def test_start_up_information_is_held_back_and_warnings_are_not():
    text = (
        f"{_startup.COMPANIONS[0]} is called are written to STDERR\n"
        "I0000 00:00:17.9 1 cpu_feature_guard.cc:227] This binary is optimized\n"
        "To enable the following instructions: AVX2, rebuild TensorFlow.\n"
        "W0000 00:00:17.9 1 gpu.cc:1] Cannot dlopen some GPU libraries.\n"
        "Skipping registering GPU devices...\n"
        "I0000 00:00:17.9 1 port.cc:153] oneDNN custom operations are on.\n"
        "UserWarning: a Python warning\n"
    )
    assert _startup.without_information(text) == (
        "W0000 00:00:17.9 1 gpu.cc:1] Cannot dlopen some GPU libraries.\n"
        "Skipping registering GPU devices...\n"
        "UserWarning: a Python warning\n"
    )
