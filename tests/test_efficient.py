"""Efficient-CapsNet: its squash, its size, training, saving, every backend."""

import json

import keras
import numpy as np
import numpy_reference as ref
import pytest
from conftest import gradient, random
from keras import ops

from capsules_keras import DigitCaps, EfficientCapsNet, Squash, exponential_squash


def test_exponential_squash_matches_reference_and_is_finite_at_zero():
    s = np.random.default_rng(0).standard_normal((4, 6, 8)).astype("float32") * 2
    np.testing.assert_allclose(
        ops.convert_to_numpy(exponential_squash(s)),
        ref.exponential_squash(s),
        rtol=1e-5,
        atol=1e-6,
    )
    zero = np.zeros((2, 8), "float32")
    assert np.all(ops.convert_to_numpy(exponential_squash(zero)) == 0)
    assert np.all(np.isfinite(gradient(exponential_squash, zero)))
    layer = Squash(squash="exponential")
    np.testing.assert_allclose(
        ops.convert_to_numpy(layer(s)), ref.exponential_squash(s), atol=1e-6
    )
    assert Squash.from_config(layer.get_config()).squash == "exponential"
    with pytest.raises(ValueError, match="Received: squash='tanh'"):
        Squash(squash="tanh")


def test_digit_caps_with_the_exponential_squash_matches_reference():
    layer = DigitCaps(
        4,
        5,
        routing="self_attention",
        squash="exponential",
        kernel_initializer=keras.initializers.RandomNormal(stddev=0.3),
        return_coupling=True,
    )
    u = np.random.default_rng(1).standard_normal((3, 7, 3)).astype("float32")
    v, _ = layer(u)
    u_hat = ref.votes(ops.convert_to_numpy(layer.kernel).astype("float64"), u)
    # The reference's squash swapped for the exponential one.
    _, c = ref.self_attention_routing(u_hat)
    s = np.einsum("bij,bijm->bjm", c, u_hat)
    np.testing.assert_allclose(
        ops.convert_to_numpy(v), ref.exponential_squash(s), rtol=1e-5, atol=1e-5
    )
    assert layer.get_config()["squash"] == "exponential"


def test_the_papers_parameter_count():
    model = EfficientCapsNet()
    assert model.count_encoder_params() == 161_824  # Mazzia et al.'s count
    assert model.count_params() == 1_573_744  # with the decoder and BN statistics
    assert model.routing == "self_attention" and model.routing_iterations == 1
    config = json.loads(json.dumps(model.get_config()))
    assert "conv_filters" not in config
    assert EfficientCapsNet.from_config(config).count_params() == 1_573_744


@pytest.fixture(scope="module")
def digits(mnist_path):
    keep = np.random.default_rng(0).permutation(5000)[:96]
    with np.load(mnist_path) as data:
        return data["x_train"][keep], data["y_train"][keep]


def test_trains_predicts_and_saves(digits, tmp_path):
    x, y = digits  # uint8 (n, 28, 28), as keras.datasets gives them
    model = EfficientCapsNet()
    model.compile(optimizer=keras.optimizers.Adam(5e-4))
    moving_mean = model.conv.get_layer("bn1").moving_mean
    before = ops.convert_to_numpy(moving_mean).copy()
    history = model.fit(x, y, batch_size=16, epochs=2, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]
    # BatchNorm learned statistics in training and uses them in inference.
    assert not np.allclose(ops.convert_to_numpy(moving_mean), before)
    first = model.predict(x[:8], verbose=0)
    np.testing.assert_allclose(model.predict(x[:8], verbose=0), first, atol=1e-6)
    inside = model.analyze(x[:8])
    assert inside["coupling"].shape == (8, 16, 10)
    assert inside["reconstructions"].shape == (8, 28, 28, 1)
    np.testing.assert_allclose(inside["lengths"], first, atol=1e-5)
    path = str(tmp_path / "efficient.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert isinstance(loaded, EfficientCapsNet)
    np.testing.assert_allclose(loaded.predict(x[:8], verbose=0), first, atol=1e-5)


def test_too_small_images_are_refused():
    with pytest.raises(ValueError, match="too small"):
        EfficientCapsNet(image_shape=(10, 10, 1))


def test_the_primary_capsules_as_a_contraction_are_the_depthwise_convolution():
    # The encoder computes them as one contraction (EfficientEncoder.
    # primary_capsules); against keras' own convolution with its weights.
    model = EfficientCapsNet()
    depthwise, reshape, squash = model.primary_caps.layers
    depthwise.bias.assign(random(128, seed=1))
    features = random(4, 9, 9, 128)

    def keras_own(x):
        return squash(reshape(depthwise(x)))

    np.testing.assert_allclose(
        ops.convert_to_numpy(model.backbone.encoder.primary_capsules(features)),
        ops.convert_to_numpy(keras_own(features)),
        rtol=1e-5,
        atol=1e-6,
    )
    np.testing.assert_allclose(
        gradient(model.backbone.encoder.primary_capsules, features),
        gradient(keras_own, features),
        rtol=1e-4,
        atol=1e-6,
    )
