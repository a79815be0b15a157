"""Figures of what the digit capsules hold and what the decoder makes of them.

Reconstructions (of the prediction, or from every class's capsule), PCA
projections and nearest neighbours of capsule features, a grid of digits,
and the digits decoded as single capsule dimensions are nudged.
"""

import numpy as np
from matplotlib.figure import Figure

from capsules_keras.plots._common import _image


def plot_reconstructions(images, reconstructions, labels=None, predictions=None):
    """Digits (top row) above their reconstructions (bottom row).

    Args:
        images: `(n, height, width, channels)` inputs.
        reconstructions: The decoder's outputs for them, same shape.
        labels: Optional true labels (numbers or class names), shown above
            the inputs.
        predictions: Optional predicted labels, shown above the reconstructions.

    Returns:
        A Figure with `2 * n` image axes.
    """
    n = len(images)
    fig = Figure(figsize=(1.1 * n, 2.6), layout="constrained")
    axes = fig.subplots(2, n, squeeze=False)
    for k in range(n):
        _image(axes[0, k], images[k], None if labels is None else f"label {labels[k]}")
        title = None if predictions is None else f"pred {predictions[k]}"
        _image(axes[1, k], reconstructions[k], title)
    axes[0, 0].set_ylabel("input")
    axes[1, 0].set_ylabel("reconstruction")
    return fig


def plot_class_reconstructions(images, reconstructions, labels=None, lengths=None):
    """Each digit next to its reconstruction from every class's capsule.

    Args:
        images: `(n, height, width, channels)` digits.
        reconstructions: `(n, num_classes, height, width, channels)`: digit
            `k` decoded from the capsule of class `j` (all others masked).
        labels: Optional true labels `(n,)`; their column is framed in green.
        lengths: Optional `(n, num_classes)` lengths `|v_j|` of the capsules
            the reconstructions were decoded from, written above each tile
            (`"|v|=0.68"`, under the `"as j"` header on the first row).

    Returns:
        A Figure with `n * (1 + num_classes)` axes: one row per digit, the
        input first.
    """
    reconstructions = np.asarray(reconstructions)
    n, num_classes = reconstructions.shape[:2]
    if lengths is not None:
        lengths = np.asarray(lengths, dtype=float)
        if lengths.shape != (n, num_classes):
            raise ValueError(
                "`lengths` must have shape (n, num_classes) = "
                f"{(n, num_classes)}. Received: lengths.shape={lengths.shape}"
            )
    row_height = 0.8 if lengths is None else 1.0  # room for the length line
    fig = Figure(
        figsize=(0.75 * (num_classes + 1), row_height * n + 0.3),
        layout="constrained",
    )
    axes = fig.subplots(n, num_classes + 1, squeeze=False)
    for k in range(n):
        _image(axes[k, 0], images[k], "input" if k == 0 else None)
        for j in range(num_classes):
            ax = axes[k, j + 1]
            lines = [f"as {j}"] if k == 0 else []
            if lengths is not None:
                lines.append(f"|v|={lengths[k, j]:.2f}")
            _image(ax, reconstructions[k, j], "\n".join(lines) if lines else None)
            if labels is not None and int(labels[k]) == j:
                for spine in ax.spines.values():
                    spine.set_color("tab:green")
                    spine.set_linewidth(2.5)
    return fig


def pca_2d(features):
    """Projects rows onto their first two principal components (NumPy SVD).

    Args:
        features: `(n, d)` array, `n >= 2`, `d >= 2`.

    Returns:
        `(projected, explained)`: the `(n, 2)` coordinates and the fraction of
        the variance each of the two components explains.
    """
    features = np.asarray(features, dtype=float)
    centered = features - features.mean(axis=0)
    _, singular, components = np.linalg.svd(centered, full_matrices=False)
    variance = singular**2
    explained = variance[:2] / max(variance.sum(), np.finfo(float).tiny)
    return centered @ components[:2].T, explained


def plot_capsule_pca(features, labels):
    """2-D PCA projection of capsule features, coloured by class.

    Args:
        features: `(n, d)` features, e.g. flattened digit capsules.
        labels: `(n,)` integer classes.

    Returns:
        A Figure with one axis.
    """
    labels = np.asarray(labels, dtype=int)
    projected, explained = pca_2d(features)
    fig = Figure(figsize=(5.5, 4.5), layout="constrained")
    ax = fig.subplots()
    for label in np.unique(labels):
        rows = labels == label
        ax.scatter(*projected[rows].T, s=6, color=f"C{label % 10}", label=str(label))
    ax.set_xlabel(f"PC 1 ({explained[0]:.0%} of the variance)")
    ax.set_ylabel(f"PC 2 ({explained[1]:.0%} of the variance)")
    ax.legend(title="class", fontsize=7, markerscale=2, loc="best")
    ax.set_title("Capsule features, PCA projection")
    return fig


def plot_nearest_neighbours(queries, neighbours, query_labels=None, labels=None):
    """Query images (first column) next to their nearest neighbours.

    Args:
        queries: `(q, height, width, channels)` images.
        neighbours: `(q, k, height, width, channels)`: the `k` neighbours of
            each query, nearest first.
        query_labels: Optional `(q,)` labels shown above the queries.
        labels: Optional `(q, k)` labels shown above the neighbours; with
            `query_labels` too, in green where a neighbour's label is its
            query's and in red where it is not.

    Returns:
        A Figure with `q * (k + 1)` image axes, row by row: each query, then
        its neighbours.
    """
    num_queries, k = np.shape(neighbours)[:2]
    fig = Figure(figsize=(0.9 * (k + 1), 1.0 * num_queries), layout="constrained")
    axes = fig.subplots(num_queries, k + 1, squeeze=False)
    for q in range(num_queries):
        title = None if query_labels is None else f"query {query_labels[q]}"
        _image(axes[q, 0], queries[q], title)
        for n in range(k):
            _image(
                axes[q, n + 1],
                neighbours[q][n],
                None if labels is None else str(labels[q][n]),
            )
            if labels is not None and query_labels is not None:
                same = labels[q][n] == query_labels[q]
                axes[q, n + 1].title.set_color("green" if same else "red")
    return fig


def plot_digit_grid(images, titles=None, columns=10):
    """Images in a grid, row by row, with optional titles.

    Args:
        images: `(n, height, width, channels)` images in [0, 1].
        titles: Optional `n` strings, shown above the images.
        columns: Images per row.

    Returns:
        A Figure with one axis per image.
    """
    n = len(images)
    if n == 0:
        raise ValueError("plot_digit_grid needs at least one image. Received: 0")
    columns = min(columns, n)
    rows = -(-n // columns)
    fig = Figure(figsize=(1.0 * columns, 1.15 * rows), layout="constrained")
    axes = fig.subplots(rows, columns, squeeze=False).ravel()
    for k, ax in enumerate(axes):
        if k < n:
            _image(ax, images[k], None if titles is None else titles[k])
        else:
            ax.remove()
    return fig


def _mosaics(reconstructions):
    """Perturbation mosaics as float `(digits, ...)`: one digit gets the axis."""
    reconstructions = np.asarray(reconstructions, dtype=float)
    return reconstructions[None] if reconstructions.ndim == 5 else reconstructions


def rank_dimensions(reconstructions):
    """Capsule dimensions ordered by how much nudging them changes the digit.

    ```
    change[k, d] = mean |reconstructions[k, d, -1] - reconstructions[k, d, 0]|
    order[k] = dimensions of digit k by decreasing change[k]
    ```

    Args:
        reconstructions: `(digits, dims, steps, height, width, channels)`
            mosaics as for `plot_dimension_perturbations` (or without the
            leading `digits` for one digit): row `d` is the digit decoded
            with dimension `d` nudged over the steps.

    Returns:
        `(order, change)`, both `(digits, dims)`: per digit, the dimension
        indices from the largest change to the smallest (ties keep the lower
        index first), and the mean absolute pixel difference between the
        last and the first step of each dimension (in dimension order).
    """
    reconstructions = _mosaics(reconstructions)
    if reconstructions.ndim != 6 or reconstructions.shape[2] < 2:
        raise ValueError(
            "`reconstructions` must have shape (digits, dims, steps, height, "
            "width, channels) with at least 2 steps. Received: "
            f"reconstructions.shape={reconstructions.shape}"
        )
    # (digits, dims): mean over the pixels of |last step - first step|.
    change = np.abs(reconstructions[:, :, -1] - reconstructions[:, :, 0]).mean(
        axis=(2, 3, 4)
    )
    order = np.argsort(-change, axis=-1, kind="stable")
    return order, change


def plot_dimension_perturbations(reconstructions, deltas, titles=None, dimensions=None):
    """Decoded digits as single capsule dimensions are nudged (paper, Fig. 4).

    Args:
        reconstructions: `(n, dims, steps, height, width, channels)` (or
            without the leading `n` for one digit): row `d`, column `s` is
            decoded from the winning capsule with `deltas[s]` added to its
            dimension `d`.
        deltas: The `steps` amounts added.
        titles: Optional `n` titles, one per digit.
        dimensions: Optional dimensions to draw, in this order (e.g. the
            first columns of `rank_dimensions`' order): a sequence of `k`
            indices for every digit, or `(n, k)` indices, one row per digit.
            Only those rows are drawn, larger, each labelled `"dim d"`.

    Returns:
        A Figure with one axis per digit, each a `dims x steps` mosaic (or
        `k x steps` with `dimensions`).
    """
    reconstructions = _mosaics(reconstructions)
    n, dims, steps, height, width = reconstructions.shape[:5]
    if dimensions is None:
        rows = np.tile(np.arange(dims), (n, 1))  # (n, dims)
        tile_size = 0.3
    else:
        rows = np.asarray(dimensions)
        if rows.ndim == 1:
            rows = np.tile(rows, (n, 1))  # (n, k)
        if (
            rows.ndim != 2
            or rows.shape[0] != n
            or rows.shape[1] == 0
            or not np.issubdtype(rows.dtype, np.integer)
            or rows.min() < 0
            or rows.max() >= dims
        ):
            raise ValueError(
                f"`dimensions` must be integers in [0, {dims}), a sequence or one "
                f"row per digit ({n}). Received: dimensions={np.asarray(dimensions)}"
            )
        tile_size = 0.55
    shown = rows.shape[1]
    gap = 2
    fig = Figure(
        figsize=(
            (tile_size + 0.03) * steps * n + 0.6,
            tile_size * shown + 0.8,
        ),
        layout="constrained",
    )
    axes = fig.subplots(1, n, squeeze=False)[0]
    for k, ax in enumerate(axes):
        # Tiles separated by white lines: (rows * (H + gap), steps * (W + gap)).
        canvas = np.ones((shown * (height + gap) - gap, steps * (width + gap) - gap))
        for r, d in enumerate(rows[k]):
            for s in range(steps):
                top, left = r * (height + gap), s * (width + gap)
                tile = reconstructions[k, d, s].mean(axis=-1)  # (H, W)
                canvas[top : top + height, left : left + width] = tile
        ax.imshow(canvas, cmap="gray", vmin=0, vmax=1)
        ax.set_xticks(np.arange(steps) * (width + gap) + width / 2)
        ax.set_xticklabels([f"{delta:+.2f}" for delta in deltas], rotation=90)
        ax.set_yticks(np.arange(shown) * (height + gap) + height / 2)
        if dimensions is None:
            ax.set_yticklabels([str(d) for d in range(dims)] if k == 0 else [])
        else:  # each digit may show other dimensions: label every mosaic
            ax.set_yticklabels([f"dim {d}" for d in rows[k]])
        ax.tick_params(labelsize=7, length=0)
        ax.set_xlabel("added to the dimension")
        if titles is not None:
            ax.set_title(titles[k], fontsize=9)
    axes[0].set_ylabel("capsule dimension")
    return fig
