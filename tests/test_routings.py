"""The routing algorithms behind `DigitCaps(routing=...)`, against NumPy references.

Self-attention routing (Mazzia et al. 2021) and inverted dot-product attention
routing (Tsai et al. 2020) next to dynamic routing: values and couplings
equal to loop-by-loop NumPy references, finite at zero votes (gradients too),
reduced precision, serialization and old-model compatibility.
"""

import keras
import numpy as np
import numpy_reference as ref
import pytest
from conftest import TOLERANCE, gradient, numpy, random
from keras import ops
from layer_checks import check_layer

from capsules_keras import DigitCaps
from capsules_keras.models import CapsNet
from capsules_keras.ops import (
    ROUTINGS,
    inverted_dot_product_routing,
    layer_norm,
    self_attention_routing,
)


def test_self_attention_routing_matches_reference():
    u_hat = random(3, 7, 4, 5)  # 7 children, 4 parents of dimension 5
    priors = random(7, 4, scale=0.1, seed=1)
    for b in (None, priors):
        v, c = self_attention_routing(u_hat, b, return_coupling=True)
        v_ref, c_ref = ref.self_attention_routing(u_hat, b)
        np.testing.assert_allclose(numpy(v), v_ref, **TOLERANCE)
        np.testing.assert_allclose(numpy(c), c_ref, **TOLERANCE)
    np.testing.assert_allclose(numpy(c).sum(axis=-1), 1.0, atol=1e-6)


@pytest.mark.parametrize("iterations", [1, 2, 3, 5])
def test_inverted_dot_product_routing_matches_reference(iterations):
    u_hat = random(3, 7, 4, 5, seed=2)
    scale, offset = 1 + random(5, scale=0.2, seed=3), random(5, scale=0.2, seed=4)
    v, c = inverted_dot_product_routing(
        u_hat, iterations, scale, offset, return_coupling=True
    )
    v_ref, c_ref = ref.inverted_dot_product_routing(u_hat, iterations, scale, offset)
    np.testing.assert_allclose(numpy(v), v_ref, **TOLERANCE)
    np.testing.assert_allclose(numpy(c), c_ref, **TOLERANCE)
    if iterations == 1:  # parents start from zero: uniform couplings
        np.testing.assert_allclose(numpy(c), 0.25, atol=1e-7)


def test_layer_norm_matches_reference():
    x = random(4, 6, 16, scale=3.0)
    scale, offset = random(16, seed=5), random(16, seed=6)
    expected = ref.layer_norm(x, scale, offset)
    got = numpy(layer_norm(x, scale, offset))
    np.testing.assert_allclose(got, expected, **TOLERANCE)


@pytest.mark.parametrize("routing", sorted(ROUTINGS))
def test_zero_votes_give_finite_values_and_gradients(routing):
    layer = DigitCaps(3, 4, routing=routing, return_coupling=True)
    layer.build((None, 5, 2))
    u_hat = np.zeros((2, 5, 3, 4), "float32")
    v, c = layer.route(u_hat)
    assert np.all(np.isfinite(numpy(v))) and np.all(np.isfinite(numpy(c)))
    grad = gradient(lambda t: layer.route(t, return_coupling=False), u_hat)
    assert np.all(np.isfinite(grad))
    # ... and for inputs of zero length through the whole layer.
    grad = gradient(lambda t: layer(t)[0], np.zeros((2, 5, 2), "float32"))
    assert np.all(np.isfinite(grad))


@pytest.mark.parametrize("routing", sorted(ROUTINGS))
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_reduced_precision_is_finite_and_close(routing, dtype):
    layer = DigitCaps(4, 5, routing=routing)
    layer.build((None, 7, 3))
    u_hat = random(3, 7, 4, 5, seed=9)
    full = numpy(layer.route(u_hat))
    low = layer.route(ops.cast(u_hat, dtype))
    assert keras.backend.standardize_dtype(low.dtype) == dtype
    np.testing.assert_allclose(numpy(ops.cast(low, "float32")), full, atol=3e-2)


@pytest.mark.parametrize("routing", ["self_attention", "inverted_dot_product"])
def test_digit_caps_routes_with_the_chosen_algorithm(routing, tmp_path):
    x = random(3, 7, 3, scale=1.0, seed=10)
    num_weights = {"self_attention": 2, "inverted_dot_product": 3}[routing]
    check_layer(
        lambda: DigitCaps(4, 5, routing=routing), [x], (3, 4, 5), num_weights, tmp_path
    )
    layer = DigitCaps(
        4,
        5,
        routing=routing,
        kernel_initializer=keras.initializers.RandomNormal(stddev=0.3),
        return_coupling=True,
    )
    v, c = layer(x)
    u_hat = ref.votes(numpy(layer.kernel).astype("float64"), x.astype("float64"))
    if routing == "self_attention":
        layer.priors.assign(random(7, 4, scale=0.1, seed=11))
        v, c = layer(x)
        v_ref, c_ref = ref.self_attention_routing(u_hat, numpy(layer.priors))
        weights = {"kernel", "priors"}
    else:
        v_ref, c_ref = ref.inverted_dot_product_routing(u_hat, 3, 1.0, 0.0)
        weights = {"kernel", "pose_scale", "pose_offset"}
    np.testing.assert_allclose(numpy(v), v_ref, **TOLERANCE)
    np.testing.assert_allclose(numpy(c), c_ref, **TOLERANCE)
    assert {w.path.split("/")[-1] for w in layer.weights} == weights
    assert layer.get_config()["routing"] == routing


def test_iterations_default_per_algorithm_and_are_checked():
    assert DigitCaps(4, 5).routing_iterations == 3  # the paper's
    assert DigitCaps(4, 5, routing="self_attention").routing_iterations == 1
    assert DigitCaps(4, 5, routing="inverted_dot_product").routing_iterations == 3
    with pytest.raises(ValueError, match="one pass"):
        DigitCaps(4, 5, routing="self_attention", routing_iterations=3)
    with pytest.raises(ValueError, match="routing"):
        DigitCaps(4, 5, routing="em")
    with pytest.raises(ValueError, match="dynamic routing only"):
        DigitCaps(4, 5, routing="inverted_dot_product", stop_gradient_votes=True)
    with pytest.raises(ValueError, match="routing_iterations"):
        DigitCaps(4, 5, routing_iterations=0)


def test_a_config_saved_before_routing_existed_loads_as_dynamic():
    config = DigitCaps(4, 5, routing_iterations=2).get_config()
    del config["routing"]
    layer = DigitCaps.from_config(config)
    assert layer.routing == "dynamic" and layer.routing_iterations == 2


SMALL = {"conv_filters": 8, "primary_capsules": 2, "decoder_units": (16,)}


def test_capsnet_trains_analyzes_saves_and_loads(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.random((16, 28, 28, 1)).astype("float32")
    y = np.arange(16) % 10
    for routing in ("self_attention", "inverted_dot_product"):
        model = CapsNet(routing=routing, **SMALL)
        assert model.routing_iterations == ROUTINGS[routing]
        model.compile(optimizer=keras.optimizers.Adam(1e-3))
        model.fit(x, y, batch_size=8, epochs=1, verbose=0)
        inside = model.analyze(x[:4])
        assert inside["coupling"].shape == (4, 72, 10)
        np.testing.assert_allclose(inside["coupling"].sum(-1), 1.0, atol=1e-5)
        lengths = model.predict(x[:4], verbose=0)
        np.testing.assert_allclose(inside["lengths"], lengths, atol=1e-5)
        path = str(tmp_path / f"{routing}.keras")
        model.save(path)
        loaded = keras.saving.load_model(path).predict(x[:4], verbose=0)
        np.testing.assert_allclose(loaded, lengths, atol=1e-6)
