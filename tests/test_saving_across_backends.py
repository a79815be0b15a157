"""Saved `.keras` files load and predict the same on every backend and version.

Every model saved on this backend loads on the next one in `BACKENDS`'s
ring (torch -> jax -> tensorflow -> torch), so that the three suites
together save on every backend and load on every backend; the golden files
in `tests/data/golden/`, saved by an earlier version
(`tests/data/save_golden_models.py`), load here with their predictions.

One fresh interpreter of the next backend loads all the models at once:
starting one (and importing its framework) costs seconds, which is why
each suite starts one, not one per other backend: loading on both others
was the costliest test of every suite.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import keras
import numpy as np
import pytest
from conftest import BACKENDS, REPO_ROOT, TOLERANCE

from capsules_keras import MatrixCapsNet
from capsules_keras.models import (
    CapsNet,
    CapsuleBackbone,
    CapsuleClassifier,
    EfficientEncoder,
    ResidualEncoder,
)

#: Narrow networks: what is tested is saving, not a model's size.
NARROW = {"conv_filters": 8, "primary_capsules": 2, "decoder_units": (16,)}
MODELS = {
    "capsnet": lambda: CapsNet(**NARROW),
    "self_attention": lambda: CapsNet(routing="self_attention", **NARROW),
    "inverted_dot_product": lambda: CapsNet(routing="inverted_dot_product", **NARROW),
    # A composition without a name of its own: its config nests the backbone.
    "composed": lambda: CapsuleClassifier(
        CapsuleBackbone(EfficientEncoder(), routing="self_attention"),
        decoder_units=(16,),
    ),
    # Batch normalisation and residual blocks (fused on torch).
    "residual": lambda: CapsuleClassifier(
        CapsuleBackbone(
            ResidualEncoder((28, 28, 1), widths=(4, 8, 8), primary_capsules=2)
        ),
        decoder_units=(16,),
    ),
    "matrix": lambda: MatrixCapsNet(
        conv_filters=8, capsule_types=(4, 4, 4), routing_iterations=2
    ),
}

#: Loads each model given, saves its predictions beside it (`path.npy`) and
#: prints one JSON line: the backend and what each loaded model holds.
LOAD_SCRIPT = """
import json, sys, numpy as np, keras
import capsules_keras  # registers the package's classes for loading
x = np.load(sys.argv[1])
loaded = {}
for path in sys.argv[2:]:
    model = keras.saving.load_model(path)
    np.save(path + ".npy", model.predict(x, verbose=0))
    margin = getattr(model, "spread_margin", None)
    loaded[path] = {
        "class": type(model).__name__,
        "routing": getattr(model, "routing", None),
        "spread_margin": None if margin is None else float(margin.numpy()),
    }
print(json.dumps({"backend": keras.backend.backend(), "models": loaded}))
"""


@pytest.fixture(scope="module")
def saved(mnist_path, tmp_path_factory):
    """Each of `MODELS` trained for one step and saved; its predictions here."""
    folder = tmp_path_factory.mktemp("saved")
    keep = np.random.default_rng(0).permutation(5000)[:16]  # every class
    with np.load(mnist_path) as data:
        x = data["x_train"][keep].astype("float32")[..., None] / 255.0
        y = data["y_train"][keep].astype("int32")
    inputs = str(folder / "x.npy")
    np.save(inputs, x[:4])
    models = {}
    for name, build in MODELS.items():
        model = build()
        model.compile(optimizer=keras.optimizers.Adam(1e-3))
        model.fit(x, y, batch_size=16, epochs=1, verbose=0)
        if isinstance(model, MatrixCapsNet):
            model.spread_margin.assign(0.3)  # a margin schedule's later value
        path = str(folder / f"{name}.keras")
        model.save(path)
        models[name] = (model, path, model.predict(x[:4], verbose=0))
    return inputs, models


def next_backend(backend):
    """The backend after `backend` in the ring of `BACKENDS`."""
    return BACKENDS[(BACKENDS.index(backend) + 1) % len(BACKENDS)]


def test_every_model_loads_and_predicts_the_same_under_the_next_backend(saved):
    inputs, models = saved
    paths = [path for _, path, _ in models.values()]
    other = next_backend(keras.backend.backend())
    result = subprocess.run(
        [sys.executable, "-c", LOAD_SCRIPT, inputs, *paths],
        env={**os.environ, "KERAS_BACKEND": other},
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["backend"] == other
    for name, (model, path, expected) in models.items():
        loaded = report["models"][path]
        assert loaded["class"] == type(model).__name__, name
        if isinstance(model, CapsuleClassifier):
            assert loaded["routing"] == model.routing, name
        else:  # the margin variable travels with the model
            assert loaded["spread_margin"] == pytest.approx(0.3), name
        predicted = np.load(path + ".npy")  # written by the next backend
        np.testing.assert_allclose(predicted, expected, atol=1e-4, err_msg=name)


GOLDEN = Path(__file__).parent / "data" / "golden"
ABOUT = json.loads((GOLDEN / "golden.json").read_text())


@pytest.mark.parametrize("name", sorted(ABOUT["models"]))
def test_a_file_saved_by_an_earlier_version_predicts_as_it_did(name):
    with np.load(GOLDEN / "golden.npz") as arrays:
        x, expected = arrays[f"{name}/x"], arrays[f"{name}/predicted"]
    model = keras.saving.load_model(GOLDEN / f"{name}.keras")
    assert type(model).__name__ == ABOUT["models"][name]
    predicted = model.predict(x, verbose=0)
    if keras.backend.backend() == ABOUT["backend"]:  # the backend that saved it
        # Within float32 rounding, not bit for bit: the same torch build gives
        # other low bits on another CPU (on a 2-core AMD EPYC machine, every
        # file saved on an Intel Xeon differed by up to 3.1e-6, 6.3e-6
        # relative, with the code that saved them unchanged).
        np.testing.assert_allclose(predicted, expected, **TOLERANCE)
    else:
        np.testing.assert_allclose(predicted, expected, atol=1e-4)
