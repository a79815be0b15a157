"""The routing algorithms behind `DigitCaps(routing=...)`, against NumPy references.

Self-attention routing (Mazzia et al. 2021) and inverted dot-product attention
routing (Tsai et al. 2020) next to dynamic routing: values and couplings
equal to loop-by-loop NumPy references, finite at zero votes (gradients too),
reduced precision, serialization and old-model compatibility.
"""

import authors_reference as authors
import keras
import numpy as np
import numpy_reference as ref
import pytest
from conftest import TOLERANCE, gradient, numpy, random
from keras import ops
from layer_checks import check_layer

from capsules_keras import DigitCaps
from capsules_keras.models import CapsNet
from capsules_keras.ops import layer_norm
from capsules_keras.routing import (
    ROUTINGS,
    inverted_dot_product_routing,
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


@pytest.mark.parametrize("scaled", [True, False])
@pytest.mark.parametrize("iterations", [1, 2, 3, 5])
def test_inverted_dot_product_routing_matches_reference(iterations, scaled):
    u_hat = random(3, 7, 4, 5, seed=2)
    scale, offset = 1 + random(5, scale=0.2, seed=3), random(5, scale=0.2, seed=4)
    v, c = inverted_dot_product_routing(
        u_hat, iterations, scale, offset, return_coupling=True, scale_agreement=scaled
    )
    v_ref, c_ref = ref.inverted_dot_product_routing(
        u_hat, iterations, scale, offset, scaled
    )
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
    with pytest.raises(ValueError, match="applies to routing='dynamic' only"):
        DigitCaps(4, 5, routing="inverted_dot_product", stop_gradient_votes=True)
    with pytest.raises(ValueError, match="routing_iterations"):
        DigitCaps(4, 5, routing_iterations=0)


SMALL = {"conv_filters": 8, "primary_capsules": 2, "decoder_units": (16,)}


def _layer_with(routing, kernel, **kwargs):
    """A built DigitCaps whose kernel is `kernel` (in_caps, out_caps, in, out)."""
    in_caps, out_caps, in_dim, out_dim = kernel.shape
    layer = DigitCaps(
        out_caps, out_dim, routing=routing, return_coupling=True, **kwargs
    )
    layer.build((None, in_caps, in_dim))
    layer.kernel.assign(kernel)
    return layer


def test_inverted_dot_product_layer_matches_the_authors_code():
    u = random(3, 12, 8, seed=20)  # (batch, children, child dim)
    kernel = random(12, 5, 8, 16, scale=0.4, seed=21)
    gain, bias = 1 + random(16, scale=0.2, seed=22), random(16, scale=0.2, seed=23)
    layer = _layer_with("inverted_dot_product", kernel)
    legacy = _layer_with("inverted_dot_product", kernel, scale_agreement=False)
    for routed in (layer, legacy):
        routed.pose_scale.assign(gain)
        routed.pose_offset.assign(bias)
    theirs = kernel.transpose(0, 2, 1, 3)  # their w[n, a, m, d]
    for passes in (1, 2, 3):
        s, _, c_theirs = authors.tsai_capsule_fc(u, theirs, passes, gain, bias)
        v, c = layer.route(layer.votes(u), passes)
        # Ours outputs the squashed s of the last pass (their layer: its LayerNorm).
        np.testing.assert_allclose(numpy(v), ref.squash(s), **TOLERANCE)
        np.testing.assert_allclose(numpy(c), c_theirs, **TOLERANCE)
    # Without the authors' 1/sqrt(16) the couplings come out visibly sharper.
    _, c_unscaled = legacy.route(legacy.votes(u), 3)
    assert np.abs(numpy(c_unscaled) - c_theirs).max() > 0.05


def test_dynamic_routing_layer_matches_the_authors_code():
    u = random(3, 12, 8, seed=27)
    kernel = random(12, 5, 8, 16, scale=0.3, seed=28)
    layer = _layer_with("dynamic", kernel)
    theirs = kernel.transpose(0, 2, 1, 3).reshape(12, 8, 5 * 16)  # their weights
    no_bias = np.zeros((5, 16))
    for iterations in (1, 2, 3):
        v, _ = layer.route(layer.votes(u), iterations)
        v_theirs = authors.sabour_capsule(u, theirs, no_bias, iterations)
        np.testing.assert_allclose(numpy(v), v_theirs, **TOLERANCE)
    # Their layer adds a learned bias to every s_j; ours has none (the paper's
    # Procedure 1), a departure listed in `dynamic_routing`'s docstring.
    biased = authors.sabour_capsule(u, theirs, np.full((5, 16), 0.1), 3)
    assert np.abs(numpy(layer(u)[0]) - biased).max() > 0.05


def test_self_attention_layer_matches_the_authors_code():
    u = random(3, 12, 8, seed=24)
    kernel = random(12, 5, 8, 16, scale=0.3, seed=25)
    priors = random(12, 5, scale=0.1, seed=26)
    layer = _layer_with("self_attention", kernel, squash="exponential")
    layer.priors.assign(priors)
    v, c = layer(u)
    v_theirs, c_theirs = authors.mazzia_fc_caps(
        u, kernel.transpose(1, 0, 2, 3), priors.T[..., None]
    )
    np.testing.assert_allclose(numpy(v), v_theirs, **TOLERANCE)
    np.testing.assert_allclose(numpy(c), c_theirs.transpose(0, 2, 1), **TOLERANCE)


def test_inverted_routing_saved_without_the_scale_keeps_routing_unscaled():
    config = DigitCaps(5, 16, routing="inverted_dot_product").get_config()
    assert config["scale_agreement"] is True  # new layers: the authors' scale
    del config["scale_agreement"]  # as capsules_keras 0.1 saved it
    assert DigitCaps.from_config(config).scale_agreement is False
    model_config = CapsNet(routing="inverted_dot_product", **SMALL).get_config()
    del model_config["scale_agreement"]
    old = CapsNet.from_config(model_config)
    assert old.scale_agreement is False and old.digit_caps.scale_agreement is False
    dynamic = DigitCaps(5, 16).get_config()
    del dynamic["scale_agreement"]
    assert DigitCaps.from_config(dynamic).scale_agreement is True  # no meaning there
    with pytest.raises(ValueError, match="routing='inverted_dot_product' only"):
        DigitCaps(5, 16, routing="dynamic", scale_agreement=False)


def test_a_config_saved_before_routing_existed_loads_as_dynamic():
    config = DigitCaps(4, 5, routing_iterations=2).get_config()
    del config["routing"]
    layer = DigitCaps.from_config(config)
    assert layer.routing == "dynamic" and layer.routing_iterations == 2


def test_capsnet_trains_analyzes_saves_and_loads(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.random((16, 28, 28, 1)).astype("float32")
    y = np.arange(16) % 10
    for routing in ("self_attention", "inverted_dot_product"):
        model = CapsNet(routing=routing, **SMALL)
        assert model.routing_iterations == (ROUTINGS[routing].iterations or 1)
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
