"""Training images per second of CapsNet, Efficient-CapsNet and MatrixCapsNet.

    KERAS_BACKEND=jax python benchmarks/bench_models.py --out benchmarks/models-jax.json

Each model as the trainer builds it by default (the paper's CapsNet,
Efficient-CapsNet, MatrixCapsNet with EM routing), at its preset's batch
size (100, 16, 32), compiled with the trainer's `--jit-compile auto`
(`capsules_keras.training.default_jit_compile`; `--run-images` says how
long a run it compiles for: Efficient-CapsNet compiles on torch only for
long runs), trained with a plain `fit`
on random images and labels, fed as the trainer feeds MNIST (`one_epoch`),
for one epoch of `--images` images.
All models are timed interleaved in this one process after a warm-up fit
each (`interleaved_medians`); images/s are from the fastest round, as the
issue that asked for them measured. Efficient-CapsNet does about 6x less
work per image than the CapsNet (0.19 against 1.2 GFLOP per training
image), so the ratio `efficient / capsnet` says how close its speed comes to
its arithmetic. Time it on a quiet machine.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import keras  # noqa: E402
import numpy as np  # noqa: E402
from common import interleaved_medians, write_results  # noqa: E402

from capsules_keras.data import get_dataset  # noqa: E402
from capsules_keras.models import CapsNet, EfficientCapsNet, MatrixCapsNet  # noqa: E402
from capsules_keras.training import default_jit_compile, training_data  # noqa: E402

#: name: (model class, batch size of its preset, the trainer's --model)
MODELS = {
    "capsnet": (CapsNet, 100, "capsnet"),
    "efficient": (EfficientCapsNet, 16, "efficient"),
    "em": (MatrixCapsNet, 32, "em"),
}


def fit_once(name, images, labels, adjust=None, run_images=None):
    """A zero-argument callable that fits the model `name` one epoch.

    `adjust(network)`, if given, changes the built model before it compiles;
    it compiles as the trainer's `--jit-compile auto` would for a run of
    `run_images` training images (`default_jit_compile`).
    """
    network, batch_size, model = MODELS[name]
    keras.utils.set_random_seed(0)
    network = network()
    if adjust is not None:
        adjust(network)
    jit_compile = default_jit_compile(model=model, images=run_images)
    network.compile(optimizer="adam", jit_compile=jit_compile)
    return one_epoch(network, images, labels, batch_size)


def one_epoch(network, images, labels, batch_size):
    """A zero-argument callable that fits the compiled `network` one epoch.

    The images come as the trainer feeds MNIST (`training_data`): arrays in
    Keras' shuffled batches on jax and torch, a tf.data pipeline without
    autotuning on tensorflow, where arrays make the end of every pass wait
    for tf.data's tuning thread (`capsules_keras.data.feed`).
    """
    data, kwargs = training_data(get_dataset("mnist"), images, labels, batch_size)
    return lambda: network.fit(data, epochs=1, verbose=0, **kwargs)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=400, help="images per fit")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument(
        "--run-images",
        type=int,
        help="compile each model as the trainer would for a run of this many "
        "training images (e.g. 6000000, the paper preset's 100 epochs); "
        "default: as for a run of unknown length",
    )
    parser.add_argument("--out", help="write the results to this JSON file")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    images = rng.random((args.images, 28, 28, 1), dtype="float32")
    labels = rng.integers(0, 10, args.images)
    candidates = {
        name: fit_once(name, images, labels, run_images=args.run_images)
        for name in args.models
    }
    timed = interleaved_medians(candidates, args.repeats, warmup=1)
    rows = []
    for name, stats in timed.items():
        rows.append(
            {
                "model": name,
                "backend": keras.backend.backend(),
                "batch_size": MODELS[name][1],
                "jit_compile": default_jit_compile(
                    model=MODELS[name][2], images=args.run_images
                ),
                "images_per_s": 1000 * args.images / stats["min_ms"],
                "median_images_per_s": 1000 * args.images / stats["median_ms"],
                **stats,
            }
        )
    base = next((r for r in rows if r["model"] == "capsnet"), None)
    for row in rows:
        if base:
            row["ratio_to_capsnet"] = row["images_per_s"] / base["images_per_s"]
        print(
            f"{row['backend']:<11}{row['model']:<10} batch {row['batch_size']:>3}  "
            f"{row['images_per_s']:7.1f} images/s"
            + (f"  {row['ratio_to_capsnet']:.2f}x capsnet" if base else "")
        )
    if args.out:
        write_results(args.out, "models", args, rows)


if __name__ == "__main__":
    main()
