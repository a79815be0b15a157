"""Training-step throughput and memory: our CapsNet against labml_nn's.

    KERAS_BACKEND=jax python benchmarks/bench_train.py --impl ours
    python benchmarks/bench_train.py --impl labml
    KERAS_BACKEND=jax python benchmarks/bench_train.py --impl both   # side by side
    KERAS_BACKEND=torch python benchmarks/bench_train.py --impl ours \
        --dtype-policy mixed_bfloat16

Both train the paper's MNIST CapsNet (8.2M parameters) with Adam 1e-3 on the
same real digits at the same batch size. Ours runs `Model.fit` with the
command-line trainer's compile defaults and input pipeline for the backend
(`capsules_keras.training.training_data`, without augmentation); labml's model (see
`reference.py`) runs its own eager PyTorch step. Each implementation runs in
a process of its own, so that its peak memory (resident set size, sampled
while the timed steps run) is its own; `--impl both` alternates them, ours
once in each Keras dtype policy of `--dtype-policies` (float32 and
mixed_bfloat16: what mixed precision gains on this machine).
"""

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
from common import DEFAULT_MNIST, PeakRSS, machine, rss_mb, write_json  # noqa: E402


def load_digits(path, count):
    with np.load(path) as data:
        x = data["x_train"][:count].astype("float32")[..., None] / 255.0
        y = data["y_train"][:count].astype("int32")
    if len(x) < count:
        raise ValueError(f"{path} holds {len(x)} digits; {count} are needed")
    return x, y


def run_ours(x, y, batch_size, steps, warmup, dtype_policy="float32"):
    import keras

    from capsules_keras import CapsNet
    from capsules_keras.data import get_dataset
    from capsules_keras.training import default_jit_compile, training_data

    start_mb = rss_mb()  # frameworks imported, nothing built yet
    keras.utils.set_random_seed(0)
    keras.config.set_dtype_policy(dtype_policy)
    model = CapsNet()
    jit = default_jit_compile()
    model.compile(optimizer=keras.optimizers.Adam(1e-3), jit_compile=jit)
    mnist = get_dataset("mnist")

    def fit(rows):
        data, kwargs = training_data(mnist, x[rows], y[rows], batch_size, seed=0)
        model.fit(data, verbose=0, **kwargs)

    warm = warmup * batch_size
    fit(slice(0, warm))
    with PeakRSS() as memory:
        start = time.perf_counter()
        fit(slice(warm, None))
        seconds = time.perf_counter() - start
    return (
        {
            "impl": "ours",
            "backend": keras.backend.backend(),
            "jit_compile": jit,
            "dtype_policy": dtype_policy,
            "parameters": model.count_params(),
            "rss_start_mb": start_mb,
        },
        seconds,
        memory,
    )


def run_labml(x, y, batch_size, steps, warmup):
    import torch
    from reference import LabmlMNISTCapsNet, device, labml_train_step_fn, synchronize

    start_mb = rss_mb()  # frameworks imported, nothing built yet
    torch.manual_seed(0)
    model = LabmlMNISTCapsNet().to(device())
    model.train()
    step = labml_train_step_fn(model)
    # NCHW with standard strides: strides that look channels-last make torch
    # pick channels-last convolutions, whose outputs labml's .view() rejects.
    images = torch.tensor(x[..., 0], device=device()).unsqueeze(1)
    labels = torch.tensor(y, device=device()).long()

    def batches(start, count):
        for k in range(start, start + count):
            rows = slice(k * batch_size, (k + 1) * batch_size)
            yield images[rows], labels[rows]

    for data, target in batches(0, warmup):
        step(data, target)
    synchronize()
    with PeakRSS() as memory:
        start = time.perf_counter()
        for data, target in batches(warmup, steps):
            step(data, target)
        synchronize()
        seconds = time.perf_counter() - start
    parameters = sum(p.numel() for p in model.parameters())
    return (
        {
            "impl": "labml",
            "backend": "torch (labml_nn, eager)",
            "parameters": parameters,
            "rss_start_mb": start_mb,
        },
        seconds,
        memory,
    )


def run(
    impl, batch_size=100, steps=10, warmup=3, data=DEFAULT_MNIST, dtype_policy="float32"
):
    x, y = load_digits(data, (warmup + steps) * batch_size)
    if impl == "labml":
        result, seconds, memory = run_labml(x, y, batch_size, steps, warmup)
    else:
        result, seconds, memory = run_ours(
            x, y, batch_size, steps, warmup, dtype_policy
        )
    import resource

    result.update(
        batch_size=batch_size,
        steps=steps,
        seconds=seconds,
        images_per_second=steps * batch_size / seconds,
        step_ms=1000 * seconds / steps,
        rss_before_mb=memory.before_mb,
        rss_peak_mb=memory.peak_mb,
        rss_increase_mb=memory.increase_mb,
        # Everything training added: model, optimizer state, compiled code,
        # allocator caches kept from the warm-up steps.
        rss_training_mb=memory.peak_mb - result["rss_start_mb"],
        max_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    )
    return result


def side_by_side(rounds=1, dtype_policies=("float32",), **kwargs):
    """Alternates labml and ours in each of `dtype_policies`, each in a fresh
    process; returns all runs."""
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in kwargs.items()]
    variants = [["labml"]] + [["ours", f"--dtype-policy={p}"] for p in dtype_policies]
    runs = []
    for _ in range(rounds):
        for impl, *policy in variants:
            output = subprocess.run(
                [
                    sys.executable,
                    os.path.abspath(__file__),
                    "--impl",
                    impl,
                    *policy,
                    *flags,
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            if output.returncode:
                raise RuntimeError(f"{impl} failed:\n{output.stderr[-3000:]}")
            runs.append(json.loads(output.stdout.strip().splitlines()[-1]))
    return runs


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--impl", choices=("ours", "labml", "both"), default="both")
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--data", default=DEFAULT_MNIST)
    parser.add_argument(
        "--dtype-policy", default="float32", help="--impl ours: its Keras dtype policy"
    )
    parser.add_argument(
        "--dtype-policies",
        nargs="+",
        default=["float32", "mixed_bfloat16"],
        help="--impl both: ours in each of these",
    )
    parser.add_argument("--out", default="-", help="JSON file, or - for stdout")
    args = parser.parse_args(argv)
    settings = {
        "batch_size": args.batch_size,
        "steps": args.steps,
        "warmup": args.warmup,
        "data": args.data,
    }
    if args.impl == "both":
        results = side_by_side(
            rounds=args.rounds, dtype_policies=args.dtype_policies, **settings
        )
        write_json(
            args.out, {"benchmark": "train", "machine": machine(), "results": results}
        )
        return results
    result = run(args.impl, dtype_policy=args.dtype_policy, **settings)
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
