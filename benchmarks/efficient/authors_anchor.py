"""Efficient-CapsNet's authors' TensorFlow 2 model beside ours, in one process.

    pip install tf-keras==2.21.0          # Keras 2, which the authors' code needs
    git clone https://github.com/EscVM/Efficient-CapsNet AUTHORS
    TF_USE_LEGACY_KERAS=1 KERAS_BACKEND=torch python \\
        benchmarks/efficient/authors_anchor.py --repo AUTHORS --out FILE.json

The authors' MNIST training graph (`models/efficient_capsnet_graph_mnist.py`,
`build_graph(..., "train")`: the network, the mask by the true label and the
generator) compiled as their `models/model.py` compiles it (Adam 5e-4, their
margin loss plus 0.392 x the mean squared reconstruction error), run by
`tf.keras` -- which `TF_USE_LEGACY_KERAS=1` makes the `tf-keras` package,
Keras 2 -- against our `EfficientCapsNet` on `KERAS_BACKEND` (Keras 3),
compiled as the trainer compiles it. Both `fit` one epoch of the same random
images at batch 16, interleaved (`interleaved_medians`); images/s from the
fastest round, as `bench_models.py` reports them. Their code is imported from
their clone, never copied here; their `utils/__init__.py` (which imports the
plotting and dataset helpers and their dependencies) is skipped by loading
the three modules the graph needs by path.
"""

import argparse
import importlib.util
import os
import sys
import types
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import keras  # noqa: E402
import numpy as np  # noqa: E402
from common import interleaved_medians, write_results  # noqa: E402

from capsules_keras.models import EfficientCapsNet  # noqa: E402
from capsules_keras.training import default_jit_compile  # noqa: E402

BATCH_SIZE = 16  # their config.json's and our preset's


def load_authors(repo):
    """Their `utils.layers`, `utils.tools` and MNIST graph module, by path."""
    utils = types.ModuleType("utils")
    utils.__path__ = [str(repo / "utils")]
    sys.modules["utils"] = utils
    modules = {}
    for name, path in (
        ("utils.layers", "utils/layers.py"),
        ("utils.tools", "utils/tools.py"),
        ("graph", "models/efficient_capsnet_graph_mnist.py"),
    ):
        spec = importlib.util.spec_from_file_location(name, repo / path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        modules[name] = module
    return modules


def authors_fit(repo, images, labels):
    import tensorflow as tf

    if not tf.keras.__name__.startswith("tf_keras"):
        sys.exit(
            "tf.keras is Keras 3 here; install tf-keras and set TF_USE_LEGACY_KERAS=1."
        )
    modules = load_authors(repo)
    tf.keras.utils.set_random_seed(0)
    model = modules["graph"].build_graph([28, 28, 1], "train", verbose=False)
    model.compile(
        optimizer=tf.keras.optimizers.Adam(learning_rate=5e-4),
        loss=[modules["utils.tools"].marginLoss, "mse"],
        loss_weights=[1.0, 0.392],
    )
    one_hot = np.eye(10, dtype="float32")[labels]

    def fit():
        model.fit(
            [images, one_hot],
            [one_hot, images],
            batch_size=BATCH_SIZE,
            epochs=1,
            shuffle=False,
            verbose=0,
        )

    return fit, model.count_params()


def ours_fit(images, labels):
    keras.utils.set_random_seed(0)
    model = EfficientCapsNet()
    model.compile(
        optimizer=keras.optimizers.Adam(5e-4),
        jit_compile=default_jit_compile(model="efficient"),
    )

    def fit():
        model.fit(
            images, labels, batch_size=BATCH_SIZE, epochs=1, shuffle=False, verbose=0
        )

    return fit, model.count_params()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", required=True, help="their clone")
    parser.add_argument("--images", type=int, default=800, help="images per fit")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", help="write the results to this JSON file")
    args = parser.parse_args(argv)
    repo = Path(args.repo)
    if not (repo / "models" / "efficient_capsnet_graph_mnist.py").exists():
        parser.error(f"--repo is not a clone of EscVM/Efficient-CapsNet: {args.repo}")
    rng = np.random.default_rng(0)
    images = rng.random((args.images, 28, 28, 1), dtype="float32")
    labels = rng.integers(0, 10, args.images)
    authors, authors_params = authors_fit(repo, images, labels)
    ours, ours_params = ours_fit(images, labels)
    timed = interleaved_medians(
        {"authors (tf-keras)": authors, f"ours ({keras.backend.backend()})": ours},
        args.repeats,
        warmup=1,
    )
    rows = []
    for (name, stats), params in zip(
        timed.items(), (authors_params, ours_params), strict=True
    ):
        rows.append(
            {
                "model": name,
                "parameters": params,
                "images_per_s": 1000 * args.images / stats["min_ms"],
                "median_images_per_s": 1000 * args.images / stats["median_ms"],
                **stats,
            }
        )
        speed = rows[-1]["images_per_s"]
        print(f"{name:<22}{params:>10,} parameters  {speed:7.1f} images/s")
    print(f"ours / authors: {rows[1]['images_per_s'] / rows[0]['images_per_s']:.2f}x")
    if args.out:
        write_results(args.out, "efficient-authors-anchor", args, rows)


if __name__ == "__main__":
    main()
