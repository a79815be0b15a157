"""A Keras-style layer check, after `keras.src.testing.TestCase.run_layer_test`."""

import os

import keras
import numpy as np

from capsules_keras import Length, MarginLoss


def _model_around(layer, input_arrays):
    inputs = [keras.Input(shape=a.shape[1:], dtype=a.dtype) for a in input_arrays]
    outputs = layer(inputs if len(inputs) > 1 else inputs[0])
    return keras.Model(inputs, outputs)


def check_layer(
    layer_factory,
    input_arrays,
    expected_output_shape,
    expected_num_weights,
    tmp_path,
):
    """Output shape, weight count, config round trip and `.keras` round trip.

    Args:
        layer_factory: Callable returning a new layer.
        input_arrays: List of NumPy inputs (one per layer input).
        expected_output_shape: Expected output shape for those inputs.
        expected_num_weights: Expected number of weights once built.
        tmp_path: Folder for the saved model.
    """
    layer = layer_factory()
    output = layer(input_arrays if len(input_arrays) > 1 else input_arrays[0])
    assert tuple(output.shape) == tuple(expected_output_shape)
    assert len(layer.weights) == expected_num_weights
    assert len(layer.trainable_weights) == expected_num_weights

    config = layer.get_config()
    clone = layer.__class__.from_config(config)
    assert clone.get_config() == config
    revived = keras.saving.deserialize_keras_object(
        keras.saving.serialize_keras_object(layer)
    )
    assert type(revived) is type(layer) and revived.get_config() == config

    model = _model_around(layer_factory(), input_arrays)
    expected = keras.ops.convert_to_numpy(model(input_arrays))
    path = os.path.join(tmp_path, "layer.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)  # no custom_objects: registered
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(loaded(input_arrays)), expected, rtol=0, atol=1e-6
    )


def check_fit_reduces_loss(model, x, y, epochs=5, learning_rate=1e-2):
    """A few `fit` steps on one batch lower the margin loss."""
    model.compile(optimizer=keras.optimizers.Adam(learning_rate), loss=MarginLoss())
    before = model.evaluate(x, y, verbose=0)
    history = model.fit(x, y, epochs=epochs, batch_size=len(x), verbose=0)
    after = model.evaluate(x, y, verbose=0)
    assert np.all(np.isfinite(history.history["loss"]))
    assert after < before, (before, after)


def capsule_classifier(front, num_classes, input_shape):
    """Input -> `front` layers -> Length, for fit checks."""
    inputs = keras.Input(shape=input_shape)
    x = inputs
    for layer in front:
        x = layer(x)
    outputs = Length()(x)
    assert outputs.shape[-1] == num_classes
    return keras.Model(inputs, outputs)
