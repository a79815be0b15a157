"""A run's settings: its preset's values, overridden by the flags given, checked."""

import argparse

from capsules_keras._checks import check_positive_int
from capsules_keras.data import DATASETS, get_dataset
from capsules_keras.routing import check_routing
from capsules_keras.training.presets import SETTINGS, preset_settings
from capsules_keras.training.registry import MODEL_OPTIONS, MODELS

#: Flags that apply to some datasets only (`Dataset.options` says which).
DATASET_OPTIONS = ("pairs_per_epoch",)
#: Flags that are settings as they are, whatever the preset.
PLAIN_SETTINGS = (
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
)
#: The trainer's defaults for the flags above that no preset sets (the
#: command line's defaults are these).
FLAG_DEFAULTS = {
    "preset": "quick",
    "model": "capsnet",
    "dataset": "mnist",
    "data": "auto",
    "seed": 0,
    "jit_compile": "auto",
    "dtype_policy": "float32",
    "distribute": "none",
}
#: Flags whose value must be a positive integer.
POSITIVE_INT_FLAGS = (
    "epochs",
    "batch_size",
    "routing_iterations",
    "conv_filters",
    "primary_capsules",
    "pairs_per_epoch",
    "max_train_samples",
    "max_test_samples",
    "num_processes",
)


def positive_int(text):
    """The `type` of a positive-integer flag."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def trainer_settings(**flags):
    """The settings the trainer runs with, from its flags as keyword arguments.

    `trainer_settings(dataset="multi_mnist", epochs=1)` are the settings of
    `python -m capsules_keras.train --dataset multi_mnist --epochs 1`: for
    code that trains the trainer's way in its own process, with `start_run`
    and `train_run`, instead of starting the command line.

    Args:
        **flags: Flag names with `_` for `-` (`max_train_samples=100`);
            a flag not given takes its preset's value or its default.

    Returns:
        The settings dict of the run (see `resolve_settings`).

    Raises:
        ValueError: an unknown flag, a value of the wrong kind, or what
            `resolve_settings` refuses.
    """
    names = {"preset", *SETTINGS, *PLAIN_SETTINGS, *MODEL_OPTIONS, *DATASET_OPTIONS}
    unknown = sorted(set(flags) - names)
    if unknown:
        raise ValueError(
            f"Unknown trainer flags {unknown}; the flags are {sorted(names)}. "
            f"Received: {flags}"
        )
    for key in POSITIVE_INT_FLAGS:
        if flags.get(key) is not None:
            check_positive_int(key, flags[key])
    if flags.get("model", FLAG_DEFAULTS["model"]) not in MODELS:
        raise ValueError(
            f"Unknown model. Choose one of {sorted(MODELS)}. "
            f"Received: model={flags['model']!r}"
        )
    values = {**dict.fromkeys(names), **FLAG_DEFAULTS, **flags}
    return resolve_settings(argparse.Namespace(**values))


def resolve_settings(args):
    """Preset values overridden by any flag the user gave.

    Args:
        args: The parsed flags of `python -m capsules_keras.train` (an
            `argparse.Namespace`; None for a flag not given).

    Returns:
        The settings dict of the run (what `config.json` holds).

    Raises:
        ValueError: a flag that does not apply to the model or the dataset,
            or a value out of range.
    """
    settings = preset_settings(args.preset, args.dataset, args.model)
    for key in SETTINGS:
        value = getattr(args, key)
        if value is not None:
            settings[key] = value
    for key in PLAIN_SETTINGS:
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
    dataset = get_dataset(args.dataset)
    if not dataset.accepts_targets(choice.targets):
        raise ValueError(
            f"--model {args.model} recognises one object per image. "
            f"Received: --dataset {args.dataset}"
        )
    for key in DATASET_OPTIONS:
        value = getattr(args, key)
        if value is not None and key not in dataset.options:
            flag = "--" + key.replace("_", "-")
            takers = [name for name, d in DATASETS.items() if key in d.options]
            raise ValueError(
                f"{flag} applies to --dataset {', '.join(takers)} only. "
                f"Received: --dataset {args.dataset} {flag} {value}"
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
