"""Train a capsule network (or its CNN baseline): `python -m capsules_keras.train`.

Presets (`capsules_keras.training.PRESETS`):
    quick   minutes on a laptop CPU: 5,000 training images.
    paper   the paper's settings, meant for a GPU: every training image.

`--model` picks the network from `capsules_keras.training.MODELS` (CapsNet,
Efficient-CapsNet, matrix capsules with EM routing, the CNN baseline),
`--dataset` the data from `capsules_keras.data.DATASETS` (MNIST,
Fashion-MNIST, MultiMNIST's overlapping digits, a folder of your images);
`DATASET_PRESETS` and `MODEL_PRESETS` adjust the presets for them.
`--data path/to/folder` with one sub-folder of images per class trains on
those images (`--image-size 64` or `64x48` to resize them), holding out a
share of each class (`--validation-split`) as the test set.

Every field of `capsules_keras.training.TrainConfig` is a flag of the same
name (`max_train_samples`: `--max-train-samples`), with its help and its
choices; `--output-dir`, `--resume` and `--verbose` are this command's own.

Every run writes to a new folder under `--output-dir` (an earlier run is never
overwritten): `model.keras`, `history.csv`, `metrics.json`, `config.json` and
PNG figures. A killed run continues from its last finished epoch with
`--resume RUN_DIR`. This module is the command line only; the work is done
by `capsules_keras.training`.
"""

import argparse
import dataclasses
import sys
import typing

from capsules_keras.capacity import CapacityError
from capsules_keras.data import DATASETS
from capsules_keras.training import (
    DATASET_PRESETS,
    MODEL_PRESETS,
    MODELS,
    PRESETS,
    TrainConfig,
    parallel_setup,
    start_run,
    train_run,
    trainer_settings,
)
from capsules_keras.training.collapse import TrainingCollapsed
from capsules_keras.training.config import field_type
from capsules_keras.training.fit import load_data
from capsules_keras.training.report import summary
from capsules_keras.training.runs import resumed_config


def _shown(value, field):
    """A setting's value in the flags' help: 5,000, on, all, 0.0005."""
    if value is None:
        return field.metadata["unset"] or "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _defaults(field):
    """Where a flag not given gets its value, from `TrainConfig` and the presets.

    E.g. "default 5; paper: 50; multi_mnist quick: 4; efficient: quick 1,
    paper 100; em quick: 8": the value of each preset, dataset and model
    that sets it (`PRESETS`, `DATASET_PRESETS`, `MODEL_PRESETS`, `MODELS`).
    """
    name = field.name
    found = []
    if field.default is not None or field.metadata["unset"]:
        found.append(f"default {_shown(field.default, field)}")
    found += [
        f"{model}: {_shown(choice.options[name], field)}"
        for model, choice in MODELS.items()
        if choice.options.get(name) is not None
    ]
    found += [
        f"{preset}: {_shown(values[name], field)}"
        for preset, values in PRESETS.items()
        if name in values
    ]
    for presets in (DATASET_PRESETS, MODEL_PRESETS):
        for key, by_preset in presets.items():
            values = {p: v[name] for p, v in by_preset.items() if name in v}
            if len(values) == len(PRESETS) and len(set(values.values())) == 1:
                found.append(f"{key}: {_shown(values.popitem()[1], field)}")
            elif len(values) == 1:
                ((preset, value),) = values.items()
                found.append(f"{key} {preset}: {_shown(value, field)}")
            elif values:
                shown = (f"{p} {_shown(v, field)}" for p, v in values.items())
                found.append(f"{key}: {', '.join(shown)}")
    return "; ".join(found)


def _flag_kwargs(field):
    """`add_argument`'s keywords for a `TrainConfig` field.

    Every flag defaults to None, "not given": `trainer_settings` then takes
    the preset's value or the field's default.
    """
    help = field.metadata["help"]
    defaults = _defaults(field)
    text = f"{help} [{defaults}]" if defaults else help
    kwargs = {"help": text.replace("%", "%%")}
    kind = field_type(field)  # int | None -> int
    if kind is bool:
        return {**kwargs, "action": argparse.BooleanOptionalAction}
    if typing.get_origin(kind) is tuple:  # tuple[str, ...]: --class-names a b c
        return {**kwargs, "nargs": "+", "metavar": "NAME"}
    if field.metadata["choices"] is not None:
        kwargs["choices"] = field.metadata["choices"]
    return {**kwargs, "type": kind}


def build_parser():
    parser = argparse.ArgumentParser(
        prog="python -m capsules_keras.train",
        description="Train a capsule network or its CNN baseline (--model) on "
        f"a dataset (--dataset: {', '.join(d.title for d in DATASETS.values())}: "
        "--data path/to/folder, one sub-folder of images per class).",
    )
    for field in dataclasses.fields(TrainConfig):
        flag = "--" + field.name.replace("_", "-")
        parser.add_argument(flag, **_flag_kwargs(field))
    parser.add_argument(
        "--output-dir", default="runs", help="where run folders go (default runs)"
    )
    parser.add_argument("--resume", metavar="RUN_DIR", help="continue a killed run")
    parser.add_argument("--verbose", type=int, default=1, choices=(0, 1, 2))
    return parser


def config_of(args):
    """The `TrainConfig` of parsed flags: `trainer_settings` of those given."""
    fields = dataclasses.fields(TrainConfig)
    return trainer_settings(
        **{field.name: getattr(args, field.name) for field in fields}
    )


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.resume:
        run_dir = args.resume
        try:
            config = resumed_config(run_dir)
        except ValueError as error:
            raise SystemExit(f"--resume: {error}") from error
        print(f"Resuming {run_dir} from its last finished epoch")
    else:
        run_dir = None
        try:
            config = config_of(args)
        except (ValueError, ImportError) as error:  # ImportError: no Pillow
            raise SystemExit(f"error: {error}") from error
    try:
        setup = parallel_setup(config)
    except ValueError as error:
        raise SystemExit(f"error: {error}") from error
    try:
        # Before the run folder: data that cannot be read leaves none behind.
        data = load_data(config)
    except (ValueError, OSError, ImportError, RuntimeError) as error:
        raise SystemExit(f"error: {error}") from error
    if run_dir is None:
        run_dir = start_run(args.output_dir, config)
    try:
        metrics = train_run(
            config, run_dir, setup, log=print, verbose=args.verbose, data=data
        )
    except CapacityError as error:  # before the first step: nothing trained
        raise SystemExit(f"error: {error}") from error
    except TrainingCollapsed as error:  # the epochs so far are in the run folder
        raise SystemExit(f"error: {error} (run folder: {run_dir})") from error
    print(summary(metrics, run_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
