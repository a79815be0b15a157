"""Runs every benchmark on every backend and writes the report.

    python benchmarks/run_all.py          # what `make bench` runs

Writes benchmarks/results.json, benchmarks/README.md (tables with ratios to
labml_nn, machine details, commands) and benchmarks/results.png.
"""

import argparse
import datetime
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import DEFAULT_MNIST, machine  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
BACKENDS = ("torch", "jax", "tensorflow")

# Targets of the performance issues, as ratios to labml_nn measured side by
# side, on each backend's default path (what users get without flags).
ROUTING_TARGET = 0.5  # DigitCaps forward+backward, batch 128: time ratio
TRAIN_TARGET = 1.2  # training images/s ratio, the trainer's defaults


def _run(script, backend, args):
    env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3"}
    output = subprocess.run(
        [sys.executable, os.path.join(HERE, script), *args, "--out", "-"],
        env=env,
        capture_output=True,
        text=True,
    )
    if output.returncode:
        raise RuntimeError(f"{script} on {backend} failed:\n{output.stderr[-4000:]}")
    return json.loads(output.stdout.strip().splitlines()[-1])


def collect(backends, routing_args, train_args):
    report = {
        "date": datetime.date.today().isoformat(),
        "machine": machine(),
        "routing": [],
        "train": [],
    }
    for backend in backends:
        report["routing"] += _run("bench_routing.py", backend, routing_args)["results"]
        report["train"] += [
            {**run, "paired_with": backend}
            for run in _run("bench_train.py", backend, ["--impl", "both", *train_args])[
                "results"
            ]
        ]
    return report


def fastest_run(report, backend, impl, dtype_policy="float32"):
    """The fastest training run of `impl` paired with `backend`, or None.

    Ours in `dtype_policy` (runs measured before the policy was recorded
    were float32); labml's runs have no policy.
    """
    runs = [
        r
        for r in report["train"]
        if r["paired_with"] == backend
        and r["impl"] == impl
        and (impl == "labml" or r.get("dtype_policy", "float32") == dtype_policy)
    ]
    return max(runs, key=lambda r: r["images_per_second"], default=None)


def train_pairs(report):
    """{backend: (ours, labml)} from the side-by-side training runs (ours in
    float32, the trainer's default)."""
    return {
        backend: (
            fastest_run(report, backend, "ours"),
            fastest_run(report, backend, "labml"),
        )
        for backend in {run["paired_with"] for run in report["train"]}
    }


def precision_table(report):
    """Ours in float32 and in mixed_bfloat16 per backend, from the same runs."""
    lines = [
        "| backend | float32 (images/s) | mixed_bfloat16 (images/s) "
        "| mixed_bfloat16 / float32 |",
        "|---|---|---|---|",
    ]
    for backend in sorted({run["paired_with"] for run in report["train"]}):
        full = fastest_run(report, backend, "ours", "float32")
        mixed = fastest_run(report, backend, "ours", "mixed_bfloat16")
        if full and mixed:
            lines.append(
                f"| {backend} | {full['images_per_second']:.1f} "
                f"| {mixed['images_per_second']:.1f} "
                f"| {mixed['images_per_second'] / full['images_per_second']:.2f}x |"
            )
    return "\n".join(lines)


def routing_table(report):
    lines = [
        "| backend | mode | default path | batch | pass | ours (ms) | labml (ms) "
        "| ours / labml |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in report["routing"]:
        if row["mode"] != "labml":
            default = "**yes**" if row.get("default") else ""
            lines.append(
                f"| {row['backend']} | {row['mode']} | {default} | {row['batch']} "
                f"| {row['pass']} "
                f"| {row['median_ms']:.0f} | {row['labml_median_ms']:.0f} "
                f"| {row['ratio_to_labml']:.2f} |"
            )
    return "\n".join(lines)


def train_table(report):
    lines = [
        "| backend | jit_compile | ours (images/s) | labml (images/s) | speed ratio "
        "| ours step memory (MB) | labml step memory (MB) | memory ratio "
        "| ours training memory (MB) | labml training memory (MB) | memory ratio "
        "| ours peak RSS (MB) | labml peak RSS (MB) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for backend, (ours, labml) in sorted(train_pairs(report).items()):
        lines.append(
            f"| {backend} | {ours['jit_compile']} | {ours['images_per_second']:.1f} "
            f"| {labml['images_per_second']:.1f} "
            f"| {ours['images_per_second'] / labml['images_per_second']:.2f} "
            f"| {ours['rss_increase_mb']:.0f} | {labml['rss_increase_mb']:.0f} "
            f"| {ours['rss_increase_mb'] / labml['rss_increase_mb']:.2f} "
            f"| {ours['rss_training_mb']:.0f} | {labml['rss_training_mb']:.0f} "
            f"| {ours['rss_training_mb'] / labml['rss_training_mb']:.2f} "
            f"| {ours['max_rss_mb']:.0f} | {labml['max_rss_mb']:.0f} |"
        )
    return "\n".join(lines)


def routing_rows(report, backend, batch=128):
    """(default path, fastest mode) forward+backward rows of a backend."""
    rows = [
        r
        for r in report["routing"]
        if r["backend"] == backend
        and r["batch"] == batch
        and r["pass"] == "forward+backward"
    ]
    if not rows:
        return None
    default = next((r for r in rows if r.get("default")), None)
    return default, min(rows, key=lambda r: r["ratio_to_labml"])


def targets(report):
    """Which targets are met, in words."""
    lines = []
    routing = {b: routing_rows(report, b) for b in BACKENDS}
    routing = {b: rows for b, rows in routing.items() if rows and rows[0]}
    if routing:
        every = all(
            default["ratio_to_labml"] <= ROUTING_TARGET
            for default, _ in routing.values()
        )
        lines.append(
            f"- DigitCaps forward+backward, batch 128, the default path of every "
            f"backend <= {ROUTING_TARGET}x labml: **{'met' if every else 'NOT met'}** ("
            + ", ".join(
                f"{b} {default['ratio_to_labml']:.2f}x ({default['mode']}; fastest "
                f"opt-in: {best['ratio_to_labml']:.2f}x, {best['mode']})"
                for b, (default, best) in routing.items()
            )
            + ")"
        )
    pairs = train_pairs(report)
    if pairs:
        speed = {
            b: o["images_per_second"] / r["images_per_second"]
            for b, (o, r) in pairs.items()
        }
        memory = {
            kind: {
                b: o[f"rss_{kind}_mb"] / r[f"rss_{kind}_mb"]
                for b, (o, r) in pairs.items()
            }
            for kind in ("increase", "training")
        }
        lines.append(
            f"- training images/s with the trainer's defaults, every backend >= "
            f"{TRAIN_TARGET}x labml: "
            f"**{'met' if min(speed.values()) >= TRAIN_TARGET else 'NOT met'}** ("
            + ", ".join(f"{b} {v:.2f}x" for b, v in sorted(speed.items()))
            + ")"
        )
        for kind, name in (("increase", "step"), ("training", "training")):
            lines.append(
                f"- {name} memory <= labml on every backend: "
                f"**{'met' if max(memory[kind].values()) <= 1.0 else 'NOT met'}** ("
                + ", ".join(f"{b} {v:.2f}x" for b, v in sorted(memory[kind].items()))
                + ")"
            )
    return "\n".join(lines)


def bar_chart(report, path):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 3.8), layout="constrained")
    routing_ax, train_ax = fig.subplots(1, 2)
    labels, values = [], []
    for row in report["routing"]:
        if row["batch"] == 128 and row["pass"] == "forward+backward":
            if row["mode"] == "labml" and "labml" in labels:
                continue
            labels.append(
                "labml"
                if row["mode"] == "labml"
                else f"{row['backend']}\n{row['mode']}"
            )
            values.append(row["median_ms"])
    routing_ax.bar(
        labels, values, color=["gray" if x == "labml" else "C0" for x in labels]
    )
    routing_ax.set_ylabel("ms (median)")
    routing_ax.set_title("Routing layer forward+backward, batch 128")
    routing_ax.tick_params(axis="x", labelsize=8)
    pairs = sorted(train_pairs(report).items())
    names = [b for b, _ in pairs]
    ours = [o["images_per_second"] for _, (o, _) in pairs]
    labml = [r["images_per_second"] for _, (_, r) in pairs]
    positions = range(len(names))
    train_ax.bar([p - 0.2 for p in positions], ours, 0.4, label="capsules_keras")
    train_ax.bar(
        [p + 0.2 for p in positions], labml, 0.4, label="labml_nn (torch)", color="gray"
    )
    train_ax.set_xticks(list(positions), names)
    train_ax.set_ylabel("images / s")
    train_ax.set_title("Full training step, batch 100")
    train_ax.legend()
    fig.savefig(path, dpi=100)


README_TEMPLATE = """# Benchmarks: capsules_keras against the PyTorch reference

(The reference is labml_nn's capsule network.)

Generated by `make bench` (`python benchmarks/run_all.py`) on {date}. One run
on one machine: every ratio compares numbers measured side by side in that
run (routing: interleaved in one process; training: alternating processes).

Machine: {cpu_model}, {logical_cpus} logical CPUs, {memory_gb} GB RAM,
Python {python}, Keras {keras}, NumPy {numpy}, torch {torch}
({torch_threads} threads). GPU: {gpu}.

## Targets

{targets}

## Routing layer: DigitCaps(10, 16, routing_iterations=3) on 1152 capsules of 8 dims

Ours: the `DigitCaps` layer of the current backend, compiled each way the
backend allows; "default path" marks the mode that `Model.fit` and the
trainer use without flags on this machine. labml:
`labml_nn.capsule_networks.Router(1152, 10, 8, 16, 3)` in eager PyTorch,
exactly as published (its softmax runs over the child axis; nothing
changed). Median of {repeats} interleaved runs after {warmup} warm-ups;
the loss for the backward pass is `sum(v ** 2)`.

{routing_table}

## Full training step: the paper's MNIST CapsNet, Adam 1e-3, batch {batch}

Ours: `CapsNet` trained with `Model.fit`, the trainer's compile defaults
(`--jit-compile auto`) and its input pipeline without augmentation
(`capsules_keras.training.training_data`: arrays on jax and torch, batches
through `capsules_keras.data.feed` on tensorflow). labml: its
`MNISTCapsuleNetworkModel` rebuilt from its published modules
(`benchmarks/reference.py`) with its own training step.
{steps} timed steps after {train_warmup} warm-up steps, on real MNIST digits.
"Step memory" is the peak resident memory while the timed steps run minus
the resident memory just before them (what a training step needs on top of
what the warm-up left behind). "Training memory" is that peak minus the
resident memory after the frameworks were imported and before the model was
built: model, optimizer state, compiled code and whatever buffers an
allocator keeps from the warm-up (tensorflow's allocator keeps its buffers,
which makes its step memory look small). "Peak RSS" is the whole process,
including each framework's own footprint (Keras on torch also imports jax
and TensorFlow here).

{train_table}

## Mixed precision: the same training step, ours in float32 and in mixed_bfloat16

Ours as above, once in each Keras dtype policy, in the same rounds: weights
in float32, layers computed in bfloat16 but for what the capsule layers keep
in float32 (the squash's norm, the routing logits and softmax, the lengths,
the losses). `--dtype-policy auto` picks mixed_bfloat16 for torch on a CPU
with bfloat16 instructions (`avx512_bf16` or `amx_bf16` in /proc/cpuinfo).

{precision_table}

![results](results.png)

## Reproduce

```bash
make bench                         # all backends, writes this file
KERAS_BACKEND=jax python benchmarks/bench_routing.py
KERAS_BACKEND=jax python benchmarks/bench_train.py --impl both
# after editing NOTES.md: rewrite this file from results.json, measuring nothing
python benchmarks/run_all.py --from-json benchmarks/results.json \\
    --notes-file benchmarks/NOTES.md
```
{notes}"""


def write_report(report, folder, notes=""):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "results.json"), "w") as f:
        json.dump(report, f, indent=2)
    bar_chart(report, os.path.join(folder, "results.png"))
    train = report["train"][0] if report["train"] else {}
    text = README_TEMPLATE.format(
        date=report["date"],
        targets=targets(report),
        routing_table=routing_table(report),
        train_table=train_table(report),
        precision_table=precision_table(report),
        repeats=report.get("routing_repeats", "?"),
        warmup=report.get("routing_warmup", "?"),
        batch=train.get("batch_size", "?"),
        steps=train.get("steps", "?"),
        train_warmup=report.get("train_warmup", "?"),
        notes=notes,
        **{"gpu": "none", **report["machine"]},
    )
    with open(os.path.join(folder, "README.md"), "w") as f:
        f.write(text)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", nargs="+", default=list(BACKENDS))
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[32, 128])
    parser.add_argument("--in-capsules", type=int, default=1152)
    parser.add_argument("--train-steps", type=int, default=10)
    parser.add_argument("--train-warmup", type=int, default=3)
    parser.add_argument("--train-batch-size", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--train-dtype-policies",
        nargs="+",
        default=["float32", "mixed_bfloat16"],
        help="ours in each of these Keras dtype policies (float32 gives the ratio)",
    )
    parser.add_argument(
        "--train-data", default=DEFAULT_MNIST, help="Keras-layout MNIST .npz"
    )
    parser.add_argument("--output-dir", default=HERE)
    parser.add_argument(
        "--notes-file", help="Markdown appended to the README (analysis, profiles)"
    )
    parser.add_argument(
        "--from-json",
        help="Rewrite the README and chart from this results.json; measure nothing",
    )
    args = parser.parse_args(argv)
    notes = ""
    if args.notes_file:
        with open(args.notes_file) as f:
            notes = "\n" + f.read()
    if args.from_json:
        with open(args.from_json) as f:
            report = json.load(f)
        write_report(report, args.output_dir, notes)
        return report
    routing_args = [
        "--batch-sizes",
        *map(str, args.batch_sizes),
        "--in-capsules",
        str(args.in_capsules),
        "--repeats",
        str(args.repeats),
        "--warmup",
        str(args.warmup),
    ]
    train_args = [
        "--steps",
        str(args.train_steps),
        "--warmup",
        str(args.train_warmup),
        "--batch-size",
        str(args.train_batch_size),
        "--rounds",
        str(args.rounds),
        "--dtype-policies",
        *args.train_dtype_policies,
        "--data",
        args.train_data,
    ]
    report = collect(args.backends, routing_args, train_args)
    report.update(
        routing_repeats=args.repeats,
        routing_warmup=args.warmup,
        train_warmup=args.train_warmup,
    )
    write_report(report, args.output_dir, notes)
    return report


if __name__ == "__main__":
    main()
