"""A run's settings: its preset's values, overridden by the flags given, checked."""

import argparse

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


def positive_int(text):
    """The `type` of a positive-integer flag."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


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
