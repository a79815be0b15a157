"""Writes the golden `.keras` files that every later version must keep loading.

    KERAS_BACKEND=jax python tests/data/save_golden_models.py

Saves one small model of each kind (each routing of `CapsNet`,
`MultiDigitCapsNet`, `EfficientCapsNet`, `MatrixCapsNet` and a functional
model around `DigitCaps`), trained for one step and compiled, into
`tests/data/golden/`, with `golden.npz` (their inputs and predictions) and
`golden.json` (which backend, Keras and commit saved them).
`tests/test_saving_across_backends.py` loads them on every backend.
Run it again only for a new kind of model, into a new folder: the files here
are the versions users hold, and rewriting them would hide a break.
"""

import json
import os
import subprocess
import sys

import keras
import numpy as np

import capsules_keras
from capsules_keras import (
    DigitCaps,
    EfficientCapsNet,
    Length,
    MarginLoss,
    MatrixCapsNet,
    MultiDigitCapsNet,
    PrimaryCaps,
)
from capsules_keras.models import CapsNet

FOLDER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden")
#: Narrow networks keep the files small (optimizer state included).
NARROW = {
    "conv_filters": 8,
    "primary_capsules": 2,
    "digit_dim": 4,
    "decoder_units": (16,),
}


def functional_digit_caps():
    """DigitCaps in a plain functional model, as notebook 04 builds one."""
    inputs = keras.Input((28, 28, 1))
    x = keras.layers.Conv2D(8, 9, activation="relu")(inputs)
    x = PrimaryCaps(num_capsules=2, capsule_dim=8, kernel_size=9, strides=2)(x)
    x = DigitCaps(num_capsules=10, capsule_dim=4)(x)
    model = keras.Model(inputs, Length()(x))
    model.compile(optimizer="adam", loss=MarginLoss())
    return model


#: name: (a new model, its input shape)
MODELS = {
    "capsnet_dynamic": (lambda: CapsNet(**NARROW), (28, 28, 1)),
    "capsnet_self_attention": (
        lambda: CapsNet(routing="self_attention", **NARROW),
        (28, 28, 1),
    ),
    "capsnet_inverted_dot_product": (
        lambda: CapsNet(routing="inverted_dot_product", **NARROW),
        (28, 28, 1),
    ),
    "multi_digit_capsnet": (lambda: MultiDigitCapsNet(**NARROW), (36, 36, 1)),
    "efficient_capsnet": (
        lambda: EfficientCapsNet(digit_dim=4, decoder_units=(16,)),
        (28, 28, 1),
    ),
    "matrix_capsnet": (
        lambda: MatrixCapsNet(
            conv_filters=8, capsule_types=(4, 4, 4), routing_iterations=2
        ),
        (28, 28, 1),
    ),
    "functional_digit_caps": (functional_digit_caps, (28, 28, 1)),
}


def targets(model, rng, n):
    """Training targets for `n` random images, as each model takes them."""
    if isinstance(model, MultiDigitCapsNet):  # two digits, each drawn alone
        labels = np.stack([np.arange(n) % 10, (np.arange(n) + 3) % 10], axis=1)
        digits = rng.uniform(0, 1, (n, 2, *model.image_shape)).astype("float32")
        return {"labels": labels, "digits": digits}
    return rng.integers(0, 10, n)


def main():
    os.makedirs(FOLDER, exist_ok=False)  # never over an existing set
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    arrays, classes = {}, {}
    for name, (build, shape) in MODELS.items():
        model = build()
        if not model.compiled:
            model.compile(optimizer="adam")
        x = rng.uniform(0, 1, (8, *shape)).astype("float32")
        model.fit(x, targets(model, rng, len(x)), batch_size=8, verbose=0)
        model.save(os.path.join(FOLDER, f"{name}.keras"))
        classes[name] = type(model).__name__
        arrays[f"{name}/x"] = x[:4]
        arrays[f"{name}/predicted"] = np.asarray(model.predict(x[:4], verbose=0))
    np.savez(os.path.join(FOLDER, "golden.npz"), **arrays)
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    about = {
        "backend": keras.backend.backend(),
        "keras": keras.__version__,
        "capsules_keras": capsules_keras.__version__,
        "commit": commit,
        "models": classes,
    }
    with open(os.path.join(FOLDER, "golden.json"), "w") as f:
        json.dump(about, f, indent=2)
        f.write("\n")
    print(f"Saved {len(MODELS)} models to {FOLDER} on {about['backend']}")


if __name__ == "__main__":
    sys.exit(main())
