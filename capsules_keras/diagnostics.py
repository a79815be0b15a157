"""Whether two models scored on the same images differ, and by how much.

Plain NumPy on what models have already predicted: `mcnemar` counts the
images only one of two models gets right and gives the test's p-value;
`paired_difference` gives the difference of the two accuracies with its
interval, so that a test that finds nothing still says how large a
difference the images leave open.

The probes, detector scores, bootstrap intervals and pixel correlations of
notebook 07 live beside the notebooks, in `notebooks/analysis.py`.
"""

import math

import numpy as np


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
