"""Holds the last training digits of an MNIST file out, as a validation set.

    python benchmarks/mnist_validation_split.py ../shared/data/mnist-full.npz \\
        mnist-55k-val5k.npz --validation 5000

Writes a Keras-layout `.npz` whose training set is the first digits of
`SOURCE`'s training set and whose *test* set is its last `--validation`
training digits (the classic 55,000 / 5,000 split of MNIST by default), so
that the trainer's evaluation after every epoch (`--validate`) scores digits
held out of training and never the real test digits. The real test set is
scored afterwards, once the weights to ship are chosen
(`benchmarks/choose_weights.py`).
"""

import argparse
import os
import sys

import numpy as np


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", help="a Keras-layout MNIST .npz")
    parser.add_argument("out", help="the .npz to write (never overwritten)")
    parser.add_argument("--validation", type=int, default=5000)
    args = parser.parse_args(argv)
    if os.path.exists(args.out):
        sys.exit(f"{args.out} exists; remove it first to replace it.")
    with np.load(args.source) as data:
        x, y = data["x_train"], data["y_train"]
    if not 0 < args.validation < len(y):
        raise ValueError(
            f"`--validation` must lie in [1, {len(y) - 1}] for {len(y)} training "
            f"digits. Received: --validation {args.validation}"
        )
    cut = len(y) - args.validation
    np.savez_compressed(
        args.out, x_train=x[:cut], y_train=y[:cut], x_test=x[cut:], y_test=y[cut:]
    )
    return cut


if __name__ == "__main__":
    main()
