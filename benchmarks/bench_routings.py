"""Training step of DigitCaps with each routing algorithm, on one backend.

    KERAS_BACKEND=jax python benchmarks/bench_routings.py \
        --out benchmarks/routings-jax.json

The model is `Input(in_capsules, 8) -> DigitCaps(10, 16, routing) -> Length`,
compiled with `MarginLoss` and Adam and Keras' default `jit_compile` ("auto":
XLA on jax, a graph without XLA on tensorflow on a CPU, eager on torch), the
path `fit` takes. One step is `model.train_on_batch` (forward, backward and
the optimizer update, on one batch of random squashed capsules and random
labels). All routings are timed interleaved in this one process (see
`interleaved_medians`), and each is compared with dynamic routing with 3
iterations, the paper's.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import keras  # noqa: E402
import numpy as np  # noqa: E402
from common import interleaved_medians, write_results  # noqa: E402

from capsules_keras import DigitCaps, Length, MarginLoss, squash  # noqa: E402

#: (name, routing, iterations): the algorithms notebook 06 compares.
ROUTING_CASES = (
    ("dynamic, 1 (uniform)", "dynamic", 1),
    ("dynamic, 3", "dynamic", 3),
    ("dynamic, 5", "dynamic", 5),
    ("self-attention", "self_attention", 1),
    ("inverted dot-product, 3", "inverted_dot_product", 3),
)

#: The case every other is compared with: the paper's routing.
BASELINE = "dynamic, 3"


def training_step(routing, iterations, u, labels):
    """The compiled model, and a zero-argument callable that runs one training step."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input(u.shape[1:])
    capsules = DigitCaps(10, 16, routing_iterations=iterations, routing=routing)(inputs)
    model = keras.Model(inputs, Length()(capsules))
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss=MarginLoss())
    # train_on_batch returns its losses as Python floats: it blocks until the
    # step is done, on every backend.
    return model, lambda: model.train_on_batch(u, labels)


def run(batch=32, in_caps=1152, repeats=7, warmup=3):
    rng = np.random.default_rng(0)
    u = rng.standard_normal((batch, in_caps, 8)).astype("float32")
    u = keras.ops.convert_to_numpy(squash(u))
    labels = rng.integers(0, 10, batch)
    candidates, compiled = {}, {}
    for name, routing, iterations in ROUTING_CASES:
        model, step = training_step(routing, iterations, u, labels)
        candidates[name] = step
        compiled[name] = model
    timed = interleaved_medians(candidates, repeats=repeats, warmup=warmup)
    reference = timed[BASELINE]["median_ms"]
    return [
        {
            "backend": keras.backend.backend(),
            "routing": routing,
            "iterations": iterations,
            "name": name,
            # What "auto" resolved to once the model was trained.
            "jit_compile": bool(compiled[name].jit_compile),
            "batch": batch,
            "in_capsules": in_caps,
            "parameters": compiled[name].count_params(),
            "median_ms": timed[name]["median_ms"],
            "min_ms": timed[name]["min_ms"],
            "times_ms": timed[name]["times_ms"],
            "ratio_to_dynamic_3": timed[name]["median_ms"] / reference,
        }
        for name, routing, iterations in ROUTING_CASES
    ]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--in-capsules", type=int, default=1152)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--out", default="-", help="JSON file, or - for stdout")
    args = parser.parse_args(argv)
    results = run(args.batch, args.in_capsules, args.repeats, args.warmup)
    write_results(args.out, "routings", args, results)
    return results


if __name__ == "__main__":
    main()
