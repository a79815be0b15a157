"""Training runs as a library: presets, models, settings, run folders, fit, report.

`python -m capsules_keras.train` and `python -m capsules_keras.evaluate` are
thin command lines over it; notebooks and benchmarks import it to train the
way the trainer does. One module per job:

    presets    PRESETS, DATASET_PRESETS, MODEL_PRESETS
    registry   MODELS: one builder per `--model`; default_jit_compile
    settings   resolve_settings: a preset overridden by the flags, checked;
               trainer_settings: the same from keyword arguments
    runs       run folders, config.json, history.csv, resume, the latest run
    devices    one device or data-parallel
    fit        train_run: data, fit, scores, artifacts
    report     the figures, report.md and the printed summary
"""

from capsules_keras.training.devices import describe_devices, parallel_setup
from capsules_keras.training.fit import (
    describe_training_set,
    load_data,
    test_scores,
    train_run,
    training_data,
)
from capsules_keras.training.presets import (
    DATASET_PRESETS,
    MODEL_PRESETS,
    PRESETS,
    SETTINGS,
    preset_settings,
)
from capsules_keras.training.registry import (
    JIT_COMPILE_DEFAULTS,
    MODEL_OPTIONS,
    MODELS,
    ModelChoice,
    default_jit_compile,
)
from capsules_keras.training.report import report, report_figures, summary, title
from capsules_keras.training.runs import (
    SAVED_BEFORE,
    EpochLog,
    latest_run,
    new_run_dir,
    read_history,
    resumed_settings,
    run_name,
    saved_run,
    start_run,
)
from capsules_keras.training.settings import (
    FLAG_DEFAULTS,
    positive_int,
    resolve_settings,
    trainer_settings,
)

__all__ = [
    "DATASET_PRESETS",
    "FLAG_DEFAULTS",
    "JIT_COMPILE_DEFAULTS",
    "MODELS",
    "MODEL_OPTIONS",
    "MODEL_PRESETS",
    "PRESETS",
    "SAVED_BEFORE",
    "SETTINGS",
    "EpochLog",
    "ModelChoice",
    "default_jit_compile",
    "describe_devices",
    "describe_training_set",
    "latest_run",
    "load_data",
    "new_run_dir",
    "parallel_setup",
    "positive_int",
    "preset_settings",
    "read_history",
    "report",
    "report_figures",
    "resolve_settings",
    "resumed_settings",
    "run_name",
    "saved_run",
    "start_run",
    "summary",
    "test_scores",
    "title",
    "train_run",
    "trainer_settings",
    "training_data",
]
