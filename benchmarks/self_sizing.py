"""What a self-sized CapsNet costs in accuracy: MNIST digits on a 64x64 canvas.

    KERAS_BACKEND=jax python benchmarks/self_sizing.py \\
        --data ../shared/data/mnist-offline.npz --out FILE.json --markdown FILE.md

`CapsNet` sizes itself for images larger than the paper's: beyond 40 px
its default strides (`capsnet_strides`) keep the primary-capsule grid at
most 12x12, so the class-capsule kernel and the votes stop growing with the
image. This trains two CapsNets on the same MNIST digits, each padded to
the centre of a 64x64 canvas (`pad_images`), one after the other, from the
same seed (the same batches):

- *self-sized*: the default strides for 64 px, (1, 4): a 12x12 grid;
- *paper strides*: (1, 2), what `CapsNet((64, 64, 1))` built before it
  sized itself: a 24x24 grid, four times the primary capsules, the
  class-capsule kernel and the votes;

and scores both on the same test digits: accuracy with its Wilson 95%
interval, and McNemar's exact test of the pair. Both are narrower than the
paper's network (`--conv-filters`, `--primary-capsules`), so that the pair
trains in minutes on a CPU; the trainer's quick settings otherwise (Adam
1e-3 decayed x0.8 per epoch, batch 50, no shifts).
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import keras  # noqa: E402
import numpy as np  # noqa: E402
from common import (  # noqa: E402
    DEFAULT_MNIST,
    add_new_output,
    check_new_output,
    machine,
    write_json,
)

from capsules_keras.capacity import plan_capacity  # noqa: E402
from capsules_keras.data import load_mnist, pad_images  # noqa: E402
from capsules_keras.diagnostics import mcnemar  # noqa: E402
from capsules_keras.metrics import binomial_interval  # noqa: E402
from capsules_keras.models import CapsNet  # noqa: E402

#: name -> the strides `CapsNet` is given (None: its own choice).
STRIDES = {
    "self-sized": {},
    "paper strides": {"conv_strides": 1, "primary_strides": 2},
}
#: The trainer's quick settings (`TrainConfig`'s defaults).
LEARNING_RATE, LR_DECAY, BATCH_SIZE = 1e-3, 0.8, 50


def run(
    data,
    image_size=64,
    epochs=2,
    max_train=5000,
    max_test=None,
    conv_filters=64,
    primary_capsules=8,
    seed=0,
):
    """Trains the two CapsNets; returns their sizes, accuracies and the test."""
    (x_train, y_train), (x_test, y_test), _ = load_mnist(path=data)
    x_train, y_train = x_train[:max_train], y_train[:max_train]
    x_test, y_test = x_test[:max_test], y_test[:max_test]
    # Digits in [0, 1], each centred on an empty canvas.
    x_train = pad_images(x_train, image_size)
    x_test = pad_images(x_test, image_size)
    image_shape = x_train.shape[1:]
    rows, right = [], {}
    for name, strides in STRIDES.items():
        keras.utils.set_random_seed(seed)
        model = CapsNet(
            image_shape,
            conv_filters=conv_filters,
            primary_capsules=primary_capsules,
            **strides,
        )
        plan = plan_capacity(model, batch_size=BATCH_SIZE)
        schedule = keras.optimizers.schedules.ExponentialDecay(
            LEARNING_RATE,
            int(np.ceil(len(x_train) / BATCH_SIZE)),
            LR_DECAY,
            staircase=True,
        )
        model.compile(optimizer=keras.optimizers.Adam(schedule))
        model.fit(x_train, y_train, batch_size=BATCH_SIZE, epochs=epochs, verbose=0)
        predictions = model.predict(x_test, batch_size=250, verbose=0).argmax(-1)
        right[name] = predictions == y_test
        accuracy = float(right[name].mean())
        rows.append(
            {
                "model": name,
                "conv_strides": model.conv_strides,
                "primary_strides": model.primary_strides,
                "primary_capsules": plan.primary_capsules,
                "parameters": plan.parameters,
                "class_capsule_parameters": plan.class_capsule_parameters,
                "vote_bytes_per_image": plan.vote_bytes_per_image,
                "flops_per_image": plan.flops_per_image,
                "test_accuracy": accuracy,
                "interval_95": [
                    float(v) for v in binomial_interval(accuracy, len(y_test))
                ],
            }
        )
    self_only, paper_only, p = mcnemar(*right.values())
    return {
        "benchmark": "self_sizing",
        "data": os.path.basename(data),
        "image_shape": list(image_shape),
        "n_train": len(x_train),
        "n_test": len(x_test),
        "epochs": epochs,
        "batch_size": BATCH_SIZE,
        "learning_rate": LEARNING_RATE,
        "lr_decay": LR_DECAY,
        "conv_filters": conv_filters,
        "primary_capsules_types": primary_capsules,
        "seed": seed,
        "backend": keras.backend.backend(),
        "results": rows,
        "mcnemar": {"self_sized_only": self_only, "paper_only": paper_only, "p": p},
    }


def markdown(result):
    """The settings, the result as a Markdown table, and one line for the test."""
    side = "x".join(map(str, result["image_shape"]))
    lines = [
        f"{result['data']}: the first {result['n_train']:,} training digits "
        f"and {result['n_test']:,} test digits, each centred on a {side} "
        f"canvas; {result['epochs']} epochs, batch {result['batch_size']}, "
        f"conv_filters={result['conv_filters']}, "
        f"primary_capsules={result['primary_capsules_types']}, seed "
        f"{result['seed']}, {result['backend']}.",
        "",
        "| model | strides (conv, primary) | primary capsules | parameters "
        "| class-capsule kernel | votes per image | test accuracy | 95% interval |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in result["results"]:
        low, high = row["interval_95"]
        lines.append(
            f"| {row['model']} | ({row['conv_strides']}, {row['primary_strides']}) "
            f"| {row['primary_capsules']:,} | {row['parameters']:,} "
            f"| {row['class_capsule_parameters']:,} "
            f"| {row['vote_bytes_per_image'] / 2**10:,.0f} KB "
            f"| {100 * row['test_accuracy']:.2f}% "
            f"| {100 * low:.2f}-{100 * high:.2f}% |"
        )
    test = result["mcnemar"]
    lines += [
        "",
        f"McNemar's exact test on the same {result['n_test']:,} test digits: "
        f"{test['self_sized_only']} right only by the self-sized model, "
        f"{test['paper_only']} only with the paper's strides, p = {test['p']:.3g}.",
    ]
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=DEFAULT_MNIST, help="an MNIST .npz")
    parser.add_argument(
        "--image-size", type=int, default=64, help="side of the canvas (64)"
    )
    parser.add_argument("--epochs", type=int, default=2, help="epochs (2)")
    parser.add_argument(
        "--max-train-samples", type=int, default=5000, help="first N training digits"
    )
    parser.add_argument(
        "--max-test-samples", type=int, help="first N test digits (all)"
    )
    parser.add_argument(
        "--conv-filters", type=int, default=64, help="CapsNet's conv_filters (64)"
    )
    parser.add_argument(
        "--primary-capsules",
        type=int,
        default=8,
        help="CapsNet's primary_capsules, the capsule types (8)",
    )
    parser.add_argument("--seed", type=int, default=0, help="one seed, both models")
    parser.add_argument("--markdown", help="also write the table to this file")
    add_new_output(parser)
    args = parser.parse_args(argv)
    check_new_output(args.out)
    if args.markdown:
        check_new_output(args.markdown)
    result = run(
        args.data,
        args.image_size,
        args.epochs,
        args.max_train_samples,
        args.max_test_samples,
        args.conv_filters,
        args.primary_capsules,
        args.seed,
    )
    write_json(args.out, {**result, "machine": machine()})
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(markdown(result))
    return result


if __name__ == "__main__":
    main()
