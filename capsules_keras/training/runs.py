"""Run folders: a new one per run with its `config.json`, its epoch log, resuming.

A run folder `<time>-<dataset>-<model>-<preset>-<backend>` holds
`config.json` (the settings), `history.csv` (`EpochLog`), `backup/` (Keras'
`BackupAndRestore`, for `--resume`), and at the end `metrics.json`,
`model.keras`, the figures and `report.md`.
"""

import csv
import dataclasses
import json
import os
import time

import keras

from capsules_keras.training.config import TrainConfig, applies

#: The time a run folder's name starts with (`new_run_dir`).
STAMP = "%Y%m%d-%H%M%S"
#: What a run folder saved before these settings existed trained with (a
#: model option only for the models that have it).
SAVED_BEFORE = {
    "model": "capsnet",
    "dataset": "mnist",
    "pairs_per_epoch": None,
    "conv_filters": 256,
    "primary_capsules": 32,
    "reconstruction_weight": 0.0005,
    "routing": "dynamic",
}


def start_run(output_dir, config):
    """A new run folder under `output_dir` (`new_run_dir`) with its `config.json`.

    Args:
        output_dir: Where the run folders go (the trainer's `--output-dir`).
        config: The run's `TrainConfig`; `config.json` is its fields.
    """
    run_dir = new_run_dir(output_dir, run_name(config))
    with open(os.path.join(run_dir, "config.json"), "w") as f:
        json.dump(dataclasses.asdict(config), f, indent=2)
    return run_dir


def new_run_dir(output_dir, name):
    """A fresh folder `output_dir/<time>-<name>-<backend>[-k]`; never reused."""
    stamp = time.strftime(STAMP)
    base = os.path.join(output_dir, f"{stamp}-{name}-{keras.backend.backend()}")
    for k in range(1, 1000):
        path = base if k == 1 else f"{base}-{k}"
        try:
            os.makedirs(path)
            return path
        except FileExistsError:
            continue
    raise RuntimeError(f"Could not create a new run folder next to {base}")


def latest_run(output_dir, name):
    """The newest finished run folder `output_dir/<time>-<name>-<backend>[-k]`.

    Finished: it holds `model.keras` and `metrics.json`, which a run writes
    last. Runs on any backend count (a `.keras` file loads on every one).

    Args:
        output_dir: Where the runs are (the trainer's `--output-dir`).
        name: What was trained, as `run_name` gives it, e.g.
            `"multi_mnist-capsnet-quick"`.

    Returns:
        The folder's path, or None when there is none (or no `output_dir`).
    """
    if not os.path.isdir(output_dir):
        return None
    width = len(time.strftime(STAMP))
    found = []
    for folder in os.listdir(output_dir):
        stamp, rest = folder[:width], folder[width + 1 :]
        if not rest.startswith(f"{name}-"):
            continue
        backend, _, k = rest[len(name) + 1 :].partition("-")
        path = os.path.join(output_dir, folder)
        done = all(
            os.path.isfile(os.path.join(path, f))
            for f in ("model.keras", "metrics.json")
        )
        if backend and (not k or k.isdigit()) and done:
            found.append(((stamp, int(k or 1)), path))
    return max(found)[1] if found else None


def run_name(config):
    """The part of a run folder's name that says what was trained."""
    return f"{config.dataset}-{config.model}-{config.preset}"


def resumed_config(run_dir):
    """The `TrainConfig` of the unfinished run in `run_dir`, to continue it.

    A `config.json` written before a setting existed gets the value those
    runs trained with (`SAVED_BEFORE`).

    Raises:
        ValueError: `run_dir` holds no run, or a finished one, or its
            `config.json` holds a setting that is unknown or out of range.
    """
    config_path = os.path.join(run_dir, "config.json")
    if not os.path.exists(config_path):
        raise ValueError(f"no run to resume in {run_dir!r}")
    if os.path.exists(os.path.join(run_dir, "metrics.json")):
        raise ValueError(f"the run in {run_dir!r} already finished")
    with open(config_path) as f:
        saved = json.load(f)
    known = {field.name for field in dataclasses.fields(TrainConfig)}
    unknown = sorted(set(saved) - known)
    if unknown:
        raise ValueError(
            f"{config_path} holds settings this version does not know. "
            f"Received: {unknown}"
        )
    model = saved.get("model", SAVED_BEFORE["model"])
    dataset = saved.get("dataset", SAVED_BEFORE["dataset"])
    before = {k: v for k, v in SAVED_BEFORE.items() if applies(k, model, dataset)}
    return TrainConfig(**{**before, **saved})


def saved_run(path, dataset=None):
    """The saved model of a run folder (or a `.keras` file) and its dataset.

    Args:
        path: A run folder or a `.keras` file.
        dataset: A dataset name; None: the run folder's (from its
            `config.json`), else `"mnist"`.

    Returns:
        `(model_path, dataset)`.

    Raises:
        FileNotFoundError: there is no saved model at `path`.
    """
    name = dataset or "mnist"
    if os.path.isdir(path):
        config_path = os.path.join(path, "config.json")
        if dataset is None and os.path.isfile(config_path):
            with open(config_path) as f:
                name = json.load(f).get("dataset", "mnist")
        path = os.path.join(path, "model.keras")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"No saved model at {path!r}")
    return path, name


class EpochLog(keras.callbacks.Callback):
    """Appends each epoch's logs and training time to a CSV file.

    `epoch_seconds` counts training only, not the validation pass. A resumed
    run appends to the same file, so it always holds every finished epoch.
    """

    def __init__(self, path):
        super().__init__()
        self.path = path

    def on_epoch_begin(self, epoch, logs=None):
        self._start = time.perf_counter()

    def on_test_begin(self, logs=None):
        self._test_start = time.perf_counter()

    def on_test_end(self, logs=None):
        # Validation runs inside the epoch; keep it out of the training time.
        self._start += time.perf_counter() - self._test_start

    def on_epoch_end(self, epoch, logs=None):
        seconds = time.perf_counter() - self._start
        row = {"epoch": epoch + 1, **{k: float(v) for k, v in (logs or {}).items()}}
        row["epoch_seconds"] = seconds
        rows = []
        if os.path.exists(self.path):
            with open(self.path, newline="") as f:
                # A run killed after this log but before its backup repeats
                # the epoch when resumed: keep only the newest row of it.
                rows = [r for r in csv.DictReader(f) if int(r["epoch"]) <= epoch]
        with open(self.path, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(row))
            writer.writeheader()
            writer.writerows([*rows, row])


def read_history(path):
    """The columns of an `EpochLog` file as lists of floats, by name."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return {key: [float(row[key]) for row in rows] for key in rows[0]} if rows else {}
