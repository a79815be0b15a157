"""`binomial_interval`: Wilson score intervals of accuracies, NumPy only."""

import numpy as np
import pytest

from capsules_keras.metrics import binomial_interval


@pytest.mark.parametrize(
    "accuracy, n, expected",
    [
        (0.5, 100, (0.4038, 0.5962)),
        (1.0, 50, (0.9287, 1.0)),
        (0.0, 50, (0.0, 0.0713)),
        (0.99, 10_000, (0.9878, 0.9918)),
    ],
)
def test_wilson_interval_matches_hand_computed_values(accuracy, n, expected):
    # z = 1.96; e.g. 0.5, 100: centre 0.5, half 1.96 / 1.0384 * sqrt(0.0026).
    low, high = binomial_interval(accuracy, n)
    assert (low, high) == pytest.approx(expected, abs=1e-4)
    assert 0 <= low <= accuracy <= high <= 1


def test_exact_bounds_at_zero_and_one():
    low, high = binomial_interval([0.0, 1.0], 50)
    assert low[0] == 0.0 and high[1] == 1.0


def test_vectorised_and_narrowing_with_n():
    accuracy = np.array([0.2, 0.5, 0.9])
    low, high = binomial_interval(accuracy[:, None], [10, 100, 1000, 10_000])
    assert low.shape == high.shape == (3, 4)
    width = high - low
    assert np.all(np.diff(width, axis=1) < 0)  # narrower with more images
    assert np.all((low < accuracy[:, None]) & (accuracy[:, None] < high))
    # A 99% interval holds the 95% one.
    low99, high99 = binomial_interval(0.5, 100, confidence=0.99)
    assert low99 < 0.4038 and high99 > 0.5962


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"accuracy": 1.2, "n": 10}, "Received: accuracy=1.2"),
        ({"accuracy": [0.5, -0.1], "n": 10}, r"Received: accuracy=\[0.5, -0.1\]"),
        ({"accuracy": float("nan"), "n": 10}, "Received: accuracy=nan"),
        ({"accuracy": 0.5, "n": 0}, "Received: n=0"),
        ({"accuracy": 0.5, "n": 10, "confidence": 1.0}, "Received: confidence=1.0"),
    ],
)
def test_invalid_inputs(kwargs, message):
    with pytest.raises(ValueError, match=message):
        binomial_interval(**kwargs)
