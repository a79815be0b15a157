"""The capsules' lengths over CapsNet's first training steps, on a folder or MNIST.

    python benchmarks/first_steps.py FOLDER --learning-rate 1e-3 --steps 12
    python benchmarks/first_steps.py mnist.npz --dataset mnist

Trains the trainer's CapsNet for the image shape and classes of the data
(Adam, batches of 50, the first `--max-train-samples` training images,
uint8 scaled to [0, 1]) one step at a time, and prints after chosen steps
the mean length of the primary capsules and of the class capsules on the
first batch's worth of images: the measurement behind the collapse guard
(docs/guides/your-own-images.md, "When training collapses").
"""

import argparse

import keras
import numpy as np

from capsules_keras import CapsNet
from capsules_keras.training import TrainConfig
from capsules_keras.training.fit import load_data

#: The steps after which the lengths are printed.
SHOWN = (0, 1, 2, 3, 5, 8, 12, 20, 30, 50)


def mean_lengths(model, images):
    """(primary, class) capsules' mean lengths on `images`."""
    primary = keras.ops.convert_to_numpy(model.backbone.encoder(images))
    lengths = model.predict(images, verbose=0)
    return float(np.linalg.norm(primary, axis=-1).mean()), float(lengths.mean())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data")
    parser.add_argument("--dataset", default="image_folder")
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--max-train-samples", type=int, default=480)
    parser.add_argument("--batch-size", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    keras.utils.set_random_seed(args.seed)
    config = TrainConfig(
        data=args.data,
        dataset=args.dataset,
        max_train_samples=args.max_train_samples,
        seed=args.seed,
    )
    data = load_data(config)
    x, y = data.x_train, data.y_train
    x = x.astype("float32") / (255 if x.dtype == np.uint8 else 1)
    x = x if x.ndim == 4 else x[..., None]
    model = CapsNet(x.shape[1:], int(y.max()) + 1)
    model.compile(optimizer=keras.optimizers.Adam(args.learning_rate))
    print(
        f"{len(x)} images {x.shape[1:]}, {(x > 0.05).mean():.0%} of pixels lit, "
        f"{int(y.max()) + 1} classes; Adam {args.learning_rate:g}, "
        f"batch {args.batch_size}"
    )
    rng = np.random.default_rng(args.seed)
    rows = []
    for step in range(args.steps + 1):
        if step in SHOWN or step == args.steps:
            primary, classes = mean_lengths(model, x[: args.batch_size])
            rows.append((step, primary, classes))
            print(f"step {step:3d}: primary {primary:.4f}, class {classes:.4f}")
        if step < args.steps:
            batch = rng.choice(len(x), args.batch_size, replace=False)
            model.train_on_batch(x[batch], y[batch])
    return rows


if __name__ == "__main__":
    main()
