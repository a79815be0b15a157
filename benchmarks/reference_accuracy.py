"""Test accuracy per epoch of labml_nn's CapsNet, for same-budget comparisons.

    python benchmarks/reference_accuracy.py --data ../shared/data/mnist-full.npz \
        --epochs 1 --seed 0 --out labml-seed0.json

trains the PyTorch reference (`reference.py`: labml_nn's modules, its loss
margin + 0.0005 x mean squared error, Adam) on a Keras-layout MNIST `.npz`
with shuffled batches and no augmentation, and evaluates it on the whole test
set after every epoch. Its counterpart for our CapsNet is the trainer:

    KERAS_BACKEND=jax python -m capsules_keras.train --preset paper --epochs 1 \
        --batch-size 100 --lr-decay 1 --no-augment --seed 0 \
        --data ../shared/data/mnist-full.npz

whose `history.csv` holds the test accuracy per epoch (`val_accuracy`).
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
from common import (  # noqa: E402
    DEFAULT_MNIST,
    add_new_output,
    check_new_output,
    machine,
    write_json,
)


def load(path, max_train=None, max_test=None):
    """Float32 images (n, 28, 28) in [0, 1] and int64 labels."""
    with np.load(path) as data:
        arrays = [data[k] for k in ("x_train", "y_train", "x_test", "y_test")]
    x_train, y_train, x_test, y_test = arrays
    x_train, y_train = x_train[:max_train], y_train[:max_train]
    x_test, y_test = x_test[:max_test], y_test[:max_test]
    x_train, x_test = (x.astype("float32") / 255.0 for x in (x_train, x_test))
    return x_train, y_train.astype("int64"), x_test, y_test


def run(data, epochs=1, batch_size=100, seed=0, max_train=None, max_test=None):
    """Trains labml's CapsNet; returns per-epoch test accuracy and speed."""
    import torch
    from reference import LabmlMNISTCapsNet, device, labml_train_step_fn

    x_train, y_train, x_test, y_test = load(data, max_train, max_test)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = LabmlMNISTCapsNet().to(device())
    step = labml_train_step_fn(model)

    def images(x):
        # NCHW with standard strides (see bench_train.run_labml: strides that
        # look channels-last break labml's .view()).
        return torch.from_numpy(x).to(device()).unsqueeze(1)

    history = []
    for epoch in range(1, epochs + 1):
        model.train()
        order = rng.permutation(len(x_train))
        start = time.perf_counter()
        for k in range(0, len(order), batch_size):
            rows = order[k : k + batch_size]
            step(images(x_train[rows]), torch.from_numpy(y_train[rows]).to(device()))
        seconds = time.perf_counter() - start
        model.eval()
        predictions = []
        with torch.no_grad():
            for k in range(0, len(x_test), batch_size):
                batch = images(x_test[k : k + batch_size])
                predictions.append(model(batch)[2].cpu().numpy())
        accuracy = float((np.concatenate(predictions) == y_test).mean())
        history.append(
            {
                "epoch": epoch,
                "test_accuracy": accuracy,
                "epoch_seconds": seconds,
                "images_per_second": len(x_train) / seconds,
            }
        )
    return {
        "impl": "labml_nn CapsNet (torch, eager)",
        "data": os.path.abspath(data),
        "n_train": len(x_train),
        "n_test": len(x_test),
        "batch_size": batch_size,
        "seed": seed,
        "augment": False,
        "history": history,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=DEFAULT_MNIST)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-train-samples", type=int)
    parser.add_argument("--max-test-samples", type=int)
    add_new_output(parser)
    args = parser.parse_args(argv)
    check_new_output(args.out)
    result = run(
        args.data,
        args.epochs,
        args.batch_size,
        args.seed,
        args.max_train_samples,
        args.max_test_samples,
    )
    write_json(args.out, {**result, "machine": machine()})
    return result


if __name__ == "__main__":
    main()
