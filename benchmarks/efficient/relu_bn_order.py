"""Efficient-CapsNet with batch normalisation before or after each ReLU.

    KERAS_BACKEND=jax python benchmarks/efficient/relu_bn_order.py \\
        --data ../shared/data/mnist-full.npz --seed 0 --out FILE.json

`EfficientCapsNet` computes each of its four convolutions as
`ReLU(BN(Conv2D(x)))`; the authors' code
(`models/efficient_capsnet_graph_mnist.py` of
github.com/EscVM/Efficient-CapsNet) as `BN(ReLU(Conv2D(x)))`.
This trains both, one after the other, from the same seed (so from the same
initial weights, on the same batches) with the trainer's quick preset for the
model (`trainer_settings(preset="quick", model="efficient")`: one epoch, batch 16,
Adam with its per-epoch decay, no shifts), and scores both on the same test
digits: accuracy with its Wilson interval, and McNemar's exact test of the
pair.
"""

import argparse
import dataclasses
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import keras  # noqa: E402
import numpy as np  # noqa: E402
from common import (  # noqa: E402
    DEFAULT_MNIST,
    add_new_output,
    check_new_output,
    machine,
    write_json,
)

from capsules_keras.data import load_mnist  # noqa: E402
from capsules_keras.diagnostics import mcnemar  # noqa: E402
from capsules_keras.metrics import binomial_interval  # noqa: E402
from capsules_keras.models import (  # noqa: E402
    CapsuleBackbone,
    CapsuleClassifier,
    EfficientCapsNet,
    EfficientEncoder,
)
from capsules_keras.training import trainer_settings  # noqa: E402


class ReluFirstEncoder(EfficientEncoder):
    """`EfficientEncoder` whose convolutions apply ReLU before batch norm."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # The stack is (conv_k, bn_k, relu_k) for every k: swap bn and relu.
        stack = self.conv.layers
        swapped = [
            layer
            for k in range(0, len(stack), 3)
            for layer in (stack[k], stack[k + 2], stack[k + 1])
        ]
        self.conv = keras.Sequential(swapped, name="conv")


def relu_first():
    """`EfficientCapsNet`'s composition with `ReluFirstEncoder` as its encoder."""
    encoder = ReluFirstEncoder(name="encoder")
    backbone = CapsuleBackbone(encoder, routing="self_attention", name="backbone")
    return CapsuleClassifier(backbone)


#: name: a zero-argument callable that builds the model.
ORDERS = {"BN then ReLU (ours)": EfficientCapsNet, "ReLU then BN (authors)": relu_first}


def run(data, seed=0, max_train=None, max_test=None):
    """Trains both orders; returns their settings, accuracies and the test."""
    (x_train, y_train), (x_test, y_test), _ = load_mnist(path=data)
    x_train, y_train = x_train[:max_train], y_train[:max_train]
    x_test, y_test = x_test[:max_test], y_test[:max_test]
    preset = trainer_settings(preset="quick", dataset="mnist", model="efficient")
    epochs, batch_size = preset.epochs, preset.batch_size
    rows, right = [], {}
    for name, build in ORDERS.items():
        keras.utils.set_random_seed(seed)
        model = build()
        schedule = keras.optimizers.schedules.ExponentialDecay(
            preset.learning_rate,
            int(np.ceil(len(x_train) / batch_size)),
            preset.lr_decay,
            staircase=True,
        )
        model.compile(optimizer=keras.optimizers.Adam(schedule))
        start = time.perf_counter()
        model.fit(x_train, y_train, batch_size=batch_size, epochs=epochs, verbose=0)
        seconds = time.perf_counter() - start
        predictions = model.predict(x_test, batch_size=250, verbose=0).argmax(-1)
        right[name] = predictions == y_test
        accuracy = float(right[name].mean())
        rows.append(
            {
                "order": name,
                "layers": [layer.name for layer in model.backbone.encoder.conv.layers],
                "test_accuracy": accuracy,
                "interval_95": list(binomial_interval(accuracy, len(y_test))),
                "train_seconds": seconds,
            }
        )
    ours_only, authors_only, p = mcnemar(*right.values())
    return {
        "data": os.path.basename(data),
        "n_train": len(x_train),
        "n_test": len(x_test),
        "seed": seed,
        "backend": keras.backend.backend(),
        "preset": dataclasses.asdict(preset),
        "results": rows,
        "mcnemar": {"ours_only": ours_only, "authors_only": authors_only, "p": p},
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=DEFAULT_MNIST)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-train-samples", type=int)
    parser.add_argument("--max-test-samples", type=int)
    add_new_output(parser)
    args = parser.parse_args(argv)
    check_new_output(args.out)
    result = run(args.data, args.seed, args.max_train_samples, args.max_test_samples)
    write_json(args.out, {**result, "machine": machine()})
    return result


if __name__ == "__main__":
    main()
