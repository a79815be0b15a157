"""Re-evaluate a saved model (a capsule model or the CNN baseline) on any backend.

    python -m capsules_keras.evaluate RUN_DIR_OR_MODEL.keras [--dataset ...]
        [--data ...] [--routing-iterations N]

Prints the test accuracy (and a JSON line for scripts); writes nothing. On
MultiMNIST the test set is the trainer's fixed test pairs and the accuracy
the exact match (both digits right), with "at least one right" beside it.
`--routing-iterations` re-routes a CapsNet with another number of iterations
(1: uniform couplings, no routing) to see what routing adds. This module is
the command line only: the dataset object (`capsules_keras.data`) gives the
test set and scores the predictions.
"""

import argparse
import json
import sys
import time

import keras

from capsules_keras.data import get_dataset
from capsules_keras.models import CapsuleClassifier
from capsules_keras.training import config_flag, saved_run, test_scores


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m capsules_keras.evaluate",
        description="Evaluate a saved model (.keras) on a dataset's test set.",
    )
    parser.add_argument("model", help="a run folder or a .keras file")
    parser.add_argument(
        "--dataset",
        **config_flag(
            "dataset",
            default=None,
            help="default: the run folder's dataset, else mnist",
        ),
    )
    parser.add_argument("--data", **config_flag("data"))
    parser.add_argument("--max-test-samples", **config_flag("max_test_samples"))
    parser.add_argument("--batch-size", **config_flag("batch_size"))
    parser.add_argument(
        "--routing-iterations",
        **config_flag(
            "routing_iterations",
            help="re-route a capsule classifier with this many iterations "
            "(default: its own)",
        ),
    )
    args = parser.parse_args(argv)

    try:
        path, name = saved_run(args.model, args.dataset)
    except FileNotFoundError as error:
        raise SystemExit(str(error)) from error
    dataset = get_dataset(name)
    _, (x_test, y_test), origin = dataset.load_from(args.data)
    x_test, y_test = dataset.test_set(x_test, y_test, args.max_test_samples)

    model = keras.saving.load_model(path)
    if args.routing_iterations:
        if not isinstance(model, CapsuleClassifier):
            raise SystemExit(
                "--routing-iterations needs a capsule classifier (CapsNet, "
                f"EfficientCapsNet, ...); {path!r} holds a "
                f"{type(model).__name__}"
            )
        model = model.with_routing_iterations(args.routing_iterations)
    start = time.perf_counter()
    scores = test_scores(model, x_test, args.batch_size)
    seconds = time.perf_counter() - start
    result = dataset.score(scores, y_test)
    accuracy = result["test_accuracy"]
    print(f"Model:    {path}")
    print(f"Backend:  {keras.backend.backend()}")
    if isinstance(model, CapsuleClassifier):
        print(f"Routing:  {model.routing_iterations} iterations")
    print(
        f"Data:     {dataset.title} from {origin}, {len(x_test):,} {dataset.test_noun}"
    )
    print(f"Accuracy: {accuracy:.2%} (error {1 - accuracy:.2%}), {seconds:.1f} s")
    if "test_accuracy_at_least_one" in result:
        print(f"At least one digit right: {result['test_accuracy_at_least_one']:.2%}")
    result = {
        "model": path,
        "backend": keras.backend.backend(),
        **result,
        "routing_iterations": getattr(model, "routing_iterations", None),
        "dataset": name,
        "n_test": len(x_test),
        "data_source": origin,
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
