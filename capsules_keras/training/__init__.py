"""Training runs as a library: settings, presets, models, run folders, fit, report.

`python -m capsules_keras.train` and `python -m capsules_keras.evaluate` are
thin command lines over it; notebooks and benchmarks import it to train the
way the trainer does. One module per job:

    config     TrainConfig: every setting once, with its default and why;
               trainer_settings: a preset overridden by the flags given
    presets    PRESETS, DATASET_PRESETS, MODEL_PRESETS: partial TrainConfigs
    registry   MODELS: one builder per `--model`; default_jit_compile
    runs       run folders, config.json, history.csv, resume, the latest run
    devices    one device or data-parallel
    precision  the dtype policy: what `--dtype-policy auto` picks, and why
    collapse   CollapseGuard: stops a run whose capsules saturate or stall
    fit        train_run: data (load_data, RunData), fit, scores, artifacts
    report     the figures, report.md and the printed summary

The names below are what notebooks, scripts and the command lines call;
the rest is in the module that defines it.
"""

from capsules_keras.training.config import TrainConfig, config_flag, trainer_settings
from capsules_keras.training.devices import describe_devices, parallel_setup
from capsules_keras.training.fit import (
    RunData,
    load_data,
    seed_run,
    test_scores,
    train_run,
    training_data,
)
from capsules_keras.training.presets import DATASET_PRESETS, MODEL_PRESETS, PRESETS
from capsules_keras.training.registry import MODELS, default_jit_compile
from capsules_keras.training.runs import latest_run, new_run_dir, saved_run, start_run

__all__ = [
    "DATASET_PRESETS",
    "MODELS",
    "MODEL_PRESETS",
    "PRESETS",
    "RunData",
    "TrainConfig",
    "config_flag",
    "default_jit_compile",
    "describe_devices",
    "latest_run",
    "load_data",
    "new_run_dir",
    "parallel_setup",
    "saved_run",
    "seed_run",
    "start_run",
    "test_scores",
    "train_run",
    "trainer_settings",
    "training_data",
]
