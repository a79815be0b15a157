"""Figures of images of two overlapping digits (MultiMNIST).

The two reconstructions of a pair in two colours, how the pairs are made,
and how much their digits overlap.
"""

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from capsules_keras.plots._common import _image


def overlay_colors(reconstructions, colors=((1.0, 0.2, 0.2), (0.2, 0.9, 0.2))):
    """RGB images of several single-channel reconstructions, one colour each.

    Args:
        reconstructions: `(n, k, height, width, 1)` values in [0, 1].
        colors: `k` RGB colours.

    Returns:
        `(n, height, width, 3)` in [0, 1]: each reconstruction times its
        colour, added and clipped.
    """
    reconstructions = np.asarray(reconstructions, dtype=float)[..., 0]
    colors = np.asarray(colors, dtype=float)[: reconstructions.shape[1]]
    rgb = np.einsum("nkhw,kc->nhwc", reconstructions, colors)
    return np.clip(rgb, 0, 1)


def plot_overlapping_digits(images, reconstructions, labels, predictions):
    """Overlapping digits above their per-digit reconstructions (paper, Fig. 5).

    Args:
        images: `(n, height, width, 1)` images of two overlaid digits.
        reconstructions: `(n, 2, height, width, 1)`: each digit decoded from
            its own capsule (the two longest capsules, or the true ones).
        labels: `(n, 2)` true classes.
        predictions: `(n, 2)` predicted classes, in the order of
            `reconstructions` (red: the first, green: the second).

    Returns:
        A Figure with `2 * n` axes: inputs titled "L: a, b" (labels) above the
        two reconstructions in red and green titled "R: c, d"; a title in red
        marks a pair whose predicted set differs from the true one.
    """
    n = len(images)
    if n == 0:
        raise ValueError("plot_overlapping_digits needs an image. Received: 0")
    coloured = overlay_colors(reconstructions)
    fig = Figure(figsize=(1.2 * max(n, 2), 2.9), layout="constrained")
    axes = fig.subplots(2, n, squeeze=False)
    for k in range(n):
        true = sorted(int(c) for c in labels[k])
        predicted = [int(c) for c in predictions[k]]
        _image(axes[0, k], images[k], "L: " + ", ".join(map(str, true)))
        _image(axes[1, k], coloured[k], "R: " + ", ".join(map(str, predicted)))
        if sorted(predicted) != true:
            axes[1, k].title.set_color("tab:red")
    axes[0, 0].set_ylabel("input")
    axes[1, 0].set_ylabel("reconstructions")
    fig.suptitle("Each digit reconstructed from its own capsule (red, green)")
    return fig


def _ink_box(image, threshold=0.0):
    """`(top, left, bottom, right)` of the pixels above `threshold`, or None."""
    ink = np.asarray(image).max(axis=-1) > threshold  # (height, width)
    rows, cols = np.flatnonzero(ink.any(axis=1)), np.flatnonzero(ink.any(axis=0))
    if not len(rows):
        return None
    return rows[0], cols[0], rows[-1] + 1, cols[-1] + 1


def plot_pair_construction(
    digits,
    placed,
    images,
    labels,
    shifts=None,
    colors=((1.0, 0.2, 0.2), (0.2, 0.9, 0.2)),
):
    """How MultiMNIST images are made: two digits, each placed, then overlaid.

    Args:
        digits: `(n, 2, height, width, channels)` the two digits of each pair
            as they come in the dataset.
        placed: `(n, 2, S, S, channels)` each digit alone on the larger
            canvas, shifted.
        images: `(n, S, S, channels)` the overlaid pairs, `min(a + b, 1)`.
        labels: `(n, 2)` the two classes.
        shifts: Optional `(n, 2, 2)` integer (rows, columns) shifts, shown
            above the placed digits.
        colors: RGB colours of the first and second digit in the last column.

    Returns:
        A Figure with one row of six axes per pair: both digits, both placed
        on the canvas, the overlay, and the overlay in colour (each digit in
        its colour, both where they overlap) with each digit's bounding box.
    """
    digits, placed = np.asarray(digits), np.asarray(placed)
    n = len(images)
    if n == 0:
        raise ValueError("plot_pair_construction needs a pair. Received: 0")
    coloured = overlay_colors(placed, colors)
    fig = Figure(figsize=(7.2, 1.3 * n + 0.3), layout="constrained")
    axes = fig.subplots(n, 6, squeeze=False)
    for k in range(n):
        a, b = (int(c) for c in labels[k])
        for d, label in enumerate((a, b)):
            _image(axes[k, d], digits[k, d], f"digit {label}")
            where = "" if shifts is None else " ({:+d}, {:+d})".format(*shifts[k][d])
            _image(axes[k, 2 + d], placed[k, d], f"{label} placed{where}")
        _image(axes[k, 4], images[k], f"overlay {a}, {b}")
        _image(axes[k, 5], coloured[k], "boxes")
        for d in range(2):
            box = _ink_box(placed[k, d])
            if box is not None:
                top, left, bottom, right = box
                axes[k, 5].add_patch(
                    Rectangle(
                        (left - 0.5, top - 0.5),
                        right - left,
                        bottom - top,
                        fill=False,
                        edgecolor=colors[d],
                        linewidth=1.2,
                    )
                )
    fig.suptitle("Two digits of different classes, each shifted, then overlaid")
    return fig


def plot_overlap_histogram(overlaps, bins=20, label="bounding-box overlap"):
    """How much the two digits of each pair overlap, as a histogram.

    Args:
        overlaps: `(n,)` fractions in [0, 1], e.g. from
            `capsules_keras.data.multi_mnist.bounding_box_overlap`.
        bins: Number of equal bins over [0, 1].
        label: What the fractions measure (the x axis).

    Returns:
        A Figure with one axis: the share of pairs in each bin, with dashed
        lines at the mean and the median.
    """
    overlaps = np.asarray(overlaps, dtype=float)
    if overlaps.size == 0:
        raise ValueError("plot_overlap_histogram needs overlaps. Received: 0")
    fig = Figure(figsize=(5, 3), layout="constrained")
    ax = fig.subplots()
    weights = np.full(len(overlaps), 1 / len(overlaps))
    ax.hist(overlaps, bins=bins, range=(0, 1), weights=weights, color="0.6")
    for value, name, color in (
        (overlaps.mean(), "mean", "tab:red"),
        (np.median(overlaps), "median", "tab:blue"),
    ):
        ax.axvline(value, linestyle="--", color=color, label=f"{name} {value:.0%}")
    ax.set_xlim(0, 1)
    ax.set_xlabel(label)
    ax.set_ylabel("share of pairs")
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title(f"Overlap of the two digits in {len(overlaps):,} pairs")
    return fig
