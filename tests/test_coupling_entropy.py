"""`coupling_entropy` against the entropy written out in NumPy."""

import keras
import numpy as np
import pytest

from capsules_keras.metrics import coupling_entropy


def numpy_entropy(c, w=None):
    """w-weighted mean over i of -sum_j c log c / log J, with 0 log 0 = 0."""
    safe = np.where(c > 0, c, 1.0)
    h = -(c * np.log(safe)).sum(-1) / np.log(c.shape[-1])  # (b, i)
    w = np.ones_like(h) if w is None else w
    return (w * h).sum(-1) / w.sum(-1)


def test_coupling_entropy_matches_numpy():
    rng = np.random.default_rng(0)
    c = rng.dirichlet(np.full(10, 0.5), size=(4, 36)).astype("float32")
    c[0, 0] = np.eye(10)[3]  # zeros: 0 log 0 counts as 0
    result = keras.ops.convert_to_numpy(coupling_entropy(c))
    assert result.shape == (4,)
    np.testing.assert_allclose(result, numpy_entropy(c.astype("float64")), rtol=1e-5)
    w = rng.uniform(0, 1, (4, 36)).astype("float32")
    weighted = keras.ops.convert_to_numpy(coupling_entropy(c, w))
    np.testing.assert_allclose(weighted, numpy_entropy(c, w), rtol=1e-5)
    assert not np.allclose(weighted, result)


def test_coupling_entropy_extremes():
    uniform = np.full((2, 5, 10), 0.1)
    one_hot = np.tile(np.eye(10)[[7]], (2, 5, 1))
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(coupling_entropy(uniform)), 1, rtol=1e-6
    )
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(coupling_entropy(one_hot)), 0, atol=1e-6
    )


@pytest.mark.parametrize("shape", [(5, 10), (2, 5, 1)])
def test_coupling_entropy_refuses_wrong_shapes(shape):
    with pytest.raises(ValueError, match=r"Received: coupling.shape"):
        coupling_entropy(np.ones(shape))


def test_coupling_entropy_refuses_wrong_weights():
    with pytest.raises(ValueError, match=r"Received: weights.shape=\(2, 4\)"):
        coupling_entropy(np.full((2, 5, 10), 0.1), np.ones((2, 4)))
