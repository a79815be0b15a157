"""Which weights of a long run ship? Chosen on held-out training digits only.

    KERAS_BACKEND=torch python benchmarks/choose_weights.py EPOCHS_DIR \\
        --data ../shared/data/mnist-full.npz --validation 5000 \\
        --average-last 5 --save-average average.weights.h5 --out choice.json

`EPOCHS_DIR` holds one `epoch_<k>.weights.h5` per epoch of a paper CapsNet
trained on all but the last `--validation` training digits of `--data`
(`benchmarks/mnist_validation_split.py`). The candidates are every epoch's
weights and the uniform average of the last `--average-last` epochs' weights
(a cheap ensemble along the trajectory: Polyak & Juditsky 1992, Izmailov et
al. 2018). Each is scored on the held-out validation digits, and the one
with the highest validation accuracy is chosen (a tie goes to the average,
then to the later epoch). The test digits are scored too, for the record of
the curve; they take no part in the choice.
"""

import argparse
import os
import re
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import machine, write_json  # noqa: E402
from precision_parity import trained_capsnet  # noqa: E402


def epoch_files(folder):
    """`{epoch: path}` of the `epoch_<k>.weights.h5` files in `folder`."""
    found = {}
    for path in Path(folder).glob("epoch_*.weights.h5"):
        match = re.fullmatch(r"epoch_(\d+)\.weights\.h5", path.name)
        if match:
            found[int(match.group(1))] = path
    if not found:
        raise ValueError(f"No epoch_<k>.weights.h5 file in {folder!r}.")
    return dict(sorted(found.items()))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("epochs_dir", help="a folder of epoch_<k>.weights.h5")
    parser.add_argument("--data", required=True, help="a Keras-layout MNIST .npz")
    parser.add_argument(
        "--validation", type=int, required=True, help="last training digits held out"
    )
    parser.add_argument("--average-last", type=int, default=5)
    parser.add_argument("--save-average", help="where to write the average's weights")
    parser.add_argument("--dtype-policy", default="float32", help="to score in")
    parser.add_argument("--out", default="-", help="JSON file, or - for stdout")
    args = parser.parse_args(argv)
    files = epoch_files(args.epochs_dir)
    if not 1 <= args.average_last <= len(files):
        raise ValueError(
            f"`--average-last` must lie in [1, {len(files)}], the epochs found. "
            f"Received: --average-last {args.average_last}"
        )

    import keras
    import numpy as np

    from capsules_keras.data import get_dataset

    keras.config.set_dtype_policy(args.dtype_policy)
    (x_train, y_train), (x_test, y_test), _ = get_dataset("mnist").load(path=args.data)
    held_out = (x_train[-args.validation :], y_train[-args.validation :])
    model = trained_capsnet(next(iter(files.values())))

    def accuracies():
        return [
            float(np.mean(model.predict(x, batch_size=500, verbose=0).argmax(-1) == y))
            for x, y in (held_out, (x_test, y_test))
        ]

    epochs, averaged = [], []
    last = list(files)[-args.average_last :]
    for epoch, path in files.items():
        model.load_weights(path)
        if epoch in last:
            averaged.append([np.asarray(w, np.float64) for w in model.get_weights()])
        validation, test = accuracies()
        epochs.append(
            {
                "name": f"epoch {epoch}",
                "weights": str(path),
                "validation_accuracy": validation,
                "test_accuracy": test,
            }
        )
    model.set_weights([np.mean(ws, axis=0) for ws in zip(*averaged, strict=True)])
    validation, test = accuracies()
    if args.save_average:
        model.save_weights(args.save_average)
    average = {
        "name": f"average of epochs {last[0]}-{last[-1]}",
        "weights": args.save_average,
        "validation_accuracy": validation,
        "test_accuracy": test,
    }
    # The best on validation; a tie goes to the average, then the later epoch.
    ranked = [(c["validation_accuracy"], i, c) for i, c in enumerate(epochs)]
    chosen = max([*ranked, (average["validation_accuracy"], len(epochs), average)])
    result = {
        "benchmark": "choose_weights",
        "machine": machine(),
        "backend": keras.backend.backend(),
        "dtype_policy": args.dtype_policy,
        "validation_digits": args.validation,
        "test_digits": len(y_test),
        "epochs": epochs,
        "average": average,
        "chosen": chosen[-1],
    }
    write_json(args.out, result)
    return result


if __name__ == "__main__":
    main()
