"""Does mixed precision cost the paper's CapsNet accuracy? Two trained copies
of it scored on the same test digits, with McNemar's test.

    KERAS_BACKEND=torch python benchmarks/precision_parity.py \\
        --float32 RUN_A/model.keras --mixed RUN_B/backup/latest.weights.h5 \\
        --data ../shared/data/mnist-full.npz --out parity.json

Each file is a trained paper CapsNet (8,215,568 parameters): a `.keras` model
or a `.weights.h5` file of its weights (what the trainer's `backup/` keeps
after each epoch). Both are scored in float32, the policy a model loads in,
on all the test digits of `--data`: their accuracies, the digits only one of
them gets right, McNemar's exact p-value and the paired difference with its
95% interval (`capsules_keras.diagnostics`).
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import machine, write_json  # noqa: E402


def trained_capsnet(path):
    """The paper's CapsNet in float32 with the weights of `path`."""
    import keras

    from capsules_keras import CapsNet

    model = CapsNet()
    model.build((None, 28, 28, 1))
    if str(path).endswith(".keras"):
        model.set_weights(keras.saving.load_model(path).get_weights())
    else:
        model.load_weights(path)
    return model


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--float32", required=True, help="the float32 run's model")
    parser.add_argument("--mixed", required=True, help="the mixed-precision run's")
    parser.add_argument("--data", required=True, help="a Keras-layout MNIST .npz")
    parser.add_argument("--out", default="-", help="JSON file, or - for stdout")
    args = parser.parse_args(argv)

    import keras
    import numpy as np

    from capsules_keras.data import get_dataset
    from capsules_keras.diagnostics import mcnemar, paired_difference

    keras.config.set_dtype_policy("float32")
    _, (x_test, y_test), _ = get_dataset("mnist").load(path=args.data)
    right = {}
    for name in ("float32", "mixed"):
        model = trained_capsnet(getattr(args, name))
        scores = model.predict(x_test, batch_size=500, verbose=0)
        right[name] = np.argmax(scores, axis=-1) == y_test
    float32_only, mixed_only, p_value = mcnemar(right["float32"], right["mixed"])
    difference, low, high = paired_difference(right["mixed"], right["float32"])
    result = {
        "benchmark": "precision_parity",
        "machine": machine(),
        "backend": keras.backend.backend(),
        "float32": args.float32,
        "mixed": args.mixed,
        "test_digits": len(y_test),
        "float32_accuracy": float(np.mean(right["float32"])),
        "mixed_accuracy": float(np.mean(right["mixed"])),
        "float32_only": float32_only,
        "mixed_only": mixed_only,
        "mcnemar_p": p_value,
        "mixed_minus_float32": [difference, low, high],
    }
    write_json(args.out, result)
    return result


if __name__ == "__main__":
    main()
