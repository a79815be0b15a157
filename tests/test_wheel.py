"""The release a user installs: the wheel and the sdist build, and the wheel
works on its own in a fresh virtual environment.

`python -m build` makes both; the wheel goes into a new venv without the
repository on the path and without an editable install, and a tiny CapsNet
trains one step, saves, loads and predicts the same there, and the
pretrained model loads from the installed package. The venv borrows
the suite's installed dependencies (keras and the backend) through a path
file rather than downloading them again; the package itself comes only from
the wheel, which the test checks. The wheel holds the package and nothing
else: no tests, notebooks, benchmarks or docs.
"""

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import keras
import pytest
from conftest import REPO_ROOT

import capsules_keras
from capsules_keras.models import PRETRAINED

SCRIPT = """
import numpy as np, keras, capsules_keras
from capsules_keras import CapsNet
print(capsules_keras.__file__)
model = CapsNet(conv_filters=8, primary_capsules=2, decoder_units=(16,))
model.compile()
x = np.random.default_rng(0).random((4, 28, 28, 1), dtype="float32")
model.fit(x, np.arange(4), batch_size=4, epochs=1, verbose=0)
model.save("tiny.keras")
loaded = keras.models.load_model("tiny.keras")
before, after = model.predict(x, verbose=0), loaded.predict(x, verbose=0)
np.testing.assert_allclose(after, before, atol=1e-6)
pretrained = capsules_keras.EfficientCapsNet.from_preset("efficient_capsnet_mnist")
assert pretrained.predict(x, verbose=0).shape == (4, 10)
print("ok")
"""


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    # Built from a copy: the suites of two backends run at the same time, and
    # setuptools writes build/ and *.egg-info next to the sources.
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(Path(REPO_ROOT, name), source)
    shutil.copytree(
        Path(REPO_ROOT, "capsules_keras"),
        source / "capsules_keras",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out)],
        cwd=source,
        check=True,
        capture_output=True,
    )
    return out


def test_the_wheel_holds_the_package_only(dist):
    (wheel,) = dist.glob("*.whl")
    (sdist,) = dist.glob("*.tar.gz")
    assert capsules_keras.__version__ in wheel.name and sdist.exists()
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/")[0] for name in names}
    assert top == {
        "capsules_keras",
        f"capsules_keras-{capsules_keras.__version__}.dist-info",
    }
    packages = {os.path.dirname(n) for n in names if n.endswith("__init__.py")}
    expected = {
        str(path.parent.relative_to(REPO_ROOT))
        for path in Path(REPO_ROOT, "capsules_keras").rglob("__init__.py")
    }
    assert packages == expected  # every subpackage, e.g. capsules_keras/routing
    for name in PRETRAINED:  # and the pretrained models with their cards
        for ext in ("keras", "json"):
            assert f"capsules_keras/models/weights/{name}.{ext}" in names


def test_the_wheel_trains_saves_and_loads_in_a_fresh_venv(dist, tmp_path):
    (wheel,) = dist.glob("*.whl")
    venv = tmp_path / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True
    )
    python = venv / "bin" / "python"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--no-deps",
            "--quiet",
            str(wheel),
        ],
        check=True,
    )
    # keras and the backend from the suite's environment, after the venv's own
    # site-packages (where the wheel went); a path file does not run the
    # editable install's hook, so the repository stays off the path.
    fresh = subprocess.run(
        [
            str(python),
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['purelib'])",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(fresh, "suite-dependencies.pth").write_text(
        sysconfig.get_paths()["purelib"] + "\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["KERAS_BACKEND"] = keras.backend.backend()
    result = subprocess.run(
        [str(python), "-c", SCRIPT],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    location, status = result.stdout.split()[-2:]
    assert Path(location).is_relative_to(venv) and status == "ok"
