"""Accuracy when an image holds several objects (MultiMNIST's two digits).

The prediction is the set of the `k` highest class scores (capsule lengths,
or sigmoid outputs); `k` is the number of objects in the image (2 for
MultiMNIST). With `min_correct=k` a pair counts only if both are right (the
paper's exact match); with `min_correct=1`, if at least one is.
"""

import math
from statistics import NormalDist

import keras
import numpy as np
from keras import ops

from capsules_keras._checks import check_positive_int


def top_k_classes(scores, k):
    """The `k` highest-scoring classes per row, highest first: `(n, k)` int."""
    return ops.top_k(ops.convert_to_tensor(scores), k, sorted=True)[1]


def k_hot(labels, num_classes, dtype="float32"):
    """`(n, num_classes)` rows with a 1 at each class of `labels` `(n, k)`.

    Rows of `num_classes` values (already k-hot) are returned cast.
    """
    labels = ops.convert_to_tensor(labels)
    if len(labels.shape) == 2 and labels.shape[-1] == num_classes:
        return ops.cast(labels, dtype)
    return ops.sum(ops.one_hot(ops.cast(labels, "int32"), num_classes, dtype=dtype), 1)


def correct_in_top_k(y_true, scores, k):
    """How many of the true classes are among the `k` highest scores, `(n,)`.

    Args:
        y_true: k-hot rows `(n, num_classes)`, or class indices `(n, k)`.
        scores: `(n, num_classes)`.
        k: How many classes each image holds.
    """
    scores = ops.convert_to_tensor(scores)
    num_classes = scores.shape[-1]
    predicted = k_hot(top_k_classes(scores, k), num_classes, scores.dtype)
    targets = k_hot(y_true, num_classes, scores.dtype)
    return ops.sum(predicted * targets, axis=-1)


def multi_label_accuracy(y_true, y_pred, k=2, min_correct=None):
    """1.0 where at least `min_correct` (default: all `k`) classes are right."""
    min_correct = k if min_correct is None else min_correct
    correct = correct_in_top_k(y_true, y_pred, k)
    return ops.cast(correct >= min_correct - 0.5, "float32")


@keras.saving.register_keras_serializable(package="capsules_keras")
class MultiLabelAccuracy(keras.metrics.MeanMetricWrapper):
    """Share of images whose `k` top-scoring classes hold `min_correct` right.

    `y_true` are k-hot rows `(n, num_classes)` or class indices `(n, k)`;
    `y_pred` the class scores `(n, num_classes)`.

    Args:
        k: Objects per image (2 for MultiMNIST).
        min_correct: How many of them must be among the top `k` (default
            `k`: exact match; 1: at least one right).
        name: Metric name.
        dtype: Metric dtype.

    >>> metric = MultiLabelAccuracy(k=2)
    >>> metric.update_state([[0, 1], [2, 3]], [[.9, .8, .1, .0], [.0, .3, .9, .2]])
    >>> float(metric.result())
    0.5
    """

    def __init__(self, k=2, min_correct=None, name=None, dtype=None):
        check_positive_int("k", k)
        min_correct = k if min_correct is None else min_correct
        check_positive_int("min_correct", min_correct)
        if min_correct > k:
            raise ValueError(
                f"`min_correct` must be at most k={k}. Received: min_correct="
                f"{min_correct}"
            )
        if name is None:
            name = "exact_match" if min_correct == k else f"at_least_{min_correct}"
        super().__init__(
            multi_label_accuracy, name=name, dtype=dtype, k=k, min_correct=min_correct
        )
        self.k = k
        self.min_correct = min_correct

    def get_config(self):
        return {
            "k": self.k,
            "min_correct": self.min_correct,
            "name": self.name,
            "dtype": self.dtype,
        }


def multi_label_metrics(k):
    """Exact match and at-least-one-right for images of `k` objects."""
    return [MultiLabelAccuracy(k), MultiLabelAccuracy(k, min_correct=1)]


def coupling_entropy(coupling, weights=None):
    """Mean entropy of each child's couplings, as a share of the uniform's.

    ```
    H[b,i] = -sum_j c[b,i,j] log c[b,i,j] / log(num_parents)
    result[b] = sum_i w[b,i] H[b,i] / sum_i w[b,i]     # w = 1 without weights
    ```

    1 means every child splits its vote evenly over the parents (as with one
    iteration of dynamic routing); 0 means every child sends it all to one.
    Weighting by the children's lengths lets a child count as much as it
    votes: a short (inactive) child's couplings hardly matter.

    Args:
        coupling: `(batch_size, in_capsules, num_parents)` coupling
            coefficients, each child's summing to 1 over the parents.
        weights: Optional `(batch_size, in_capsules)` non-negative weights of
            the children, e.g. their lengths.

    Returns:
        `(batch_size,)` float32 values in [0, 1].
    """
    c = ops.convert_to_tensor(coupling, dtype="float32")
    if len(c.shape) != 3 or c.shape[-1] is None or c.shape[-1] < 2:
        raise ValueError(
            "`coupling` must have shape (batch_size, in_capsules, num_parents) "
            f"with at least 2 parents. Received: coupling.shape={tuple(c.shape)}"
        )
    # 0 log 0 = 0: the maximum keeps log away from -inf where c is 0.
    plogp = c * ops.log(ops.maximum(c, 1e-30))
    entropy = -ops.sum(plogp, axis=-1) / math.log(c.shape[-1])  # (b, i)
    if weights is None:
        return ops.mean(entropy, axis=-1)
    w = ops.convert_to_tensor(weights, dtype="float32")
    if tuple(w.shape) != tuple(c.shape[:2]):
        raise ValueError(
            "`weights` must have shape (batch_size, in_capsules) = "
            f"{tuple(c.shape[:2])}. Received: weights.shape={tuple(w.shape)}"
        )
    return ops.sum(w * entropy, axis=-1) / ops.sum(w, axis=-1)


def binomial_interval(accuracy, n, confidence=0.95):
    """Wilson score interval of an accuracy measured on `n` independent images.

    ```
    z = Phi^-1((1 + confidence) / 2)                  # 1.96 for 95%
    centre = (p + z^2 / (2 n)) / (1 + z^2 / n)
    half = z / (1 + z^2 / n) * sqrt(p (1 - p) / n + z^2 / (4 n^2))
    (low, high) = (centre - half, centre + half)
    ```

    Unlike the normal approximation `p +- z sqrt(p (1 - p) / n)`, the Wilson
    interval stays inside [0, 1] and does not shrink to a point at an
    accuracy of 0 or 1 (Wilson 1927; Brown, Cai & DasGupta 2001).

    Args:
        accuracy: Share of correct images `p` in [0, 1], a number or an
            array (e.g. one accuracy per shift of a sweep).
        n: Number of images each accuracy was measured on (>= 1), a number
            or an array broadcastable against `accuracy`.
        confidence: Coverage of the interval, in (0, 1).

    Returns:
        `(low, high)`: float64 arrays of the broadcast shape of `accuracy`
        and `n` (NumPy scalars for scalar inputs), `0 <= low <= p <= high <= 1`.

    >>> low, high = binomial_interval(0.5, 100)
    >>> round(float(low), 4), round(float(high), 4)
    (0.4038, 0.5962)
    """
    p = np.asarray(accuracy, dtype=float)
    if not np.all((p >= 0) & (p <= 1)):  # also refuses NaN
        raise ValueError(
            f"`accuracy` must lie in [0, 1]. Received: accuracy={accuracy!r}"
        )
    if not np.all(np.asarray(n, dtype=float) >= 1):
        raise ValueError(f"`n` must be at least 1. Received: n={n!r}")
    n = np.asarray(n, dtype=float)
    if isinstance(confidence, bool) or not 0 < confidence < 1:
        raise ValueError(
            f"`confidence` must lie in (0, 1). Received: confidence={confidence!r}"
        )
    z = NormalDist().inv_cdf((1 + confidence) / 2)
    shrink = 1 + z**2 / n
    centre = (p + z**2 / (2 * n)) / shrink
    half = z / shrink * np.sqrt(p * (1 - p) / n + z**2 / (4 * n**2))
    # At p = 0 or 1 the bound is exactly 0 or 1; rounding could miss it.
    low = np.where(p == 0, 0.0, np.clip(centre - half, 0, 1))
    high = np.where(p == 1, 1.0, np.clip(centre + half, 0, 1))
    return low[()], high[()]


__all__ = [
    "MultiLabelAccuracy",
    "binomial_interval",
    "correct_in_top_k",
    "coupling_entropy",
    "k_hot",
    "multi_label_accuracy",
    "multi_label_metrics",
    "top_k_classes",
]
