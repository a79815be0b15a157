"""How fast MatrixCapsNet starts to learn with 1, 2 and 3 EM iterations.

    KERAS_BACKEND=jax python benchmarks/em/iterations_probe.py \
        --data ../shared/data/mnist-offline.npz --out benchmarks/em/iterations-jax.json

The same seeded network (`MatrixCapsNet(routing_iterations=n)`, Adam 3e-3,
batch 32, spread-loss margin fixed at 0.2) trains for `--rounds` rounds of
10 steps on the same 320 training digits; after each round the training
accuracy of that round and the accuracy on the first 500 test digits are
recorded. A probe of the first minutes of training, not a result: one
seed, few digits.
"""

import argparse
import json
import time

import keras
import numpy as np

from capsules_keras import MatrixCapsNet


def probe(x, y, x_test, y_test, iterations, rounds):
    keras.utils.set_random_seed(0)
    model = MatrixCapsNet(routing_iterations=iterations)
    model.compile(optimizer=keras.optimizers.Adam(3e-3))
    start = time.perf_counter()
    history = model.fit(
        x,
        y,
        batch_size=32,
        epochs=rounds,
        validation_data=(x_test, y_test),
        verbose=0,
    )
    return {
        "routing_iterations": iterations,
        "train_accuracy": [round(a, 4) for a in history.history["accuracy"]],
        "test_accuracy_500": [round(a, 4) for a in history.history["val_accuracy"]],
        "seconds": round(time.perf_counter() - start, 1),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="an MNIST .npz file")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--out", default="-", help="JSON file, or - for stdout")
    args = parser.parse_args(argv)
    with np.load(args.data) as data:
        keep = np.random.default_rng(0).permutation(len(data["y_train"]))[:320]
        x, y = data["x_train"][keep], data["y_train"][keep]
        x_test, y_test = data["x_test"][:500], data["y_test"][:500]
    results = {
        "backend": keras.backend.backend(),
        "data": args.data,
        "runs": [probe(x, y, x_test, y_test, n, args.rounds) for n in (1, 2, 3)],
    }
    text = json.dumps(results, indent=2)
    if args.out == "-":
        print(text)
    else:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
