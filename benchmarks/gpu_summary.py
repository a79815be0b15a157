"""The summary of a GPU check's folder (benchmarks/gpu_check.sh writes it).

    python benchmarks/gpu_summary.py OUT

Reads what the check left in OUT -- each trainer run's `metrics.json` and
`history.csv` (runs-<policy>/<run>/), each backend's benchmark report
(bench-<backend>/results.json), the lines of `skipped.txt` and `failed.txt`
-- and writes `summary.json` and `summary.md` there. The standard library
only: it runs on whatever interpreter the check ran.
"""

import csv
import glob
import json
import os
import sys

from run_all import fastest_run

#: What a trainer run reports, from its metrics.json.
TRAIN_KEYS = (
    "backend",
    "devices",
    "dtype_policy",
    "epochs",
    "n_train",
    "n_test",
    "test_accuracy",
    "images_per_second",
    "train_seconds",
    "data_source",
)


def lines(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [line.strip() for line in f if line.strip()]


def train_rows(out):
    rows = []
    for path in sorted(glob.glob(os.path.join(out, "runs-*", "*", "metrics.json"))):
        with open(path) as f:
            metrics = json.load(f)
        row = {key: metrics.get(key) for key in TRAIN_KEYS}
        # The last epoch's rate: the first one carries the compilation.
        history = os.path.join(os.path.dirname(path), "history.csv")
        epochs = []
        if os.path.exists(history):
            with open(history) as f:
                epochs = list(csv.DictReader(f))
        seconds = float(epochs[-1]["epoch_seconds"]) if epochs else 0.0
        row["last_epoch_images_per_second"] = (
            metrics["n_train"] / seconds if seconds else None
        )
        rows.append(row)
    return rows


def bench_rows(out):
    """Per backend: the default path's routing ratio and the training pair."""
    rows = []
    for path in sorted(glob.glob(os.path.join(out, "bench-*", "results.json"))):
        with open(path) as f:
            report = json.load(f)
        backend = os.path.basename(os.path.dirname(path))[len("bench-") :]
        routing = [
            r
            for r in report["routing"]
            if r.get("default") and r["pass"] == "forward+backward"
        ]
        largest = max(routing, key=lambda r: r["batch"], default=None)
        # The fastest run of each, as run_all pairs them (ours in float32).
        ours, labml = (
            run and run["images_per_second"]
            for run in (
                fastest_run(report, backend, "ours"),
                fastest_run(report, backend, "labml"),
            )
        )
        rows.append(
            {
                "backend": backend,
                "routing_mode": largest and largest["mode"],
                "routing_batch": largest and largest["batch"],
                "routing_ratio_to_labml": largest and largest["ratio_to_labml"],
                "ours_images_per_second": ours,
                "labml_images_per_second": labml,
                "train_ratio_to_labml": ours / labml if ours and labml else None,
            }
        )
    return rows


def markdown(summary):
    def number(value, digits):
        return "-" if value is None else f"{value:.{digits}f}"

    text = ["# GPU check", ""]
    notes = summary["skipped"] + summary["failed"]
    text += [f"- {line.removeprefix('gpu_check: ')}" for line in notes]
    text += [
        "",
        "| backend | routing, batch | ours / labml (time) "
        "| training images/s: ours | labml | ours / labml |",
        "|---|---|---|---|---|---|",
    ]
    for row in summary["benchmarks"]:
        text.append(
            f"| {row['backend']} | {row['routing_mode']}, {row['routing_batch']} "
            f"| {number(row['routing_ratio_to_labml'], 2)} "
            f"| {number(row['ours_images_per_second'], 0)} "
            f"| {number(row['labml_images_per_second'], 0)} "
            f"| {number(row['train_ratio_to_labml'], 2)} |"
        )
    text += [
        "",
        "| backend | devices | policy | epochs | training digits | test accuracy "
        "| images/s (whole run) | images/s (last epoch) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in summary["train"]:
        text.append(
            f"| {row['backend']} | {row['devices']} | {row['dtype_policy']} "
            f"| {row['epochs']} | {row['n_train']} "
            f"| {number(row['test_accuracy'] and 100 * row['test_accuracy'], 2)}% "
            f"| {number(row['images_per_second'], 0)} "
            f"| {number(row['last_epoch_images_per_second'], 0)} |"
        )
    return "\n".join(text) + "\n"


def main(argv=None):
    (out,) = sys.argv[1:] if argv is None else argv
    summary = {
        "skipped": lines(os.path.join(out, "skipped.txt")),
        "failed": lines(os.path.join(out, "failed.txt")),
        "benchmarks": bench_rows(out),
        "train": train_rows(out),
    }
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    text = markdown(summary)
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write(text)
    print(text)
    return summary


if __name__ == "__main__":
    main()
