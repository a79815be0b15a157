"""MarginLoss and the reconstruction loss against hand-computed values."""

import keras
import numpy as np
import numpy_reference as ref
import pytest
from keras import ops

from capsules_keras import MarginLoss, margin_loss, reconstruction_loss


def test_margin_loss_hand_computed():
    # Class 0 present at length 0.5: (0.9 - 0.5)^2 = 0.16.
    # Class 1 absent at length 0.6: 0.5 * (0.6 - 0.1)^2 = 0.125.
    # Class 2 absent at length 0.05: below m-, costs nothing.
    lengths = np.array([[0.5, 0.6, 0.05]], dtype="float32")
    value = ops.convert_to_numpy(margin_loss(np.array([0]), lengths))
    np.testing.assert_allclose(value, [0.285], rtol=1e-6)
    # A perfect prediction costs nothing.
    perfect = np.array([[0.95, 0.05, 0.0]], dtype="float32")
    assert float(ops.convert_to_numpy(margin_loss(np.array([0]), perfect))[0]) == 0


def test_margin_loss_is_squared_not_linear():
    """The unsquared hinge would give 0.4 + 0.5 * 0.5 = 0.65 here."""
    value = MarginLoss()(np.array([0]), np.array([[0.5, 0.6]], dtype="float32"))
    np.testing.assert_allclose(float(ops.convert_to_numpy(value)), 0.285, rtol=1e-6)


def test_margin_loss_matches_reference_and_averages_the_batch():
    rng = np.random.default_rng(0)
    lengths = rng.uniform(0, 1, (6, 10)).astype("float32")
    y = rng.integers(0, 10, 6)
    expected = ref.margin_loss(np.eye(10)[y], lengths.astype("float64")).mean()
    value = float(ops.convert_to_numpy(MarginLoss()(y, lengths)))
    np.testing.assert_allclose(value, expected, rtol=1e-5)


def test_margin_loss_custom_parameters():
    lengths = np.array([[0.5, 0.6]], dtype="float32")
    loss = MarginLoss(m_plus=0.8, m_minus=0.2, lambda_=1.0)
    expected = (0.8 - 0.5) ** 2 + 1.0 * (0.6 - 0.2) ** 2
    np.testing.assert_allclose(
        float(ops.convert_to_numpy(loss(np.array([0]), lengths))), expected, rtol=1e-5
    )


def test_int_and_one_hot_labels_agree():
    rng = np.random.default_rng(1)
    lengths = rng.uniform(0, 1, (5, 4)).astype("float32")
    y = np.array([3, 0, 1, 2, 3])
    loss = MarginLoss()
    as_int = ops.convert_to_numpy(loss(y, lengths))
    as_column = ops.convert_to_numpy(loss(y[:, None], lengths))
    as_one_hot = ops.convert_to_numpy(loss(np.eye(4, dtype="float32")[y], lengths))
    np.testing.assert_allclose(as_int, as_one_hot, rtol=1e-6)
    np.testing.assert_allclose(as_column, as_one_hot, rtol=1e-6)


def test_margin_loss_config_round_trip():
    loss = MarginLoss(m_plus=0.95, m_minus=0.05, lambda_=0.25, name="m")
    config = loss.get_config()
    assert MarginLoss.from_config(config).get_config() == config
    revived = keras.losses.deserialize(keras.losses.serialize(loss))
    assert isinstance(revived, MarginLoss) and revived.lambda_ == 0.25


def test_margin_loss_in_compile_with_int_and_one_hot_labels():
    inputs = keras.Input((4,))
    model = keras.Model(inputs, keras.layers.Dense(3, activation="sigmoid")(inputs))
    model.compile(loss=MarginLoss())
    x = np.random.default_rng(2).standard_normal((6, 4)).astype("float32")
    y = np.array([0, 1, 2, 0, 1, 2])
    from_int = model.evaluate(x, y, verbose=0)
    from_one_hot = model.evaluate(x, np.eye(3, dtype="float32")[y], verbose=0)
    assert from_int == pytest.approx(from_one_hot, rel=1e-6)


def test_reconstruction_loss_is_per_image_sum_of_squares():
    images = np.zeros((2, 28, 28, 1), dtype="float32")
    reconstructions = np.full((2, 784), 0.5, dtype="float32")
    value = ops.convert_to_numpy(reconstruction_loss(images, reconstructions))
    np.testing.assert_allclose(value, [196.0, 196.0], rtol=1e-6)
    # The paper's 0.0005 * sum equals 0.392 * mean squared error for 28x28.
    mse = 0.25
    np.testing.assert_allclose(0.0005 * value, 0.392 * mse, rtol=1e-6)
