"""Figures of images of two overlapping digits (MultiMNIST).

The two reconstructions of a pair in two colours, above the pair.
"""

import numpy as np
from matplotlib.figure import Figure

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


def plot_overlapping_digits(images, reconstructions, labels, predictions=None):
    """Overlapping digits above their per-digit reconstructions (paper, Fig. 5).

    Args:
        images: `(n, height, width, 1)` images of two overlaid digits.
        reconstructions: `(n, 2, height, width, 1)`: each digit decoded from
            its own capsule (the two longest capsules, or the true ones).
        labels: `(n, 2)` true classes.
        predictions: `(n, 2)` predicted classes, in the order of
            `reconstructions` (red: the first, green: the second); None when
            the reconstructions come from the capsules of the true classes,
            in the order of `labels`.

    Returns:
        A Figure with `2 * n` axes: inputs titled "L: a, b" (labels) above the
        two reconstructions in red and green, titled "R: c, d" (the classes
        read, their capsules decoded; a title in red marks a pair whose
        predicted set differs from the true one), or, without predictions,
        untitled and labelled as decoded from the true classes.
    """
    n = len(images)
    if n == 0:
        raise ValueError("plot_overlapping_digits needs an image. Received: 0")
    coloured = overlay_colors(reconstructions)
    fig = Figure(figsize=(1.2 * max(n, 2), 2.9), layout="constrained")
    axes = fig.subplots(2, n, squeeze=False)
    for k in range(n):
        true = sorted(int(c) for c in labels[k])
        _image(axes[0, k], images[k], "L: " + ", ".join(map(str, true)))
        if predictions is None:
            _image(axes[1, k], coloured[k])
            continue
        predicted = [int(c) for c in predictions[k]]
        _image(axes[1, k], coloured[k], "R: " + ", ".join(map(str, predicted)))
        if sorted(predicted) != true:
            axes[1, k].title.set_color("tab:red")
    axes[0, 0].set_ylabel("input")
    if predictions is None:
        axes[1, 0].set_ylabel("from the true\nclasses")
        fig.suptitle("Each digit reconstructed from the capsule of its true class")
    else:
        axes[1, 0].set_ylabel("reconstructions")
        fig.suptitle("Each digit reconstructed from its own capsule (red, green)")
    return fig
