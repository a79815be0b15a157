"""Capsules against CNNs on image folders: the trainer's runs, paired per seed.

    KERAS_BACKEND=torch python benchmarks/folder_comparison.py \\
        FOLDER [FOLDER ...] --out benchmarks/folder-comparison

For every folder, model (`--models`, the trainer's `--model` names) and
seed, one run of `python -m capsules_keras.train --data FOLDER --model M
--seed S --epochs E` in a process of its own, every other setting the
trainer's default, into OUT/<folder>/<model>/seed<S>/ (a run found there
already, finished or stopped by the trainer, is read, not run again, so an
interrupted comparison resumes). Then
each run's model reads its held-out images (the seed draws the split, so
the models of one seed read the same images), and the first model of
`--models` is held against each of the others, seed by seed
(`capsules_keras.diagnostics.compare`: the paired difference with its 95%
interval, McNemar's test against a Bonferroni bound over the seeds and
comparisons of a folder, and `seed_verdict`). A run the trainer stopped
(a collapse) counts as stopped: no accuracy, no pair.

Writes OUT/comparison.json (every run, its folder relative to OUT; every
pair) and OUT/comparison.md (the tables).
"""

import argparse
import glob
import json
import os
import subprocess
import sys

import numpy as np

DEFAULT_MODELS = ("residual", "residual_cnn", "cnn")


def run_folder(out, folder, model, seed):
    return os.path.join(
        out, os.path.basename(os.path.normpath(folder)), model, f"seed{seed}"
    )


def train(folder, model, seed, epochs, target):
    """One trainer run into `target`; the path of its run folder, or None if
    the trainer stopped it (its log says why: `target`/train.log)."""
    finished = glob.glob(os.path.join(target, "*", "metrics.json"))
    if finished:
        return os.path.dirname(finished[0])
    log_path = os.path.join(target, "train.log")
    if os.path.isfile(log_path):
        with open(log_path) as log:
            if "\nerror: " in log.read():  # the trainer stopped it
                return None
    os.makedirs(target, exist_ok=True)
    command = [sys.executable, "-m", "capsules_keras.train", "--data", folder]
    command += ["--model", model, "--seed", str(seed), "--epochs", str(epochs)]
    command += ["--output-dir", target, "--verbose", "0"]
    with open(log_path, "w") as log:
        result = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT)
    finished = glob.glob(os.path.join(target, "*", "metrics.json"))
    if result.returncode or not finished:
        return None
    return os.path.dirname(finished[0])


def right_answers(run, folder, seed):
    """Which of its held-out images the run's model classifies right."""
    import keras

    from capsules_keras.training import trainer_settings
    from capsules_keras.training.fit import load_data

    data = load_data(trainer_settings(data=folder, seed=seed))
    model = keras.saving.load_model(os.path.join(run, "model.keras"))
    scores = model.predict(data.x_test, batch_size=100, verbose=0)
    return np.asarray(scores).argmax(-1) == data.y_test


def compare_folder(folder, models, seeds, runs):
    """The first model against each other one, per seed: rows for the table."""
    from capsules_keras.diagnostics import bonferroni_bound, compare, seed_verdict

    first, *others = models
    bound = bonferroni_bound(len(seeds) * max(1, len(others)))
    pairs = []
    for other in others:
        comparisons = []
        for seed in seeds:
            a, b = runs[first][seed], runs[other][seed]
            if a["right"] is None or b["right"] is None:
                continue
            result = compare(a["right"], b["right"])
            comparisons.append(result)
            low, high = result.difference_interval
            pairs.append(
                {
                    "folder": folder,
                    "a": first,
                    "b": other,
                    "seed": seed,
                    "difference": result.difference,
                    "interval": [low, high],
                    "a_only": result.a_only,
                    "b_only": result.b_only,
                    "p_value": result.p_value,
                }
            )
        verdict = seed_verdict(comparisons, bound) if comparisons else "no pair"
        pairs.append(
            {
                "folder": folder,
                "a": first,
                "b": other,
                "verdict": verdict,
                "seeds": len(comparisons),
            }
        )
    return pairs, bound


def table(report):
    lines = []
    for folder in report["folders"]:
        name = os.path.basename(os.path.normpath(folder))
        runs = [r for r in report["runs"] if r["folder"] == folder]
        held_out = next((r["n_test"] for r in runs if r["n_test"]), 0)
        lines += [f"### {name}", "", f"{held_out} held-out images a seed", ""]
        lines += ["| model | seeds | mean | per seed |", "|---|---|---|---|"]
        for model in report["models"]:
            mine = [r for r in runs if r["model"] == model]
            scored = [r["accuracy"] for r in mine if r["accuracy"] is not None]
            each = ", ".join(
                "stopped" if r["accuracy"] is None else f"{r['accuracy']:.1%}"
                for r in mine
            )
            mean = f"{np.mean(scored):.1%}" if scored else "n/a"
            lines.append(f"| {model} | {len(mine)} | {mean} | {each} |")
        lines += ["", "| pair | seed | difference (points) | 95% interval | McNemar |"]
        lines += ["|---|---|---|---|---|"]
        for pair in report["pairs"]:
            if pair["folder"] != folder:
                continue
            label = f"{pair['a']} - {pair['b']}"
            if "verdict" in pair:
                lines.append(
                    f"| {label} | all | verdict over {pair['seeds']} paired "
                    f"seed(s): **{pair['verdict']}** | | |"
                )
                continue
            low, high = (100 * v for v in pair["interval"])
            lines.append(
                f"| {label} | {pair['seed']} | {100 * pair['difference']:+.1f} "
                f"| [{low:+.1f}, {high:+.1f}] | +{pair['a_only']}/-{pair['b_only']} "
                f"p={pair['p_value']:.3f} |"
            )
        lines += [
            "",
            f"Bonferroni bound per folder: p < {report['bounds'][folder]:.4f}",
            "",
        ]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+")
    parser.add_argument("--models", nargs="+", default=list(DEFAULT_MODELS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    import keras

    report = {
        "backend": keras.backend.backend(),
        "epochs": args.epochs,
        "folders": args.folders,
        "models": args.models,
        "seeds": args.seeds,
        "runs": [],
        "pairs": [],
        "bounds": {},
    }
    for folder in report["folders"]:
        runs = {model: {} for model in args.models}
        for seed in args.seeds:
            for model in args.models:
                target = run_folder(args.out, folder, model, seed)
                run = train(folder, model, seed, args.epochs, target)
                right = None if run is None else right_answers(run, folder, seed)
                runs[model][seed] = {"right": right}
                report["runs"].append(
                    {
                        "folder": folder,
                        "model": model,
                        "seed": seed,
                        "run": os.path.relpath(run or target, args.out),
                        "accuracy": None if right is None else float(right.mean()),
                        "n_test": None if right is None else int(right.size),
                    }
                )
        pairs, bound = compare_folder(folder, args.models, args.seeds, runs)
        report["pairs"] += pairs
        report["bounds"][folder] = bound
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "comparison.json"), "w") as f:
        json.dump(report, f, indent=1)
    text = table(report)
    with open(os.path.join(args.out, "comparison.md"), "w") as f:
        f.write(text + "\n")
    print(text)
    return report


if __name__ == "__main__":
    main()
