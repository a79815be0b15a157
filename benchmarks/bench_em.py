"""Training step of MatrixCapsNet (EM routing), and where its time goes, on one backend.

    KERAS_BACKEND=jax python benchmarks/bench_em.py --out benchmarks/em-jax.json

One step is `model.train_on_batch` (forward, backward and the Adam update) of
`MatrixCapsNet` on a batch of random 28x28 images and labels, compiled as
`fit` compiles by default (`jit_compile="auto"`: XLA on jax, a graph without
XLA on tensorflow on a CPU, eager on torch), and, on tensorflow and torch,
also with `jit_compile=True` (XLA / torch.compile), the opt-in. The cases
differ only in the EM iterations of the three routed layers: 1 (one M-step,
no E-step: the convolutions, the votes and one mean and variance per
parent), 2 (the model's default) and 3 (the paper's). The difference between
them is the cost of one more EM iteration. All cases are timed interleaved
in this one process (see `interleaved_medians`).
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import keras  # noqa: E402
import numpy as np  # noqa: E402
from common import interleaved_medians, write_results  # noqa: E402

from capsules_keras import MatrixCapsNet  # noqa: E402


def cases(opt_in=True, iterations=(1, 2, 3)):
    """(name, routing_iterations, jit_compile) of every timed case."""
    default = [(f"{n} EM iterations", n, "auto") for n in iterations]
    if not opt_in or keras.backend.backend() == "jax":  # "auto" is XLA already
        return default
    return default + [("2 EM iterations, jit_compile=True", 2, True)]


def training_step(iterations, jit_compile, images, labels):
    """The compiled model, and a zero-argument callable that runs one training step."""
    keras.utils.set_random_seed(0)
    model = MatrixCapsNet(routing_iterations=iterations)
    model.compile(optimizer=keras.optimizers.Adam(1e-3), jit_compile=jit_compile)
    # train_on_batch returns its losses as Python floats: it blocks until the
    # step is done, on every backend.
    return model, lambda: model.train_on_batch(images, labels)


def run(batch=32, repeats=7, warmup=3, opt_in=True, iterations=(1, 2, 3)):
    """Timings of every case; `opt_in=False` leaves out `jit_compile=True`.

    `iterations`: the EM iterations of the cases on the default compile path.
    """
    rng = np.random.default_rng(0)
    images = rng.uniform(0.0, 1.0, (batch, 28, 28, 1)).astype("float32")
    labels = rng.integers(0, 10, batch)
    candidates, compiled = {}, {}
    for name, routing_iterations, jit_compile in cases(opt_in, iterations):
        model, step = training_step(routing_iterations, jit_compile, images, labels)
        candidates[name] = step
        compiled[name] = model
    timed = interleaved_medians(candidates, repeats=repeats, warmup=warmup)
    return [
        {
            "backend": keras.backend.backend(),
            "name": name,
            "routing_iterations": routing_iterations,
            # What "auto" resolved to once the model was trained.
            "jit_compile": bool(compiled[name].jit_compile),
            "batch": batch,
            "parameters": compiled[name].count_params(),
            "median_ms": timed[name]["median_ms"],
            "min_ms": timed[name]["min_ms"],
            "times_ms": timed[name]["times_ms"],
            "images_per_second": batch / timed[name]["median_ms"] * 1000,
        }
        for name, routing_iterations, _ in cases(opt_in, iterations)
    ]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument(
        "--iterations",
        type=int,
        nargs="+",
        default=[1, 2, 3],
        help="EM iterations of the cases on the default compile path",
    )
    parser.add_argument("--out", default="-", help="JSON file, or - for stdout")
    args = parser.parse_args(argv)
    results = run(args.batch, args.repeats, args.warmup, iterations=args.iterations)
    write_results(args.out, "em_routing", args, results)
    return results


if __name__ == "__main__":
    main()
