"""Re-evaluate a saved CapsNet under any backend.

    python -m capsules_keras.evaluate RUN_DIR_OR_MODEL.keras [--data ...]

Prints the test accuracy (and a JSON line for scripts); writes nothing.
"""

import argparse
import json
import os
import sys
import time

import keras

from capsules_keras.data import load_mnist_from


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m capsules_keras.evaluate",
        description="Evaluate a saved CapsNet (.keras) on the MNIST test set.",
    )
    parser.add_argument("model", help="a run folder or a .keras file")
    parser.add_argument("--data", default="auto", help="'auto', 'keras' or a path")
    parser.add_argument("--max-test-samples", type=int)
    parser.add_argument("--batch-size", type=int, default=100)
    args = parser.parse_args(argv)

    path = args.model
    if os.path.isdir(path):
        path = os.path.join(path, "model.keras")
    if not os.path.isfile(path):
        raise SystemExit(f"No saved model at {path!r}")
    _, (x_test, y_test), origin = load_mnist_from(args.data)
    if args.max_test_samples:
        x_test, y_test = (
            x_test[: args.max_test_samples],
            y_test[: args.max_test_samples],
        )

    model = keras.saving.load_model(path)
    start = time.perf_counter()
    predictions = model.predict(x_test, batch_size=args.batch_size, verbose=0)
    seconds = time.perf_counter() - start
    accuracy = float((predictions.argmax(-1) == y_test).mean())
    print(f"Model:    {path}")
    print(f"Backend:  {keras.backend.backend()}")
    print(f"Data:     {origin}, {len(x_test):,} test digits")
    print(f"Accuracy: {accuracy:.2%} (error {1 - accuracy:.2%}), {seconds:.1f} s")
    result = {
        "model": path,
        "backend": keras.backend.backend(),
        "test_accuracy": accuracy,
        "test_error": 1 - accuracy,
        "n_test": len(x_test),
        "data_source": origin,
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
