"""Whether two models scored on the same images differ, and by how much.

Plain NumPy on what models have already predicted: `mcnemar` counts the
images only one of two models gets right and gives the test's p-value;
`paired_difference` gives the difference of the two accuracies with its
interval, so that a test that finds nothing still says how large a
difference the images leave open. `compare` gives both with each model's
accuracy and Wilson interval, and `seed_verdict` reads one claim tested in
several seeds against a family's Bonferroni bound: the tutorial's statistics
policy (`notebooks/statistics.md`) in code.

The probes, detector scores, bootstrap intervals and pixel correlations of
notebook 07 live beside the notebooks, in `notebooks/analysis.py`.
"""

import math
from typing import NamedTuple

import numpy as np

from capsules_keras.metrics import binomial_interval


def _discordant(right_a, right_b):
    """`(a_only, b_only, n)`: images only A gets right, only B, and all of them."""
    right_a, right_b = np.asarray(right_a), np.asarray(right_b)
    if right_a.dtype != bool or right_b.dtype != bool or right_a.shape != right_b.shape:
        raise ValueError(
            "`right_a` and `right_b` must be boolean arrays of one shape. Received: "
            f"{right_a.dtype} {right_a.shape} and {right_b.dtype} {right_b.shape}"
        )
    a_only = int(np.sum(right_a & ~right_b))
    b_only = int(np.sum(right_b & ~right_a))
    return a_only, b_only, right_a.size


def mcnemar(right_a, right_b):
    """McNemar's exact test: do two models scored on the same images differ?

    Only the images exactly one model gets right count: `a_only` and
    `b_only`. Under the hypothesis that both models are equally accurate,
    each such image is a fair coin's toss, so the two-sided p-value is

    ```
    p = min(1, 2 * P(Binomial(a_only + b_only, 1/2) <= min(a_only, b_only)))
    ```

    (1 when no image tells them apart).

    Args:
        right_a: `(n,)` booleans: which images model A classifies right.
        right_b: `(n,)` booleans for model B, on the same images.

    Returns:
        `(a_only, b_only, p_value)`.

    >>> mcnemar([True] * 9 + [False], [False] * 9 + [True])
    (9, 1, 0.021484375)
    """
    a_only, b_only, _ = _discordant(right_a, right_b)
    n = a_only + b_only
    tail = sum(math.comb(n, k) for k in range(min(a_only, b_only) + 1))
    return a_only, b_only, min(1.0, 2 * tail / 2**n)


def paired_difference(right_a, right_b, z=1.959964):
    """Accuracy of model A minus that of model B on the same images, with its
    interval.

    Only the images exactly one model gets right move the difference
    (`a_only` and `b_only` of `n` images), and its standard error counts
    their pairing (Agresti, *Categorical Data Analysis*, 10.1):

    ```
    d  = (a_only - b_only) / n
    se = sqrt(a_only + b_only - (a_only - b_only)^2 / n) / n
    interval: d -+ z * se                      (z = 1.96: 95%)
    ```

    Paired, it is much narrower than the two accuracies' own intervals would
    suggest, because the images both models get right or both get wrong
    cancel.

    Args:
        right_a: `(n,)` booleans: which images model A classifies right.
        right_b: `(n,)` booleans for model B, on the same images.
        z: The normal quantile of the interval (1.959964: 95%).

    Returns:
        `(difference, low, high)`, as fractions of the images.

    >>> right_a, right_b = [True] * 10 + [False] * 90, [False] * 100
    >>> [round(v, 4) for v in paired_difference(right_a, right_b)]
    [0.1, 0.0412, 0.1588]
    """
    a_only, b_only, n = _discordant(right_a, right_b)
    if n == 0 or not z > 0:
        raise ValueError(
            f"Needs images and a positive `z`. Received: {n} images, z={z}"
        )
    difference = (a_only - b_only) / n
    spread = z * math.sqrt(a_only + b_only - (a_only - b_only) ** 2 / n) / n
    return difference, difference - spread, difference + spread


class Comparison(NamedTuple):
    """Two models scored on the same images (see `compare`); fractions of them."""

    accuracy_a: float
    interval_a: tuple
    accuracy_b: float
    interval_b: tuple
    a_only: int
    b_only: int
    p_value: float
    difference: float
    difference_interval: tuple

    def passes(self, bound):
        """Whether McNemar's p-value lies below `bound` (a family's, say)."""
        return self.p_value < bound

    def row(self, bound=0.05):
        """One line of a table: each accuracy [95% Wilson interval], A - B in
        points [95% paired interval], `+a_only/-b_only p=...`, and `*` when the
        p-value is below `bound`."""
        low_a, high_a = self.interval_a
        low_b, high_b = self.interval_b
        low, high = self.difference_interval
        mark = "*" if self.passes(bound) else ""
        return (
            f"{self.accuracy_a:6.1%} [{low_a:5.1%}, {high_a:5.1%}]  "
            f"{self.accuracy_b:6.1%} [{low_b:5.1%}, {high_b:5.1%}]  "
            f"{100 * self.difference:+5.1f} [{100 * low:+5.1f}, {100 * high:+5.1f}]  "
            f"+{self.a_only}/-{self.b_only} p={self.p_value:.3g}{mark}"
        )


def compare(right_a, right_b):
    """Everything the tutorial prints about two models on the same images.

    Args:
        right_a: `(n,)` booleans: which images model A classifies right.
        right_b: `(n,)` booleans for model B, on the same images.

    Returns:
        A `Comparison`: each accuracy with its 95% Wilson interval
        (`metrics.binomial_interval`), the images only A and only B get
        right with McNemar's exact p-value (`mcnemar`), and A's accuracy
        minus B's with its 95% paired interval (`paired_difference`).

    >>> result = compare([True] * 9 + [False], [False] * 9 + [True])
    >>> result.accuracy_a, result.a_only, result.b_only, round(result.p_value, 4)
    (0.9, 9, 1, 0.0215)
    >>> result.row().split("  ")[-1]
    '+9/-1 p=0.0215*'
    """
    right_a, right_b = np.asarray(right_a), np.asarray(right_b)
    a_only, b_only, p_value = mcnemar(right_a, right_b)
    difference, low, high = paired_difference(right_a, right_b)
    accuracy_a, accuracy_b = float(right_a.mean()), float(right_b.mean())
    return Comparison(
        accuracy_a,
        tuple(float(v) for v in binomial_interval(accuracy_a, right_a.size)),
        accuracy_b,
        tuple(float(v) for v in binomial_interval(accuracy_b, right_b.size)),
        a_only,
        b_only,
        p_value,
        difference,
        (low, high),
    )


def bonferroni_bound(tests, alpha=0.05):
    """The p-value a test must fall below when `tests` tests answer one
    question: `alpha / tests`, so that all of them together call a
    difference by chance at most `alpha` of the time.

    >>> bonferroni_bound(16)
    0.003125
    """
    if isinstance(tests, bool) or not isinstance(tests, int) or tests < 1:
        raise ValueError(f"`tests` must be a positive int. Received: tests={tests!r}")
    if not 0 < alpha < 1:
        raise ValueError(f"`alpha` must lie in (0, 1). Received: alpha={alpha!r}")
    return alpha / tests


def seed_verdict(comparisons, bound):
    """The verdict on one claim ("A beats B") tested once per seed.

    - `"supported"`: A ahead in every seed, and past `bound` in every seed;
    - `"suggestive"`: A ahead in every seed, past `bound` in some of them,
      or in none but with more than one seed;
    - `"contradicted"`: B ahead past `bound` in at least one seed;
    - `"not seen"`: anything else (the seeds disagree in sign, or one seed
      that does not pass).

    Args:
        comparisons: One `Comparison` (from `compare`) per seed, A the model
            the claim favours.
        bound: The family's bound (`bonferroni_bound`).

    Returns:
        One of the four strings above.

    >>> ahead = compare([True] * 30, [False] * 10 + [True] * 20)
    >>> behind = compare([True] * 29 + [False], [True] * 30)
    >>> seed_verdict([ahead, ahead, ahead], 0.01), seed_verdict([ahead, behind], 0.01)
    ('supported', 'not seen')
    """
    comparisons = list(comparisons)
    if not comparisons or not all(isinstance(c, Comparison) for c in comparisons):
        raise ValueError(
            "`comparisons` must be one or more `Comparison`s (see `compare`). "
            f"Received: {comparisons!r}"
        )
    if any(c.difference < 0 and c.passes(bound) for c in comparisons):
        return "contradicted"
    if all(c.difference > 0 for c in comparisons):
        if all(c.passes(bound) for c in comparisons):
            return "supported"
        if len(comparisons) > 1:
            return "suggestive"
    return "not seen"
