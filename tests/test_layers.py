"""Keras-style checks of every layer, on the current backend."""

import keras
import numpy as np
import numpy_reference as ref
import pytest
from conftest import gradient
from keras import layers, ops
from layer_checks import capsule_classifier, check_fit_reduces_loss, check_layer

from capsules_keras import DigitCaps, Length, Mask, PrimaryCaps, Squash

RNG = np.random.default_rng(0)


def random(*shape):
    return RNG.standard_normal(shape).astype("float32")


def labels(n, num_classes):
    return (np.arange(n) % num_classes).astype("int32")


# --- Squash -----------------------------------------------------------------


def test_squash_layer(tmp_path):
    x = random(3, 5, 4)
    check_layer(lambda: Squash(), [x], (3, 5, 4), 0, tmp_path)
    np.testing.assert_allclose(
        ops.convert_to_numpy(Squash()(x)), ref.squash(x), rtol=1e-5, atol=1e-6
    )


def test_squash_layer_trains_through():
    x, y = random(8, 12), labels(8, 3)
    model = capsule_classifier(
        [layers.Dense(12), layers.Reshape((3, 4)), Squash()], 3, (12,)
    )
    check_fit_reduces_loss(model, x, y)


# --- PrimaryCaps --------------------------------------------------------------


def test_primary_caps_paper_shape():
    """A 28x28 digit through Conv2D(256, 9) gives 6*6*32 = 1152 capsules."""
    images = keras.Input(shape=(28, 28, 1))
    features = layers.Conv2D(256, 9, activation="relu")(images)
    capsules = PrimaryCaps(32, 8, kernel_size=9, strides=2)(features)
    assert tuple(capsules.shape) == (None, 1152, 8)


def test_primary_caps_layer(tmp_path):
    x = random(2, 9, 9, 3)
    check_layer(
        lambda: PrimaryCaps(4, 5, kernel_size=3, strides=2),
        [x],
        (2, 4 * 4 * 4, 5),
        2,  # conv kernel and bias
        tmp_path,
    )


def test_primary_caps_capsule_order_and_squash():
    """Capsule i is type i % num_capsules at grid cell i // num_capsules."""
    layer = PrimaryCaps(3, 2, kernel_size=1, strides=1)
    x = random(1, 2, 2, 4)
    out = ops.convert_to_numpy(layer(x))
    conv = ops.convert_to_numpy(layer.conv(x))  # (1, 2, 2, 3 * 2)
    expected = ref.squash(conv.reshape(1, 2 * 2 * 3, 2))
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
    cell, kind = 3, 1  # row 1, col 1, type 1
    np.testing.assert_allclose(
        out[0, cell * 3 + kind], ref.squash(conv[0, 1, 1, 2:4]), rtol=1e-5
    )


@pytest.mark.parametrize("padding", ["valid", "same"])
@pytest.mark.parametrize("as_matmul", [False, True])
def test_primary_caps_as_patches_and_a_matmul_is_the_convolution(as_matmul, padding):
    # jax on CPU convolves with patches and one matmul (PrimaryCaps.build);
    # both paths, forced, on every backend, against keras' own convolution.
    layer = PrimaryCaps(4, 3, kernel_size=9, strides=2, padding=padding)
    x = random(2, 20, 20, 5)
    layer.build(x.shape)
    layer.conv.bias.assign(random(12))
    layer._conv_as_matmul = as_matmul
    np.testing.assert_allclose(
        ops.convert_to_numpy(layer._convolve(x)),
        ops.convert_to_numpy(layer.conv(x)),
        rtol=1e-5,
        atol=1e-5,
    )
    np.testing.assert_allclose(
        gradient(layer._convolve, x), gradient(layer.conv, x), rtol=1e-4, atol=1e-5
    )


def test_primary_caps_trains():
    x, y = random(8, 6, 6, 2), labels(8, 4)
    model = capsule_classifier(
        [PrimaryCaps(4, 3, kernel_size=3, strides=3), layers.Reshape((4, 12))],
        4,
        (6, 6, 2),
    )
    check_fit_reduces_loss(model, x, y)


# --- DigitCaps ----------------------------------------------------------------


def test_digit_caps_seed_example():
    """The seed's minimal setup."""
    v = DigitCaps(10, 16, routing_iterations=3)(random(32, 100, 8))
    assert tuple(v.shape) == (32, 10, 16)


def test_digit_caps_layer(tmp_path):
    x = random(3, 7, 3)
    check_layer(lambda: DigitCaps(4, 5), [x], (3, 4, 5), 1, tmp_path)
    layer = DigitCaps(4, 5)
    layer(x)
    assert layer.kernel.path.endswith("kernel")
    assert tuple(layer.kernel.shape) == (7, 4, 3, 5)


@pytest.mark.parametrize("iterations", [1, 2, 3])
def test_digit_caps_matches_reference(iterations):
    """7 children x 3 dims -> 4 parents x 5 dims, against the NumPy reference."""
    layer = DigitCaps(
        4,
        5,
        routing_iterations=iterations,
        kernel_initializer=keras.initializers.RandomNormal(stddev=0.3),
        return_coupling=True,
    )
    u = random(3, 7, 3)
    v, c = layer(u)
    kernel = ops.convert_to_numpy(layer.kernel).astype("float64")
    v_ref, c_ref = ref.routing(ref.votes(kernel, u.astype("float64")), iterations)
    np.testing.assert_allclose(ops.convert_to_numpy(v), v_ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ops.convert_to_numpy(c), c_ref, rtol=1e-5, atol=1e-5)


def test_digit_caps_default_compiled_step_matches_eager_and_reference():
    """The backend's default compiled functions (tensorflow: a graph with the
    routing XLA-compiled inside it, see `ops.compile_routing`; jax: jit) give
    the reference's capsules and the same training step as eager execution."""
    u, target = random(6, 7, 3), random(6, 4, 5)
    models = []
    for run_eagerly in (False, True):
        keras.utils.set_random_seed(1)
        inputs = keras.Input((7, 3))
        layer = DigitCaps(
            4, 5, kernel_initializer=keras.initializers.RandomNormal(stddev=0.3)
        )
        model = keras.Model(inputs, layer(inputs))
        model.compile(optimizer=keras.optimizers.SGD(0.5), loss="mse")
        model.run_eagerly = run_eagerly
        models.append(model)
    compiled, eager = models
    kernel = ops.convert_to_numpy(compiled.layers[-1].kernel).astype("float64")
    v_ref, _ = ref.routing(ref.votes(kernel, u.astype("float64")), 3)
    predicted = compiled.predict(u, batch_size=3, verbose=0)
    np.testing.assert_allclose(predicted, v_ref, rtol=1e-5, atol=1e-5)
    for model in models:
        model.train_on_batch(u, target)
    after = [ops.convert_to_numpy(m.layers[-1].kernel) for m in models]
    assert not np.allclose(after[0], kernel, atol=1e-4)  # the step moved it
    np.testing.assert_allclose(after[0], after[1], rtol=1e-5, atol=1e-6)


def test_digit_caps_return_coupling_shapes(tmp_path):
    layer = DigitCaps(4, 5, return_coupling=True)
    v, c = layer(random(2, 7, 3))
    assert tuple(v.shape) == (2, 4, 5) and tuple(c.shape) == (2, 7, 4)
    np.testing.assert_allclose(ops.convert_to_numpy(c).sum(-1), 1.0, atol=1e-6)
    inputs = keras.Input((7, 3))
    sym_v, sym_c = DigitCaps(4, 5, return_coupling=True)(inputs)
    assert tuple(sym_v.shape) == (None, 4, 5) and tuple(sym_c.shape) == (None, 7, 4)


@pytest.mark.parametrize("batch_size", [1, 5])
def test_digit_caps_any_batch_size_and_ragged_last_batch(batch_size):
    inputs = keras.Input((7, 3))
    model = keras.Model(inputs, DigitCaps(4, 5)(inputs))
    x = random(batch_size, 7, 3)
    # batch_size=2 leaves a ragged last batch of 1 for batch_size=5.
    predicted = model.predict(x, batch_size=2, verbose=0)
    assert predicted.shape == (batch_size, 4, 5)
    np.testing.assert_allclose(
        predicted, ops.convert_to_numpy(model(x)), rtol=1e-5, atol=1e-6
    )


def test_digit_caps_trains():
    x, y = random(8, 7, 3), labels(8, 4)
    model = capsule_classifier([Squash(), DigitCaps(4, 5)], 4, (7, 3))
    check_fit_reduces_loss(model, x, y)


def test_digit_caps_default_initializer_is_small():
    layer = DigitCaps(10, 16)
    layer.build((None, 1152, 8))
    kernel = ops.convert_to_numpy(layer.kernel)
    assert 0.04 < kernel.std() < 0.06


# --- Length -------------------------------------------------------------------


def test_length_layer(tmp_path):
    x = random(3, 4, 5)
    check_layer(lambda: Length(), [x], (3, 4), 0, tmp_path)
    np.testing.assert_allclose(
        ops.convert_to_numpy(Length()(x)), np.linalg.norm(x, axis=-1), rtol=1e-5
    )


# --- Mask ---------------------------------------------------------------------


def test_mask_layer_with_labels(tmp_path):
    caps = random(4, 3, 2)
    y = np.array([0, 2, 1, 2], dtype="int32")
    check_layer(lambda: Mask(), [caps, y], (4, 6), 0, tmp_path)
    out = ops.convert_to_numpy(Mask()([caps, y])).reshape(4, 3, 2)
    for b, label in enumerate(y):
        np.testing.assert_allclose(out[b, label], caps[b, label])
        assert np.all(np.delete(out[b], label, axis=0) == 0)


def test_mask_layer_without_labels_keeps_longest(tmp_path):
    caps = random(4, 3, 2)
    check_layer(lambda: Mask(), [caps], (4, 6), 0, tmp_path)
    out = ops.convert_to_numpy(Mask()(caps)).reshape(4, 3, 2)
    longest = np.linalg.norm(caps, axis=-1).argmax(-1)
    for b, label in enumerate(longest):
        np.testing.assert_allclose(out[b, label], caps[b, label])
        assert np.abs(out[b]).sum() == pytest.approx(np.abs(caps[b, label]).sum())


@pytest.mark.parametrize(
    "encode",
    [
        lambda y: y,  # (batch_size,)
        lambda y: y[:, None],  # (batch_size, 1)
        lambda y: np.eye(3, dtype="float32")[y],  # one-hot
    ],
    ids=["int", "int-column", "one-hot"],
)
def test_mask_label_formats_agree(encode):
    caps = random(4, 3, 2)
    y = np.array([2, 0, 1, 1], dtype="int32")
    expected = ops.convert_to_numpy(Mask()([caps, y]))
    np.testing.assert_allclose(
        ops.convert_to_numpy(Mask()([caps, encode(y)])), expected
    )


def test_mask_reads_a_column_of_integers_as_labels_with_one_capsule():
    # (batch_size, 1) has the shape of one-hot rows when there is one capsule;
    # integers there are the label 0, which keeps the capsule.
    caps = random(4, 1, 2)
    for labels in (np.zeros((4, 1), "int32"), np.ones((4, 1), "float32")):
        np.testing.assert_allclose(
            ops.convert_to_numpy(Mask()([caps, labels])), caps.reshape(4, 2)
        )


def test_mask_trains_a_decoder():
    caps_in = keras.Input((3, 2))
    label_in = keras.Input((), dtype="int32")
    decoded = layers.Dense(5)(Mask()([caps_in, label_in]))
    model = keras.Model([caps_in, label_in], decoded)
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="mse")
    x = [random(8, 3, 2), labels(8, 3)]
    target = random(8, 5)
    before = model.evaluate(x, target, verbose=0)
    model.fit(x, target, epochs=5, batch_size=8, verbose=0)
    assert model.evaluate(x, target, verbose=0) < before
