"""The capacity planner's memory estimate against training memory measured.

    KERAS_BACKEND=torch python benchmarks/capacity_check.py
    KERAS_BACKEND=torch python benchmarks/capacity_check.py --out capacity-torch.json

For CapsNet at three input sizes, each size trains a few steps of
`Model.fit` on random images in a fresh process (the trainer's compile
defaults for the backend, Adam), and the planner's `plan.peak_bytes`
(`capsules_keras.capacity.plan_capacity`) is set beside what was measured.

"Measured" is the training memory as benchmarks/bench_train.py defines it:
the process' peak resident memory (the larger of the sampled peak and
`ru_maxrss`) minus its resident memory after the frameworks were imported
and the random images made, before the model was built. So it holds
everything the planner counts -- the weights, their gradients, Adam's two
moments, the activations kept for the backward pass and the step's
temporaries -- and the framework's own buffers that training adds (its
trainer, compiled functions, allocator pools), which the planner counts
as `BACKEND_COSTS[backend].overhead` (measured with `--overhead`: the
training memory of a CapsNet too small to hold anything else). The
planner is meant to be within 25% of it; docs/guides/capacity.md keeps
the table.
"""

import argparse
import json
import os
import resource
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import PeakRSS, rss_mb, write_json  # noqa: E402

#: (image_shape, num_classes, batch_size): the primary capsules grow from
#: 1,152 to 18,432 (the votes from 0.7 to 5.6 MiB an image) while the batch
#: shrinks, so each run stays under ~2 GB and a few minutes on two CPU cores.
SIZES = (
    ((28, 28, 1), 10, 64),
    ((32, 32, 3), 10, 32),
    ((64, 64, 3), 5, 8),
)
#: The paper's strides at every size, which CapsNet keeps up to 40 px: at
#: 64x64 its own strides (`capsnet_strides`) would shrink the 18,432 primary
#: capsules to 4,608, and the planner is checked where the votes are largest.
PAPER_STRIDES = {"conv_strides": 1, "primary_strides": 2}
#: A CapsNet whose tensors and weights are a few kB: its training memory is the
#: framework's own (`BACKEND_COSTS[backend].overhead` in the planner).
TINY = {
    "conv_filters": 8,
    "primary_capsules": 2,
    "primary_dim": 4,
    "digit_dim": 4,
    "decoder_units": (8, 8),
}
#: Warm-up (first, compiling) step plus measured steps, all inside the peak.
STEPS = 3


def measure(image_shape, num_classes, batch_size, steps=STEPS, model_kwargs=None):
    """Trains `steps` steps; returns the training memory in MB and the rest."""
    import keras
    import numpy as np

    from capsules_keras import CapsNet
    from capsules_keras.training import default_jit_compile

    rng = np.random.default_rng(0)
    x = rng.random((steps * batch_size, *image_shape), dtype="float32")
    y = rng.integers(0, num_classes, steps * batch_size).astype("int32")
    # Before the start: on every backend it imports tensorflow (Keras seeds
    # tf.random too), some 480 MB of RSS that are no part of training.
    keras.utils.set_random_seed(0)
    start_mb = rss_mb()  # frameworks imported, images made, nothing built
    with PeakRSS() as memory:
        model = CapsNet(image_shape, num_classes, **(model_kwargs or {}))
        built_mb = rss_mb()
        jit = default_jit_compile()
        model.compile(optimizer=keras.optimizers.Adam(1e-3), jit_compile=jit)
        model.fit(x, y, batch_size=batch_size, epochs=1, verbose=0, shuffle=False)
    max_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    peak_mb = max(memory.peak_mb, max_rss_mb)
    return {
        "backend": keras.backend.backend(),
        "jit_compile": jit,
        "image_shape": list(image_shape),
        "num_classes": num_classes,
        "batch_size": batch_size,
        "steps": steps,
        "parameters": model.count_params(),
        "rss_start_mb": round(start_mb, 1),
        "rss_built_mb": round(built_mb, 1),
        "rss_peak_mb": round(peak_mb, 1),
        "measured_mb": round(peak_mb - start_mb, 1),
    }


def _in_subprocess(spec):
    """`measure(**spec)` in a fresh process: its peak is its own."""
    output = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--child", json.dumps(spec)],
        capture_output=True,
        text=True,
        check=False,
    )
    if output.returncode:
        raise RuntimeError(f"{spec} failed:\n{output.stderr[-3000:]}")
    return json.loads(output.stdout.strip().splitlines()[-1])


def run(sizes=SIZES, steps=STEPS, model_kwargs=None):
    """Planned against measured for every `(image_shape, classes, batch)`."""
    from capsules_keras.capacity import plan_capacity
    from capsules_keras.models import capsnet_backbone

    decoder_units = (model_kwargs or {}).get("decoder_units", (512, 1024))
    backbone_kwargs = {
        k: v for k, v in (model_kwargs or {}).items() if k != "decoder_units"
    }
    rows = []
    for image_shape, num_classes, batch_size in sizes:
        spec = {
            "image_shape": list(image_shape),
            "num_classes": num_classes,
            "batch_size": batch_size,
            "steps": steps,
            "model_kwargs": model_kwargs,
        }
        row = _in_subprocess(spec)
        backbone = capsnet_backbone(tuple(image_shape), num_classes, **backbone_kwargs)
        plan = plan_capacity(backbone, batch_size, decoder_units=decoder_units)
        if plan.parameters != row["parameters"]:
            raise RuntimeError(
                f"The plan counts {plan.parameters} parameters, the model "
                f"{row['parameters']}"
            )
        row["primary_capsules"] = plan.primary_capsules
        row["vote_mb"] = round(plan.vote_bytes / 2**20, 1)
        row["planned_mb"] = round(plan.peak_bytes / 2**20, 1)
        row["ratio"] = round(row["planned_mb"] / row["measured_mb"], 2)
        rows.append(row)
    return rows


def markdown(rows):
    """The rows as the table on docs/guides/capacity.md."""
    lines = [
        "| backend | image | classes | batch | primary capsules | votes (MB) "
        "| planned (MB) | measured (MB) | planned / measured |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        image = "x".join(map(str, r["image_shape"]))
        lines.append(
            f"| {r['backend']} | {image} | {r['num_classes']} | {r['batch_size']} "
            f"| {r['primary_capsules']:,} | {r['vote_mb']} | {r['planned_mb']} "
            f"| {r['measured_mb']} | {r['ratio']} |"
        )
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument(
        "--overhead",  # the planner's BACKEND_COSTS[backend].overhead
        action="store_true",
        help="measure the framework's own training memory (a tiny CapsNet)",
    )
    parser.add_argument("--out", default="-", help="JSON file, or - for stdout")
    args = parser.parse_args(argv)
    if args.child:
        spec = json.loads(args.child)
        print(json.dumps(measure(**spec)))
        return None
    if args.overhead:
        rows = run([((28, 28, 1), 10, 2)], args.steps, TINY)
    else:
        rows = run(SIZES, args.steps, PAPER_STRIDES)
    print(markdown(rows), file=sys.stderr)
    write_json(args.out, {"benchmark": "capacity_check", "results": rows})
    return rows


if __name__ == "__main__":
    main()
