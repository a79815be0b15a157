"""A training run: from its settings to the trained, scored model and its artifacts.

`train_run` loads the data (`load_data`, from the run's dataset:
`run_dataset`), builds the network of `--model`
(`MODELS`), fits it on the dataset's batches (`training_data`), scores it on
the dataset's test set (`test_scores`, `Dataset.score`) and writes
`model.keras`, `metrics.json`, the figures and `report.md` into the run
folder. Progress goes to a `log` callable; nothing is printed here.
"""

import dataclasses
import json
import os
import time

import keras

from capsules_keras._startup import information_held
from capsules_keras.capacity import available_memory, check_fits, plan_capacity
from capsules_keras.data import ArrayBatches, balanced_subset, feed, get_dataset
from capsules_keras.models import CapsuleClassifier, CapsuleModel
from capsules_keras.training.collapse import CollapseGuard
from capsules_keras.training.devices import describe_devices
from capsules_keras.training.precision import choose_dtype_policy
from capsules_keras.training.registry import MODELS, default_jit_compile
from capsules_keras.training.report import (
    describe_classes,
    report,
    report_figures,
)
from capsules_keras.training.runs import EpochLog, read_history

#: Images on which `CollapseGuard` reads the class-capsule lengths.
COLLAPSE_IMAGES = 64


def train_run(config, run_dir, setup, log, verbose=1, data=None):
    """Trains, evaluates and writes every artifact into `run_dir`.

    Args:
        config: The run's `TrainConfig` (e.g. from `trainer_settings`).
        run_dir: Folder for the artifacts (`start_run`).
        setup: From `parallel_setup(config)`.
        log: Where progress lines go, e.g. `print`.
        verbose: `fit`'s progress output: 0 silent, 1 a bar, 2 a line an epoch.
        data: What `load_data(config)` returned, if read already (the
            trainer reads it before it makes the run folder); None: read here.

    Returns:
        The metrics dict written to `metrics.json`: the config's fields,
        then what the run measured.
    """
    dtype_policy, why = choose_dtype_policy(config.dtype_policy)
    # Keras' global policy: set for this run, restored after it, so that a
    # notebook's next model is built in the policy it had.
    previous_policy = keras.config.dtype_policy()
    keras.config.set_dtype_policy(dtype_policy)
    try:
        return _train(
            config, run_dir, setup, log, verbose, data, f"{dtype_policy} ({why})"
        )
    finally:
        keras.config.set_dtype_policy(previous_policy)


def seed_run(seed):
    """`keras.utils.set_random_seed(seed)`, quietly: seeding imports
    tensorflow where it is installed, on every backend, and its start-up
    information is held back as at `import capsules_keras` (`_startup`)."""
    with information_held():
        keras.utils.set_random_seed(seed)


def _train(config, run_dir, setup, log, verbose, data, precision):
    seed_run(config.seed)
    dataset = run_dataset(config)
    if data is None:
        data = load_data(config, dataset)
    x_train, y_train, x_test, y_test, origin, available = data
    training_set = describe_training_set(len(x_train), available, config.seed)
    batch_size = config.batch_size
    log(f"Backend:   {keras.backend.backend()} (Keras {keras.__version__})")
    log(f"Devices:   {describe_devices()}")
    log(f"Parallel:  {setup.description}")
    log(
        f"Batch:     {batch_size} global = {batch_size // setup.num_replicas} per "
        f"replica x {setup.num_replicas}; learning rate {config.learning_rate} "
        "(not rescaled: one step equals a single-device step on the global batch)"
    )
    log(f"Precision: {precision}")
    log(f"Data:      {dataset.title} from {origin}")
    log(f"Classes:   {describe_classes(dataset.class_names)}")
    log(
        f"Sizes:     {training_set} {dataset.training_noun}, "
        f"{len(x_test):,} {dataset.test_noun}"
    )
    settings = dataclasses.asdict(config)
    log(
        "Settings:  "
        + ", ".join(f"{k}={v}" for k, v in settings.items() if v is not None)
    )
    log(f"Run:       {run_dir}")
    with setup.scope():
        metrics = _fit_and_report(
            config,
            dataset,
            run_dir,
            (x_train, y_train, x_test, y_test),
            {"origin": origin, "available": available, "training_set": training_set},
            log,
            verbose,
        )
    return metrics


def _fit_and_report(config, dataset, run_dir, arrays, source, log, verbose):
    x_train, y_train, x_test, y_test = arrays
    choice = MODELS[config.model]
    batch_size = config.batch_size
    train_data, fit_kwargs = training_data(
        dataset,
        x_train,
        y_train,
        batch_size,
        seed=config.seed,
        augment=config.augment,
        targets=choice.targets,
        pairs_per_epoch=config.pairs_per_epoch,
    )
    images_per_epoch = config.pairs_per_epoch or len(x_train)
    steps_per_epoch = -(-images_per_epoch // batch_size)
    model = choice.build(x_test.shape[1:], dataset, config)
    schedule = keras.optimizers.schedules.ExponentialDecay(
        config.learning_rate,
        decay_steps=steps_per_epoch,
        decay_rate=config.lr_decay,
        staircase=True,
    )
    auto = default_jit_compile(
        model=config.model, images=config.epochs * images_per_epoch
    )
    jit = {"auto": auto, "on": True, "off": False}[config.jit_compile]
    model.compile(
        optimizer=keras.optimizers.Adam(schedule),
        jit_compile=jit,
        **choice.compile_kwargs(dataset),
    )
    log(f"Model:     {choice.title}, {model.count_params():,} parameters")
    if isinstance(model, CapsuleModel):  # the CNN baseline is not planned
        plan = plan_capacity(model, batch_size)
        log("Capacity:  " + plan.table().replace("\n", "\n" + " " * 11))
        budget = config.memory_budget_gb
        check_fits(plan, available_memory() if budget is None else budget * 2**30)

    history_path = os.path.join(run_dir, "history.csv")
    callbacks = [
        # The log goes first: see EpochLog.on_epoch_end.
        EpochLog(history_path),
        # Two backups: a run killed while it writes one (its file truncated)
        # resumes from the one before.
        keras.callbacks.BackupAndRestore(
            os.path.join(run_dir, "backup"), double_checkpoint=True
        ),
        *(make() for make in choice.callbacks),
        # Read on held-out images: their shape is the model's for every
        # dataset (MultiMNIST trains on single digits it pairs itself).
        CollapseGuard(
            x_test[:COLLAPSE_IMAGES],
            dataset.num_classes,
            config.learning_rate,
            capsules=isinstance(model, CapsuleClassifier),
        ),
    ]
    validation_data = None
    if config.validate:
        validation_targets = dataset.targets(y_test, choice.targets)
        validation_data = feed(ArrayBatches(x_test, validation_targets, batch_size))
    model.fit(
        train_data,
        epochs=config.epochs,
        validation_data=validation_data,
        callbacks=callbacks,
        verbose=verbose,
        **fit_kwargs,
    )
    history = read_history(history_path)
    train_seconds = float(sum(history["epoch_seconds"]))

    evaluation_start = time.perf_counter()
    scores = test_scores(model, x_test, batch_size)
    results = dataset.score(scores, y_test)
    evaluation_seconds = time.perf_counter() - evaluation_start
    model.save(os.path.join(run_dir, "model.keras"))

    metrics = {
        **results,
        **dataclasses.asdict(config),  # the settings, as config.json holds them
        # What the run did and measured; `epochs`, `jit_compile` and
        # `dtype_policy` replace the settings' with the epochs trained and
        # what `auto` chose.
        "epochs": len(history["loss"]),
        "jit_compile": jit,
        "dtype_policy": keras.config.dtype_policy().name,
        "backend": keras.backend.backend(),
        "devices": describe_devices(),
        "keras_version": keras.__version__,
        "train_seconds": train_seconds,
        "images_per_second": images_per_epoch * len(history["loss"]) / train_seconds,
        "evaluation_seconds": evaluation_seconds,
        "data_source": source["origin"],
        # What a prediction needs besides the model: the classes' names in
        # label order (the model's outputs), and the images' shape.
        "dataset_title": dataset.title,
        "class_names": list(dataset.class_names),
        "image_shape": list(x_test.shape[1:]),
        "n_train": len(x_train),
        "n_train_available": source["available"],
        "training_set": source["training_set"],
        "n_test": len(x_test),
        "parameters": model.count_params(),
        "final_train_loss": history["loss"][-1],
    }
    with open(os.path.join(run_dir, "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=2)

    figures = report_figures(model, history, x_test, y_test, scores, dataset)
    for name, fig in figures.items():
        fig.savefig(os.path.join(run_dir, name), dpi=100)
    with open(os.path.join(run_dir, "report.md"), "w") as f:
        f.write(report(metrics, figures))
    return metrics


def run_dataset(config):
    """The dataset a `TrainConfig` trains on (`Dataset.for_run`): for
    `--dataset image_folder`, the folder `config.data` names."""
    return get_dataset(config.dataset).for_run(config)


def load_data(config, dataset=None):
    """The training and test arrays a `TrainConfig` asks for.

    Args:
        config: The run's `TrainConfig`.
        dataset: `run_dataset(config)`, if at hand.

    Returns:
        `(x_train, y_train, x_test, y_test, origin, available)`: `available`
        is the size of the source's training set before any subset. The
        test arrays are the dataset's test set (`Dataset.test_set`): for
        MultiMNIST, its fixed test pairs, and the training arrays the
        single digits the pairs are drawn from; for an image folder, its
        held-out images, all of them uint8 (`ImageFolder.load`).
    """
    dataset = run_dataset(config) if dataset is None else dataset
    (x_train, y_train), (x_test, y_test), origin = dataset.load_from(config.data)
    available = len(x_train)
    limit = config.max_train_samples
    if limit and limit < available:
        keep = balanced_subset(y_train, limit, seed=config.seed)
        x_train, y_train = x_train[keep], y_train[keep]
    x_test, y_test = dataset.test_set(x_test, y_test, config.max_test_samples)
    return x_train, y_train, x_test, y_test, origin, available


def describe_training_set(n_train, available, seed):
    """E.g. "5,000 of 60,000 (class-balanced subset, seed 0)"."""
    if n_train == available:
        return f"{n_train:,} (all)"
    return f"{n_train:,} of {available:,} (class-balanced subset, seed {seed})"


def training_data(
    dataset, x, y, batch_size, seed=0, augment=False, targets=None, pairs_per_epoch=None
):
    """What `fit` trains on: `(data, fit_kwargs)`.

    The dataset's batches (`Dataset.training_batches`, with these arguments)
    as `feed` serves them; where the dataset has no batches of its own,
    `x` and `y` in Keras' shuffled batches.
    """
    batches = dataset.training_batches(
        x,
        y,
        batch_size,
        seed=seed,
        augment=augment,
        targets=targets,
        pairs_per_epoch=pairs_per_epoch,
    )
    if batches is None:
        if keras.backend.backend() != "tensorflow":
            # Keras reads arrays without a tuning thread on these backends
            # (see `feed`), so they keep Keras' own shuffles and with them
            # the results measured before.
            return x, {"y": y, "batch_size": batch_size, "shuffle": True}
        batches = ArrayBatches(x, y, batch_size, shuffle=True, seed=seed)
    data = feed(batches)
    # A tf.data pipeline serves the batches in their own seeded order, which
    # `fit` cannot reshuffle (it would warn that it ignores `shuffle=True`).
    return data, {} if data is batches else {"shuffle": False}


def test_scores(model, x_test, batch_size):
    """The model's class scores `(n, classes)` for the test images, via `feed`."""
    return model.predict(feed(ArrayBatches(x_test, batch_size=batch_size)), verbose=0)
