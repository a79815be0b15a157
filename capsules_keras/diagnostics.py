"""Whether two models scored on the same images differ: McNemar's exact test.

Plain NumPy on what models have already predicted: `mcnemar` counts the
images only one of two models gets right and gives the test's p-value.

The probes, detector scores, bootstrap intervals and pixel correlations of
notebook 07 live beside the notebooks, in `notebooks/analysis.py`.
"""

import math

import numpy as np


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
    right_a, right_b = np.asarray(right_a), np.asarray(right_b)
    if right_a.dtype != bool or right_b.dtype != bool or right_a.shape != right_b.shape:
        raise ValueError(
            "`right_a` and `right_b` must be boolean arrays of one shape. Received: "
            f"{right_a.dtype} {right_a.shape} and {right_b.dtype} {right_b.shape}"
        )
    a_only = int(np.sum(right_a & ~right_b))
    b_only = int(np.sum(right_b & ~right_a))
    n = a_only + b_only
    tail = sum(math.comb(n, k) for k in range(min(a_only, b_only) + 1))
    return a_only, b_only, min(1.0, 2 * tail / 2**n)
