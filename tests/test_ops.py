"""squash, safe_norm and dynamic_routing against the NumPy reference."""

import keras
import numpy as np
import numpy_reference as ref
import pytest
from conftest import gradient
from keras import ops

from capsules_keras import dynamic_routing, safe_norm, squash

TOLERANCE = {"rtol": 1e-5, "atol": 1e-5}


def random_votes(batch=3, in_caps=7, out_caps=4, out_dim=5, scale=0.5, seed=0):
    """Odd shapes on purpose: 7 children, 4 parents of dimension 5."""
    rng = np.random.default_rng(seed)
    return (scale * rng.standard_normal((batch, in_caps, out_caps, out_dim))).astype(
        "float32"
    )


def test_squash_matches_reference():
    s = np.random.default_rng(1).standard_normal((4, 6, 3)).astype("float32") * 2
    np.testing.assert_allclose(
        ops.convert_to_numpy(squash(s)), ref.squash(s), **TOLERANCE
    )


def test_squash_on_another_axis_matches_reference():
    s = np.random.default_rng(2).standard_normal((4, 5, 6)).astype("float32")
    out = ops.convert_to_numpy(squash(s, axis=1))
    expected = np.moveaxis(ref.squash(np.moveaxis(s, 1, -1)), -1, 1)
    np.testing.assert_allclose(out, expected, **TOLERANCE)


def test_squash_lengths_in_unit_interval_and_direction_kept():
    # Up to |s| ~ 950: beyond ~4000, 1 - 1/(1 + |s|^2) rounds to 1 in float32.
    scales = np.logspace(-4, 2.5, 50)[:, None]
    s = (scales * np.array([[1.0, -2.0, 2.0]])).astype("float32")  # |s| = 3 * scale
    v = ops.convert_to_numpy(squash(s))
    lengths = np.linalg.norm(v, axis=-1)
    assert np.all(lengths >= 0) and np.all(lengths < 1)
    assert np.all(np.diff(lengths) >= 0), "length must grow with |s|"
    # Direction kept: v is a positive multiple of s (cosine similarity 1).
    big = lengths > 1e-6
    cosine = np.sum(v * s, -1)[big] / (lengths[big] * np.linalg.norm(s, axis=-1)[big])
    np.testing.assert_allclose(cosine, 1.0, atol=1e-5)


def test_squash_zero_vector_value_and_gradient_are_finite():
    zeros = np.zeros((2, 4), dtype="float32")
    assert np.all(ops.convert_to_numpy(squash(zeros)) == 0)
    grad = gradient(squash, zeros)
    assert np.all(np.isfinite(grad)), grad
    grad = gradient(safe_norm, zeros)
    assert np.all(np.isfinite(grad)), grad


def test_safe_norm_matches_numpy():
    x = np.random.default_rng(3).standard_normal((5, 7)).astype("float32")
    expected = np.sqrt(np.sum(x.astype("float64") ** 2, axis=-1) + ref.EPSILON)
    np.testing.assert_allclose(
        ops.convert_to_numpy(safe_norm(x)), expected, **TOLERANCE
    )
    kept = ops.convert_to_numpy(safe_norm(x, axis=0, keepdims=True))
    assert kept.shape == (1, 7)


@pytest.mark.parametrize("iterations", [1, 2, 3])
def test_routing_matches_reference(iterations):
    u_hat = random_votes()
    v, c = dynamic_routing(u_hat, iterations=iterations, return_coupling=True)
    v_ref, c_ref = ref.routing(u_hat, iterations)
    np.testing.assert_allclose(ops.convert_to_numpy(v), v_ref, **TOLERANCE)
    np.testing.assert_allclose(ops.convert_to_numpy(c), c_ref, **TOLERANCE)


@pytest.mark.parametrize("iterations", [1, 3])
def test_routing_softmax_is_over_parents_not_children(iterations):
    """Fails if the coupling softmax runs over the child axis i."""
    u_hat = random_votes(seed=4)
    v, c = dynamic_routing(u_hat, iterations=iterations, return_coupling=True)
    v, c = ops.convert_to_numpy(v), ops.convert_to_numpy(c)
    # Each child's coefficients sum to one over the parents ...
    np.testing.assert_allclose(c.sum(axis=2), 1.0, atol=1e-6)
    # ... and not over the children (7 children, 4 parents).
    assert np.abs(c.sum(axis=1) - 1.0).max() > 0.1
    v_wrong, _ = ref.routing(u_hat, iterations, softmax_axis=1)
    assert np.abs(v - v_wrong).max() > 1e-2


def test_routing_logits_are_per_sample():
    """Sample 0's output must not depend on the other samples in the batch."""
    u_hat = random_votes(batch=4, seed=5)
    alone = ops.convert_to_numpy(dynamic_routing(u_hat[:1], iterations=3))
    together = ops.convert_to_numpy(dynamic_routing(u_hat, iterations=3))
    np.testing.assert_allclose(together[:1], alone, **TOLERANCE)


def test_routing_outliers_lose_coupling():
    """Routing by agreement: votes that disagree get less of the parent."""
    rng = np.random.default_rng(6)
    agree = np.array([1.0, 1.0]) + 0.05 * rng.standard_normal((4, 2))
    outliers = np.array([[-1.0, 1.0], [1.0, -1.0]])
    # 6 children, 1 parent plus a "nobody" parent that gets small votes.
    u_hat = np.zeros((1, 6, 2, 2), dtype="float32")
    u_hat[0, :, 0] = np.concatenate([agree, outliers])
    u_hat[0, :, 1] = 0.1
    _, c = dynamic_routing(u_hat, iterations=3, return_coupling=True)
    c = ops.convert_to_numpy(c)[0, :, 0]
    assert c[:4].min() > c[4:].max()


def test_routing_zero_votes_give_finite_values_and_gradients():
    u_hat = np.zeros((2, 5, 3, 4), dtype="float32")
    v = ops.convert_to_numpy(dynamic_routing(u_hat, iterations=3))
    assert np.all(np.isfinite(v))
    grad = gradient(lambda t: dynamic_routing(t, iterations=3), u_hat)
    assert np.all(np.isfinite(grad))


def test_stop_gradient_votes_keeps_forward_changes_gradient():
    u_hat = random_votes(seed=7)
    full = dynamic_routing(u_hat, iterations=3)
    stopped = dynamic_routing(u_hat, iterations=3, stop_gradient_votes=True)
    np.testing.assert_allclose(
        ops.convert_to_numpy(full), ops.convert_to_numpy(stopped)
    )
    grad_full = gradient(lambda t: dynamic_routing(t, iterations=3), u_hat)
    grad_stopped = gradient(
        lambda t: dynamic_routing(t, iterations=3, stop_gradient_votes=True), u_hat
    )
    assert np.all(np.isfinite(grad_stopped))
    assert np.abs(grad_full - grad_stopped).max() > 1e-4
    # With one iteration there is nothing to stop: the gradients agree.
    grad_one = gradient(lambda t: dynamic_routing(t, iterations=1), u_hat)
    grad_one_stopped = gradient(
        lambda t: dynamic_routing(t, iterations=1, stop_gradient_votes=True), u_hat
    )
    np.testing.assert_allclose(grad_one, grad_one_stopped, **TOLERANCE)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_reduced_precision_routing_is_finite_and_close(dtype):
    u_hat = random_votes(seed=8)
    low = dynamic_routing(ops.cast(u_hat, dtype), iterations=3)
    assert keras.backend.standardize_dtype(low.dtype) == dtype
    low = ops.convert_to_numpy(ops.cast(low, "float32"))
    v_ref, _ = ref.routing(u_hat, 3)
    np.testing.assert_allclose(low, v_ref, atol=3e-2)
