"""Figures of digits and of what the decoder makes of the digit capsules.

Digits above their reconstructions, and a grid of digits.
"""

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
