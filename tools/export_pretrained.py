"""Turns a training run into a pretrained model shipped with the package.

    python tools/export_pretrained.py RUN_DIR --name efficient_capsnet_mnist \\
        --data ../shared/data/mnist-full.npz --commit be0fe92 \\
        --command "python -m capsules_keras.train ..."

Reads the run's `model.keras`, `metrics.json` and `history.csv` (written by
`capsules_keras.train`), copies the trained weights into a fresh, uncompiled
model of the same configuration (no optimizer state: a third of the size),
checks that it predicts the test set as the run's model does (the same
class for every image, scores within float32 rounding), and
writes `capsules_keras/models/weights/<name>.keras` and its card
`<name>.json` (see `capsules_keras.models.pretrained`). Refuses to replace a
model that is already there.
"""

import argparse
import csv
import hashlib
import json
import sys
from pathlib import Path

import keras
import numpy as np

from capsules_keras.data import get_dataset
from capsules_keras.models.pretrained import PRETRAINED, WEIGHTS, pretrained_path


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--name", required=True, choices=sorted(PRETRAINED))
    parser.add_argument("--data", required=True, help="the run's MNIST file")
    parser.add_argument("--commit", required=True, help="the commit that trained it")
    parser.add_argument("--command", required=True, help="the command that ran")
    parser.add_argument("--machine", required=True, help="where it ran, in words")
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
    model = type(trained).from_config(trained.get_config())
    _, (x_test, y_test), _ = get_dataset(metrics["dataset"]).load(path=args.data)
    model.predict(x_test[:1], verbose=0)  # builds it
    model.set_weights(trained.get_weights())
    scores = model.predict(x_test, verbose=0)
    trained_scores = trained.predict(x_test, verbose=0)
    np.testing.assert_allclose(scores, trained_scores, atol=1e-5)
    np.testing.assert_array_equal(scores.argmax(-1), trained_scores.argmax(-1))
    predicted = np.argmax(scores, axis=-1)
    errors = np.flatnonzero(predicted != y_test)

    WEIGHTS.mkdir(exist_ok=True)
    model.save(model_path)
    card = {
        "name": args.name,
        "about": PRETRAINED[args.name],
        "model": type(model).__name__,
        "parameters": model.count_params(),
        "encoder_parameters": model.count_encoder_params(),
        "command": args.command,
        "commit": args.commit,
        "machine": args.machine,
        "data": f"{metrics['training_set']} training images, {len(y_test):,} test",
        **{
            key: metrics[key]
            for key in (
                "dataset",
                "backend",
                "keras_version",
                "preset",
                "epochs",
                "batch_size",
                "augment",
                "seed",
                "train_seconds",
                "images_per_second",
            )
        },
        "test_accuracy": float(np.mean(predicted == y_test)),
        "test_errors": errors.tolist(),
        "per_epoch_test_accuracy": [float(row["val_accuracy"]) for row in history],
        "sha256": hashlib.sha256(model_path.read_bytes()).hexdigest(),
    }
    card_path.write_text(json.dumps(card, indent=1) + "\n")
    print(f"{model_path} ({model_path.stat().st_size / 1e6:.1f} MB)")
    print(f"{card_path}: test accuracy {card['test_accuracy']:.2%}")


if __name__ == "__main__":
    main()
