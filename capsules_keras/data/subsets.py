"""Class-balanced, seeded subsets of a dataset's examples."""

import numpy as np


def balanced_subset(labels, size, seed=0):
    """Indices of a seeded subset with (as nearly as possible) equal classes.

    Each of the `k` classes present gets `size // k` examples, and the first
    `size % k` classes one more; a class with fewer examples gives all it
    has and the rest is drawn from the others. The same labels, size and
    seed always give the same indices, in a shuffled order.

    Args:
        labels: Integer labels `(n,)`.
        size: How many indices to return, at most `n`.
        seed: Seed of the draw.

    Returns:
        An int array of `min(size, n)` distinct indices into `labels`.

    >>> idx = balanced_subset(np.repeat([0, 1, 2], [50, 30, 20]), 30)
    >>> np.bincount(np.repeat([0, 1, 2], [50, 30, 20])[idx]).tolist()
    [10, 10, 10]
    """
    labels = np.asarray(labels)
    rng = np.random.default_rng(seed)
    pools = [rng.permutation(np.flatnonzero(labels == c)) for c in np.unique(labels)]
    size = min(int(size), len(labels))
    counts = np.array([len(p) for p in pools])
    taken = np.zeros(len(pools), dtype=int)
    # Water-filling: every class with examples left gets the same number more,
    # until the smallest of them runs out or `size` is reached; a last
    # remainder of fewer than one per class goes to the first classes.
    while taken.sum() < size:
        open_classes = np.flatnonzero(taken < counts)
        left = size - taken.sum()
        step = min(left // len(open_classes), (counts - taken)[open_classes].min())
        if step:
            taken[open_classes] += step
        else:
            taken[open_classes[:left]] += 1
    chosen = np.concatenate([p[:t] for p, t in zip(pools, taken, strict=True)])
    return rng.permutation(chosen)
