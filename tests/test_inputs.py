"""Images and labels as users hold them: converted where the meaning is clear,
refused with a ValueError where training would go silently wrong; uint8
batches alike from arrays, datasets and generators."""

import keras
import numpy as np
import pytest
from conftest import NARROW

from capsules_keras.inputs import prepare_images, prepare_labels
from capsules_keras.models import CapsNet, baseline_cnn


@pytest.fixture(scope="module")
def keras_layout(mnist_path):
    """24 digits exactly as `keras.datasets.mnist.load_data()` returns them."""
    with np.load(mnist_path) as data:
        return data["x_train"][:24], data["y_train"][:24]  # uint8 (n, 28, 28)


@pytest.fixture(scope="module")
def model():
    return CapsNet(**NARROW)


def test_uint8_images_without_channel_axis_are_converted(keras_layout):
    x, _ = keras_layout
    assert x.dtype == np.uint8 and x.shape == (24, 28, 28)
    images = prepare_images(x, (28, 28, 1))
    assert images.dtype == np.float32 and images.shape == (24, 28, 28, 1)
    np.testing.assert_allclose(images[..., 0] * 255, x, atol=1e-4)
    np.testing.assert_array_equal(prepare_images(images, (28, 28, 1)), images)
    as_bool = prepare_images(x > 127, (28, 28, 1))
    assert set(np.unique(as_bool)) == {0.0, 1.0}


def test_tensors_are_checked_like_arrays(keras_layout):
    x, y = keras_layout
    tensor = keras.ops.convert_to_tensor(x.astype("float32") / 255)
    images = prepare_images(tensor, (28, 28, 1))
    assert isinstance(images, np.ndarray) and images.shape == (24, 28, 28, 1)
    labels = prepare_labels(keras.ops.convert_to_tensor(y), 10)
    np.testing.assert_array_equal(labels, y)
    with pytest.raises(ValueError, match="values from 0.0 to 255.0"):
        prepare_images(keras.ops.convert_to_tensor(x.astype("float32")), (28, 28, 1))


@pytest.mark.parametrize(
    "images, message",
    [
        (np.full((2, 28, 28), 255.0), r"\[0, 1\].*values from 255.0 to 255.0"),
        (np.full((2, 28, 28, 1), np.nan), r"\[0, 1\]"),
        (np.full((2, 28, 28), -1, "int16"), r"0\.\.255.*values from -1 to -1"),
        (np.full((2, 28, 28), 256, "int32"), r"0\.\.255.*values from 256 to 256"),
        (np.zeros((2, 28, 28, 3)), r"\(n, 28, 28, 1\).*x.shape=\(2, 28, 28, 3\)"),
        (np.zeros((2, 32, 32)), r"x.shape=\(2, 32, 32\)"),
        (np.zeros((28, 28)), r"x.shape=\(28, 28\)"),
        (np.array([["a"] * 28] * 28)[None], "dtype"),
    ],
)
def test_bad_images_name_what_was_received(images, message):
    with pytest.raises(ValueError, match=message):
        prepare_images(images, (28, 28, 1))


def test_channel_axis_is_added_for_one_channel_only():
    assert prepare_images(np.zeros((1, 8, 8, 3)), (8, 8, 3)).shape == (1, 8, 8, 3)
    with pytest.raises(ValueError, match=r"\(n, 8, 8, 3\)\. Received"):
        prepare_images(np.zeros((1, 8, 8)), (8, 8, 3))


def test_labels_in_every_accepted_form():
    np.testing.assert_array_equal(
        prepare_labels(np.array([[2], [0]], "uint8"), 10), [2, 0]
    )
    np.testing.assert_array_equal(prepare_labels([3.0, 9.0], 10), [3, 9])
    assert prepare_labels(np.array([1, 2], "int64"), 10).dtype == np.int32
    one_hot = np.eye(10)[[4, 7]]
    np.testing.assert_array_equal(prepare_labels(one_hot, 10), one_hot)
    two_hot = one_hot + np.eye(10)[[1, 2]]  # several classes present
    np.testing.assert_array_equal(prepare_labels(two_hot, 10), two_hot)


@pytest.mark.parametrize(
    "labels, message",
    [
        (np.arange(1, 11), r"0\.\.9\. They look 1-based: subtract 1\. .*1 to 10"),
        (np.array([0, 12]), r"0\.\.9\. Received: labels from 0 to 12"),
        (np.array([-1, 3]), r"Received: labels from -1 to 3"),
        (np.array([0.5, 1.0]), "whole class indices.*float64 with fractions"),
        (np.array([True, False]), "whole class indices.*bool"),
        (np.eye(5)[[0, 1]], r"one-hot rows of shape \(n, 10\).*y.shape=\(2, 5\)"),
        (np.zeros((2, 10)), "all-zero rows, the first at index 0"),
        (2 * np.eye(10)[[0, 1]], r"\[0, 1\]. Received: values from 0.0 to 2.0"),
        (np.zeros((2, 3, 4)), r"y.shape=\(2, 3, 4\)"),
    ],
)
def test_bad_labels_name_what_was_received(labels, message):
    with pytest.raises(ValueError, match=message):
        prepare_labels(labels, 10)


def test_label_count_must_match_the_images():
    with pytest.raises(ValueError, match=r"one label per image \(3\).*\(2,\)"):
        prepare_labels([0, 1], 10, num_images=3)


def test_capsnet_takes_keras_datasets_arrays_as_they_come(model, keras_layout):
    x, y = keras_layout
    x_float = x[..., None].astype("float32") / 255.0
    model.compile(optimizer="adam")
    as_given = model.evaluate(x, y, batch_size=24, verbose=0, return_dict=True)
    prepared = model.evaluate(x_float, y, batch_size=24, verbose=0, return_dict=True)
    assert as_given["loss"] == pytest.approx(prepared["loss"], rel=1e-5)
    np.testing.assert_allclose(
        model.predict(x, verbose=0), model.predict(x_float, verbose=0), atol=1e-6
    )
    np.testing.assert_allclose(
        model.analyze(x[:4], y[:4])["reconstructions"],
        model.analyze(x_float[:4], y[:4])["reconstructions"],
        atol=1e-6,
    )
    # On [0, 1] images the weighted reconstruction term is well below 1; on
    # 0..255 ones it was in the thousands.
    history = model.fit(
        x, y, batch_size=12, epochs=1, verbose=0, validation_data=(x[:12], y[:12])
    )
    assert history.history["loss"][0] < 5
    assert history.history["val_loss"][0] < 5


@pytest.mark.parametrize(
    "method", ["fit", "evaluate", "predict", "validation_data", "analyze"]
)
def test_capsnet_refuses_inputs_that_train_silently_wrong(model, keras_layout, method):
    x, y = keras_layout
    model.compile(optimizer="adam")
    bad_images = x[..., None].astype("float32")  # 0..255 floats
    bad_labels = y.astype("int32") + 1  # 1-based: 10 would be an all-zero row
    bad_labels[0] = 10
    calls = {
        "fit": lambda: model.fit(bad_images, y, verbose=0),
        "evaluate": lambda: model.evaluate(x, bad_labels, verbose=0),
        "predict": lambda: model.predict(bad_images, verbose=0),
        "validation_data": lambda: model.fit(
            x, y, epochs=1, verbose=0, validation_data=(x, bad_labels)
        ),
        "analyze": lambda: model.analyze(x, bad_labels),
    }
    with pytest.raises(ValueError, match="Received: "):
        calls[method]()


def test_datasets_pass_through_unchecked(model, keras_layout):
    x, y = keras_layout
    batches = keras.utils.PyDataset()  # an object fit() cannot look into
    assert model.prepare(batches, None) == (batches, None)
    images, labels = model.prepare(x, y)
    assert images.shape == (24, 28, 28, 1) and labels.dtype == np.int32


def _capsnet():
    model = CapsNet(**NARROW)
    model.compile()
    return model


def _cnn():
    model = baseline_cnn(dense_units=16, dropout_rate=0.0)
    model.compile(loss="sparse_categorical_crossentropy")
    return model


@pytest.mark.parametrize("make_model", [_capsnet, _cnn], ids=["capsnet", "cnn"])
def test_uint8_batches_count_alike_from_arrays_datasets_and_generators(
    keras_layout, make_model
):
    """uint8 digits without a channel axis, as `keras.datasets` and image
    folders give them: the same loss and predictions as the digits in [0, 1]
    fed as arrays, a `tf.data.Dataset`, a `keras.utils.PyDataset` or a
    generator (the models, the CNN baseline too, scale every batch; the
    residual CNN shares the baseline's `ScaledImagesModel.call`)."""
    import tensorflow as tf

    x, y = keras_layout  # uint8 (24, 28, 28)
    model = make_model()
    halves = [(x[:12], y[:12]), (x[12:], y[12:])]

    class Batches(keras.utils.PyDataset):
        def __init__(self):
            super().__init__()

        def __len__(self):
            return len(halves)

        def __getitem__(self, index):
            return halves[index]

    fed = {
        "tf.data": lambda: tf.data.Dataset.from_tensor_slices((x, y)).batch(12),
        "PyDataset": Batches,
        "generator": lambda: (batch for batch in halves),
    }
    arrays = model.evaluate(x, y, batch_size=12, verbose=0, return_dict=True)
    predicted = model.predict(x, batch_size=12, verbose=0)
    scaled = x[..., None].astype("float32") / 255  # what the layers must see
    np.testing.assert_allclose(model.predict(scaled, verbose=0), predicted, atol=1e-6)
    for name, make in fed.items():
        steps = None if name != "generator" else 2
        result = model.evaluate(make(), steps=steps, verbose=0, return_dict=True)
        assert result["loss"] == pytest.approx(arrays["loss"], rel=1e-5), name
        images = (
            tf.data.Dataset.from_tensor_slices(x).batch(12)
            if name == "tf.data"
            else ((images,) for images in (x[:12], x[12:]))
        )
        np.testing.assert_allclose(
            model.predict(images, steps=2, verbose=0), predicted, atol=1e-6
        )
