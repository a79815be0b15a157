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
    log(f"Data:      {dataset.title} from {data.origin}")
    log(f"Classes:   {describe_classes(dataset.class_names)}")
    log(
        f"Sizes:     {data.training_set} {dataset.training_noun}, "
        f"{len(data.x_test):,} {dataset.test_noun}"
    )
    settings = dataclasses.asdict(config)
    log(
        "Settings:  "
        + ", ".join(f"{k}={v}" for k, v in settings.items() if v is not None)
    )
    log(f"Run:       {run_dir}")
    with setup.scope():
        model, jit = _compiled_model(config, dataset, data, log)
        history = _fit(model, config, dataset, data, run_dir, verbose)
        metrics, scores = _scored(model, config, dataset, data, history, jit)
        _write_artifacts(run_dir, model, metrics, history, scores, dataset, data)
    return metrics


def _images_per_epoch(config, data):
    """MultiMNIST draws `pairs_per_epoch` pairs an epoch; the rest see each
    training image once."""
    return config.pairs_per_epoch or len(data.x_train)


def _compiled_model(config, dataset, data, log):
    """`--model`'s network, compiled with the run's schedule, and the
    `jit_compile` it was given; a capsule model's memory plan is checked."""
    choice = MODELS[config.model]
    images_per_epoch = _images_per_epoch(config, data)
    model = choice.build(data.x_test.shape[1:], dataset, config)
    schedule = keras.optimizers.schedules.ExponentialDecay(
        config.learning_rate,
        decay_steps=-(-images_per_epoch // config.batch_size),
        decay_rate=config.lr_decay,
        staircase=True,
    )
    auto = default_jit_compile(
        model=config.model, images=config.epochs * images_per_epoch
    )
    jit = {"auto": auto, "on": True, "off": False}[config.jit_compile]
    model.compile(
        optimizer=keras.optimizers.Adam(
            schedule, weight_decay=config.weight_decay or None
        ),
        jit_compile=jit,
        **choice.compile_kwargs(dataset),
    )
    log(f"Model:     {choice.title}, {model.count_params():,} parameters")
    if isinstance(model, CapsuleModel):  # the CNN baseline is not planned
        plan = plan_capacity(model, config.batch_size)
        log("Capacity:  " + plan.table().replace("\n", "\n" + " " * 11))
        budget = config.memory_budget_gb
        check_fits(plan, available_memory() if budget is None else budget * 2**30)
    return model, jit


def _fit(model, config, dataset, data, run_dir, verbose):
    """Fits the model for the run's epochs; returns its `history.csv`, read
    back (`read_history`): a resumed run's history holds every epoch."""
    choice = MODELS[config.model]
    train_data, fit_kwargs = training_data(
        dataset,
        data.x_train,
        data.y_train,
        config.batch_size,
        seed=config.seed,
        augment=config.augment,
        targets=choice.targets,
        pairs_per_epoch=config.pairs_per_epoch,
    )
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
            data.x_test[:COLLAPSE_IMAGES],
            dataset.num_classes,
            config.learning_rate,
            capsules=isinstance(model, CapsuleClassifier),
        ),
    ]
    validation_data = None
    if config.validate:
        targets = dataset.targets(data.y_test, choice.targets)
        validation_data = feed(ArrayBatches(data.x_test, targets, config.batch_size))
    model.fit(
        train_data,
        epochs=config.epochs,
        validation_data=validation_data,
        callbacks=callbacks,
        verbose=verbose,
        **fit_kwargs,
    )
    return read_history(history_path)


def _scored(model, config, dataset, data, history, jit):
    """The metrics `metrics.json` holds, and the test images' class scores."""
    evaluation_start = time.perf_counter()
    scores = test_scores(model, data.x_test, config.batch_size)
    results = dataset.score(scores, data.y_test)
    evaluation_seconds = time.perf_counter() - evaluation_start
    train_seconds = float(sum(history["epoch_seconds"]))
    images = _images_per_epoch(config, data) * len(history["loss"])
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
        "images_per_second": images / train_seconds,
        "evaluation_seconds": evaluation_seconds,
        "data_source": data.origin,
        # What a prediction needs besides the model: the classes' names in
        # label order (the model's outputs), and the images' shape.
        "dataset_title": dataset.title,
        "class_names": list(dataset.class_names),
        "image_shape": list(data.x_test.shape[1:]),
        "n_train": len(data.x_train),
        "n_train_available": data.available,
        "training_set": data.training_set,
        "n_test": len(data.x_test),
        "parameters": model.count_params(),
        "final_train_loss": history["loss"][-1],
    }
    return metrics, scores


def _write_artifacts(run_dir, model, metrics, history, scores, dataset, data):
    """`model.keras`, `metrics.json`, the figures and `report.md`."""
    model.save(os.path.join(run_dir, "model.keras"))
    with open(os.path.join(run_dir, "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=2)
    figures = report_figures(model, history, data.x_test, data.y_test, scores, dataset)
    for name, fig in figures.items():
        fig.savefig(os.path.join(run_dir, name), dpi=100)
    with open(os.path.join(run_dir, "report.md"), "w") as f:
        f.write(report(metrics, figures))


def run_dataset(config):
    """The dataset a `TrainConfig` trains on (`Dataset.for_run`): for
    `--dataset image_folder`, the folder `config.data` names."""
    return get_dataset(config.dataset).for_run(config)


@dataclasses.dataclass(frozen=True)
class RunData:
    """The arrays a run trains and scores on, and where they came from.

    Attributes:
        x_train, y_train: What the model is fitted on (for MultiMNIST, the
            single digits the pairs are drawn from).
        x_test, y_test: The dataset's test set (`Dataset.test_set`): for
            MultiMNIST its fixed test pairs, for an image folder its
            held-out images, all of them uint8 (`ImageFolder.load`).
        origin: Where the arrays were read, in words.
        available: The source's training images before any subset.
        training_set: `describe_training_set` of the above.
    """

    x_train: object
    y_train: object
    x_test: object
    y_test: object
    origin: str
    available: int
    training_set: str


def load_data(config, dataset=None):
    """The `RunData` a `TrainConfig` asks for.

    Args:
        config: The run's `TrainConfig`: its data, dataset, seed and the
            training and test sets' caps.
        dataset: `run_dataset(config)`, if at hand.
    """
    dataset = run_dataset(config) if dataset is None else dataset
    (x_train, y_train), (x_test, y_test), origin = dataset.load_from(config.data)
    available = len(x_train)
    limit = config.max_train_samples
    if limit and limit < available:
        keep = balanced_subset(y_train, limit, seed=config.seed)
        x_train, y_train = x_train[keep], y_train[keep]
    x_test, y_test = dataset.test_set(x_test, y_test, config.max_test_samples)
    training_set = describe_training_set(len(x_train), available, config.seed)
    return RunData(x_train, y_train, x_test, y_test, origin, available, training_set)


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
