"""What a trained model's outputs reveal, measured: the analyses of notebook 07.

Plain NumPy on arrays a model has already produced (`predict`, `analyze`),
kept beside the notebooks rather than in `capsules_keras` because notebook 07
is their one user (McNemar's test, which several notebooks use, is
`capsules_keras.diagnostics.mcnemar`):

- `linear_probe` and `r_squared`: how much of a known quantity (a digit's
  shift, its angle) a linear read-out recovers from a network's features, on
  images the read-out was not fitted on;
- `auroc` and `roc_curve`: how well a score (a reconstruction error, one
  minus the top softmax probability) ranks images that should be flagged
  above the others;
- `bootstrap_interval`: a percentile interval of any of these, resampling
  the images;
- `pixel_correlation`: how closely one image (a reconstruction) matches
  another (the digit it should redraw), image by image.
"""

import numpy as np

from capsules_keras._checks import check_positive_int

#: The ridge weights `linear_probe` chooses from by default.
RIDGES = (1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0)


def _matrix(name, values):
    values = np.asarray(values, dtype=np.float64)
    if values.ndim == 1:
        values = values[:, None]
    if values.ndim != 2 or len(values) == 0:
        raise ValueError(
            f"`{name}` must be a non-empty (n,) or (n, k) array. "
            f"Received: {name}.shape={values.shape}"
        )
    return values


def _ridge_fit(z, t, ridge):
    gram = z.T @ z + ridge * len(z) * np.eye(z.shape[1])
    return np.linalg.solve(gram, z.T @ (t - t.mean(0))), t.mean(0)


def linear_probe(train_features, train_targets, test_features, ridge=RIDGES):
    """A ridge regression fitted on one set of images, applied to another.

    ```
    z = (features - mean_train) / std_train        # per feature
    w = (Z^T Z + ridge * n I)^-1 Z^T (t - mean_t)  # on the training images
    predictions = z_test w + mean_t
    ```

    Args:
        train_features: `(n, d)` features of the images the probe is fitted on.
        train_targets: `(n,)` or `(n, k)` what it should read out (e.g. the
            shift in pixels).
        test_features: `(m, d)` features of held-out images.
        ridge: Weight of the penalty on `w`, relative to `n` (>= 0); features
            are standardised first, so it means the same for every network.
            A sequence of weights: the one with the highest mean `r_squared`
            on the last quarter of the training images, when the probe is
            fitted on the other three quarters (the test images are never
            seen), then refitted on all of them. The default tries
            `RIDGES`, so that 16 features and 784 are each read out at
            their best.

    Returns:
        `(m, k)` float64 predictions for the held-out images.
    """
    x = _matrix("train_features", train_features)
    t = _matrix("train_targets", train_targets)
    x_test = _matrix("test_features", test_features)
    if len(x) != len(t):
        raise ValueError(
            "`train_features` and `train_targets` need one row per image. "
            f"Received: {len(x)} and {len(t)} rows"
        )
    if x_test.shape[1] != x.shape[1]:
        raise ValueError(
            "`test_features` must have as many features as `train_features`. "
            f"Received: {x_test.shape[1]} and {x.shape[1]}"
        )
    ridges = np.atleast_1d(np.asarray(ridge, dtype=np.float64))
    if ridges.ndim != 1 or len(ridges) == 0 or not np.all(ridges >= 0):
        raise ValueError(
            f"`ridge` must be >= 0 (or a list of such). Received: {ridge!r}"
        )
    if len(ridges) > 1 and len(x) < 8:
        raise ValueError(
            f"Choosing among ridges needs >= 8 training rows. Received: {len(x)}"
        )
    mean, std = x.mean(0), x.std(0)
    std[std == 0] = 1.0  # a constant feature carries nothing; keep it at 0
    z, z_test = (x - mean) / std, (x_test - mean) / std
    if len(ridges) > 1:
        split = len(z) - len(z) // 4
        scores = []
        for value in ridges:
            weights, offset = _ridge_fit(z[:split], t[:split], value)
            scores.append(r_squared(t[split:], z[split:] @ weights + offset).mean())
        ridges = ridges[[int(np.argmax(scores))]]
    weights, offset = _ridge_fit(z, t, ridges[0])
    return z_test @ weights + offset


def r_squared(targets, predictions):
    """The share of the targets' variance the predictions explain, per column.

    `1 - sum((t - p)^2) / sum((t - mean(t))^2)`: 1 for a perfect read-out, 0
    for one that always predicts the mean, negative for a worse one.

    Args:
        targets: `(n,)` or `(n, k)` true values (not all equal in a column).
        predictions: Predictions of the same shape.

    Returns:
        `(k,)` float64.

    >>> r_squared([0.0, 1.0, 2.0], [0.0, 1.0, 2.0])
    array([1.])
    """
    t = _matrix("targets", targets)
    p = _matrix("predictions", predictions)
    if t.shape != p.shape:
        raise ValueError(
            "`targets` and `predictions` must have the same shape. "
            f"Received: {t.shape} and {p.shape}"
        )
    spread = ((t - t.mean(0)) ** 2).sum(0)
    if np.any(spread == 0):
        raise ValueError("Every column of `targets` must vary; one is constant.")
    return 1.0 - ((t - p) ** 2).sum(0) / spread


def _scores(name, values):
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 1 or len(values) == 0 or not np.all(np.isfinite(values)):
        raise ValueError(
            f"`{name}` must be a non-empty 1-D array of finite scores. "
            f"Received: shape {values.shape}"
        )
    return values


def auroc(positive, negative):
    """Area under the ROC curve: P(a positive's score > a negative's).

    The Mann-Whitney statistic: over every (positive, negative) pair, 1 if
    the positive scores higher, 1/2 for a tie, 0 otherwise, averaged. 0.5 is
    chance, 1 a perfect detector.

    Args:
        positive: `(n,)` scores of the images that should be flagged (e.g.
            wrongly classified digits, or images from another dataset).
        negative: `(m,)` scores of the others.

    Returns:
        A float in [0, 1].

    >>> auroc([0.9, 0.8], [0.1, 0.8])
    0.875
    """
    positive, negative = _scores("positive", positive), _scores("negative", negative)
    values = np.concatenate([positive, negative])
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    ranks = (np.cumsum(counts) - (counts - 1) / 2)[inverse]  # ties: average rank
    n, m = len(positive), len(negative)
    return float((ranks[:n].sum() - n * (n + 1) / 2) / (n * m))


def roc_curve(positive, negative):
    """False- and true-positive rates at every threshold, from strict to none.

    Returns:
        `(false_positive_rate, true_positive_rate)`, each `(thresholds + 1,)`
        from `(0, 0)` to `(1, 1)`; the area under them (by trapezoids) is `auroc`.
    """
    positive, negative = _scores("positive", positive), _scores("negative", negative)
    thresholds = np.unique(np.concatenate([positive, negative]))[::-1]

    def share_at_or_above(scores):  # by sorting: no (thresholds, n) matrix
        below = np.searchsorted(np.sort(scores), thresholds, side="left")
        return (len(scores) - below) / len(scores)

    tpr, fpr = share_at_or_above(positive), share_at_or_above(negative)
    return np.concatenate([[0.0], fpr]), np.concatenate([[0.0], tpr])


def bootstrap_interval(statistic, *samples, resamples=1000, confidence=0.95, seed=0):
    """Percentile bootstrap interval of `statistic(*samples)`.

    Each sample is resampled with replacement along its first axis, on its
    own (e.g. the positives and the negatives of an AUROC); the columns of
    one sample move together, so a statistic of two models scored on the
    same images (their columns) gets a paired interval.

    Args:
        statistic: A function of the samples returning a number.
        *samples: Arrays with one row per image.
        resamples: Bootstrap resamples (>= 1).
        confidence: Coverage, in (0, 1).
        seed: Seed of the resampling: the same seed, the same interval.

    Returns:
        `(low, high)` floats.
    """
    check_positive_int("resamples", resamples)
    if not 0 < confidence < 1:
        raise ValueError(
            f"`confidence` must be in (0, 1). Received: confidence={confidence!r}"
        )
    if not samples:
        raise ValueError("`bootstrap_interval` needs at least one sample.")
    samples = [np.asarray(sample) for sample in samples]
    rng = np.random.default_rng(seed)
    values = [
        statistic(*(s[rng.integers(0, len(s), len(s))] for s in samples))
        for _ in range(resamples)
    ]
    tail = (1 - confidence) / 2
    low, high = np.quantile(values, [tail, 1 - tail])
    return float(low), float(high)


def pixel_correlation(images, references):
    """Pearson's correlation of each image with its reference, over its pixels.

    1 when an image is its reference up to brightness and contrast, 0 when
    the two are unrelated: e.g. a digit redrawn from its capsule against the
    digit alone as it was placed.

    Args:
        images: `(n, ...)` images.
        references: Images of the same shape.

    Returns:
        `(n,)` float64.

    Raises:
        ValueError: the shapes differ, or an image or reference is constant
            (its correlation is undefined).

    >>> pixel_correlation([[0.0, 1.0, 2.0]], [[1.0, 3.0, 5.0]])
    array([1.])
    """
    a = np.asarray(images, dtype=np.float64)
    b = np.asarray(references, dtype=np.float64)
    if a.shape != b.shape or a.ndim < 2 or len(a) == 0:
        raise ValueError(
            "`images` and `references` must be non-empty arrays of the same "
            f"shape (n, ...). Received: {a.shape} and {b.shape}"
        )
    a = a.reshape(len(a), -1)
    b = b.reshape(len(b), -1)
    a = a - a.mean(axis=1, keepdims=True)
    b = b - b.mean(axis=1, keepdims=True)
    spread = np.sqrt((a**2).sum(axis=1) * (b**2).sum(axis=1))
    if np.any(spread == 0):
        constant = int(np.flatnonzero(spread == 0)[0])
        raise ValueError(
            "Every image and reference must vary: their correlation is "
            f"undefined otherwise. Received: a constant one at row {constant}"
        )
    return (a * b).sum(axis=1) / spread
