"""BatchNormalization: Keras' layer, fused on torch; the same results everywhere."""

import os

import keras
import numpy as np
import numpy_reference as ref
import pytest
from conftest import central_differences, gradient, numpy, random

from capsules_keras.layers.normalization import BatchNormalization


def _layer(shape, axis=-1, seed=1, **kwargs):
    """A built layer with random gamma and beta, and those as NumPy."""
    layer = BatchNormalization(axis=axis, **kwargs)
    layer.build(shape)
    channels = shape[axis]
    gamma, beta = random(channels, seed=seed) + 1, random(channels, seed=seed + 1)
    layer.gamma.assign(gamma)
    layer.beta.assign(beta)
    return layer, gamma, beta


@pytest.mark.parametrize("shape, axis", [((4, 5, 6, 3), -1), ((4, 3, 7), 1)])
def test_training_normalises_with_the_batch_and_updates_the_moving_statistics(
    shape, axis
):
    layer, gamma, beta = _layer(shape, axis, momentum=0.9)
    x = random(*shape, scale=2.0) + 1.5
    expected, mean, variance = ref.batch_norm(x, gamma, beta, axis)
    np.testing.assert_allclose(numpy(layer(x, training=True)), expected, atol=2e-5)
    moving_mean, moving_variance = 0.1 * mean, 0.9 + 0.1 * variance
    np.testing.assert_allclose(numpy(layer.moving_mean), moving_mean, atol=1e-6)
    np.testing.assert_allclose(numpy(layer.moving_variance), moving_variance, rtol=1e-5)

    # Inference normalises with the moving statistics, and updates nothing.
    inferred = ref.batch_norm_with(x, moving_mean, moving_variance, gamma, beta, axis)
    np.testing.assert_allclose(numpy(layer(x, training=False)), inferred, atol=2e-5)
    np.testing.assert_allclose(numpy(layer.moving_mean), moving_mean, atol=1e-6)


def test_the_input_gradient_is_batch_normalisation_s():
    x = random(4, 3, 3, 2, scale=2.0)
    layer, gamma, beta = _layer(x.shape)
    weights = random(*x.shape, seed=3)

    def reference(t):
        return np.sum(ref.batch_norm(t, gamma, beta, -1)[0] * weights)

    np.testing.assert_allclose(
        gradient(lambda t: keras.ops.multiply(layer(t, training=True), weights), x),
        central_differences(reference, x),
        atol=2e-4,
    )


def test_a_frozen_layer_and_one_value_per_channel_train_as_in_keras():
    x = random(4, 3, scale=2.0)
    frozen, gamma, beta = _layer(x.shape)
    frozen.trainable = False
    inferred = ref.batch_norm_with(x, np.zeros(3), np.ones(3), gamma, beta, -1)
    np.testing.assert_allclose(numpy(frozen(x, training=True)), inferred, atol=2e-5)

    # One value per channel: zero variance, so the output is beta.
    single, _, beta = _layer((1, 3))
    np.testing.assert_allclose(numpy(single(x[:1], training=True))[0], beta, atol=1e-6)


def test_weights_are_keras_own_batch_normalisation_s(tmp_path):
    x = random(8, 5, 5, 3, scale=2.0) + 1.0
    keras_own = keras.Sequential(
        [keras.Input((5, 5, 3)), keras.layers.BatchNormalization()]
    )
    keras_own.layers[0].gamma.assign(random(3, seed=4) + 1)
    keras_own(x, training=True)  # moving statistics away from their start
    path = os.path.join(tmp_path, "keras_own.weights.h5")
    keras_own.save_weights(path)
    ours = keras.Sequential([keras.Input((5, 5, 3)), BatchNormalization()])
    ours.load_weights(path)
    np.testing.assert_allclose(numpy(ours(x)), numpy(keras_own(x)), atol=1e-6)
    np.testing.assert_allclose(
        numpy(ours(x, training=True)), numpy(keras_own(x, training=True)), atol=2e-5
    )


def test_the_layer_saves_and_loads_with_its_config(tmp_path):
    layer = BatchNormalization(axis=1, momentum=0.9, epsilon=1e-4, center=False)
    config = layer.get_config()
    assert BatchNormalization.from_config(config).get_config() == config
    x = random(6, 3, 4, scale=2.0)
    model = keras.Sequential([keras.Input((3, 4)), layer])
    model(x, training=True)
    path = os.path.join(tmp_path, "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)  # no custom_objects: registered
    assert type(loaded.layers[0]) is BatchNormalization
    np.testing.assert_allclose(numpy(loaded(x)), numpy(model(x)), atol=1e-6)
