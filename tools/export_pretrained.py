"""Turns a training run into a pretrained model shipped with the package.

    python tools/export_pretrained.py RUN_DIR --name efficient_capsnet_mnist \\
        --data ../shared/data/mnist-full.npz --commit be0fe92 \\
        --command "python -m capsules_keras.train ..."

Reads the run's `model.keras`, `metrics.json` and `history.csv` (written by
`capsules_keras.train`), copies the trained weights into a fresh, uncompiled
float32 model of the same configuration (no optimizer state: a third of the
size; a run trained in mixed precision is shipped in float32, the policy a
model loads in), checks that a float32 run's model predicts the test set
as the copy does (the same class for every image, scores within float32
rounding), and writes `capsules_keras/models/weights/<name>.keras` and its
card `<name>.json` (see `capsules_keras.models.pretrained`). Refuses to
replace a model that is already there.

With `--choice CHOICE.json` (written by `benchmarks/choose_weights.py` for a
run that held training digits out for validation) it ships the weights chosen
there on the validation digits instead of the last epoch's, and the card
records the validation and test accuracy of every epoch.

With `--weights-dtype float16` the file stores its weights in float16 (half
the size; Keras casts them to the float32 variables when it loads), only if
the model so loaded scores the test set exactly as the float32 one: the same
class for every image.
"""

import argparse
import csv
import hashlib
import json
import sys
import tempfile
import zipfile
from pathlib import Path

import h5py
import keras
import numpy as np

from capsules_keras.data import get_dataset
from capsules_keras.metrics import binomial_interval
from capsules_keras.models.pretrained import PRETRAINED, WEIGHTS, pretrained_path


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--name", required=True, choices=sorted(PRETRAINED))
    parser.add_argument("--data", required=True, help="the run's MNIST file")
    parser.add_argument("--commit", required=True, help="the commit that trained it")
    parser.add_argument("--command", required=True, help="the command that ran")
    parser.add_argument("--machine", required=True, help="where it ran, in words")
    parser.add_argument(
        "--weights-dtype",
        choices=("float32", "float16"),
        default="float32",
        help="how the file stores the weights (they load as float32)",
    )
    parser.add_argument(
        "--choice", type=Path, help="ship the weights chosen on validation digits"
    )
    args = parser.parse_args(argv)
    model_path = pretrained_path(args.name)
    card_path = model_path.with_suffix(".json")
    for path in (model_path, card_path):
        if path.exists():
            sys.exit(f"{path} exists; remove it first to replace it.")
    metrics = json.loads((args.run_dir / "metrics.json").read_text())
    with open(args.run_dir / "history.csv") as f:
        history = list(csv.DictReader(f))

    trained = keras.saving.load_model(args.run_dir / "model.keras")
    model = type(trained).from_config({**trained.get_config(), "dtype": "float32"})
    (_, y_train), (x_test, y_test), _ = get_dataset(metrics["dataset"]).load(
        path=args.data
    )
    model.predict(x_test[:1], verbose=0)  # builds it
    model.set_weights(trained.get_weights())
    if args.choice:
        choice = json.loads(args.choice.read_text())
        model.load_weights(choice["chosen"]["weights"])
    scores = model.predict(x_test, verbose=0)
    if metrics["dtype_policy"] == "float32" and not args.choice:  # same weights,
        # and the same dtype: the copy computes as the run's model does.
        trained_scores = trained.predict(x_test, verbose=0)
        np.testing.assert_allclose(scores, trained_scores, atol=1e-5)
        np.testing.assert_array_equal(scores.argmax(-1), trained_scores.argmax(-1))
    predicted = np.argmax(scores, axis=-1)
    errors = np.flatnonzero(predicted != y_test)

    WEIGHTS.mkdir(exist_ok=True)
    model.save(model_path)
    if args.weights_dtype == "float16":
        store_weights_in_float16(model_path)
        loaded = keras.saving.load_model(model_path).predict(x_test, verbose=0)
        if not np.array_equal(np.argmax(loaded, axis=-1), predicted):
            model_path.unlink()
            changed = int(np.sum(np.argmax(loaded, axis=-1) != predicted))
            sys.exit(
                f"In float16 the weights change the class of {changed} test "
                "images; export with --weights-dtype float32."
            )
    card = {
        "name": args.name,
        "about": PRETRAINED[args.name],
        "model": type(model).__name__,
        "parameters": model.count_params(),
        "encoder_parameters": model.count_encoder_params(),
        "command": args.command,
        "commit": args.commit,
        "machine": args.machine,
        "data": (
            f"{len(y_train) - choice['validation_digits']:,} training images (the "
            f"last {choice['validation_digits']:,} of {len(y_train):,} held out for "
            f"validation), {len(y_test):,} test"
            if args.choice
            else f"{metrics['training_set']} training images, {len(y_test):,} test"
        ),
        **{
            key: metrics[key]
            for key in (
                "dataset",
                "backend",
                "keras_version",
                "preset",
                "epochs",
                "batch_size",
                "learning_rate",
                "lr_decay",
                "augment",
                "seed",
                "dtype_policy",
                "train_seconds",
                "images_per_second",
            )
        },
        "weights_dtype": args.weights_dtype,
        "test_accuracy": float(np.mean(predicted == y_test)),
        "test_accuracy_95": [
            float(bound)
            for bound in binomial_interval(np.mean(predicted == y_test), len(y_test))
        ],
        "test_errors": errors.tolist(),
        # What the run evaluated after every epoch: the test digits, or
        # validation digits held out of the training set.
        **(
            validation_record(choice)
            if args.choice
            else {
                "run_test_accuracy": metrics["test_accuracy"],
                "per_epoch_test_accuracy": [
                    float(row["val_accuracy"]) for row in history
                ],
            }
        ),
        "sha256": hashlib.sha256(model_path.read_bytes()).hexdigest(),
    }
    card_path.write_text(json.dumps(card, indent=1) + "\n")
    print(f"{model_path} ({model_path.stat().st_size / 1e6:.1f} MB)")
    print(f"{card_path}: test accuracy {card['test_accuracy']:.2%}")


def validation_record(choice):
    """What the card says of a run whose weights were chosen on held-out digits."""
    return {
        "shipped": f"{choice['chosen']['name']}, chosen on the validation digits",
        "validation_accuracy": choice["chosen"]["validation_accuracy"],
        "per_epoch_validation_accuracy": [
            c["validation_accuracy"] for c in choice["epochs"]
        ],
        "per_epoch_test_accuracy": [c["test_accuracy"] for c in choice["epochs"]],
    }


def store_weights_in_float16(path):
    """Rewrites the float32 weights of the `.keras` file `path` in float16.

    A new HDF5 file with the same groups, attributes and datasets, the
    float32 ones cast (HDF5 keeps the space of a dataset replaced in place).
    """
    with tempfile.TemporaryDirectory() as folder:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            archive.extractall(folder)
        weights = Path(folder) / "model.weights.h5"
        halved = Path(folder) / "halved.h5"
        with h5py.File(weights) as source, h5py.File(halved, "w") as target:
            target.attrs.update(source.attrs)

            def copy(name, item):
                if isinstance(item, h5py.Group):
                    made = target.create_group(name)
                else:
                    value = item[()]
                    if value.dtype == np.float32:
                        value = value.astype(np.float16)
                    made = target.create_dataset(name, data=value)
                made.attrs.update(item.attrs)

            source.visititems(copy)
        halved.replace(weights)
        with zipfile.ZipFile(path, "w") as archive:
            for name in names:
                archive.write(Path(folder) / name, name)


if __name__ == "__main__":
    main()
