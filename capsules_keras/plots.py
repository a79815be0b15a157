"""Matplotlib figures shared by the training CLI and the notebooks.

Every function returns a `matplotlib.figure.Figure` built without pyplot, so
nothing is shown or kept in global state: save it with `fig.savefig(path)` or
let Jupyter display it.
"""

import numpy as np
from matplotlib.figure import Figure


def confusion_matrix(y_true, y_pred, num_classes):
    """Counts `m[t, p]` of samples of class `t` predicted as `p`."""
    y_true = np.asarray(y_true, dtype=int)
    y_pred = np.asarray(y_pred, dtype=int)
    counts = np.bincount(y_true * num_classes + y_pred, minlength=num_classes**2)
    return counts.reshape(num_classes, num_classes)


def _image(ax, image, title=None):
    image = np.asarray(image)
    ax.imshow(
        image[..., 0] if image.shape[-1] == 1 else image, cmap="gray", vmin=0, vmax=1
    )
    ax.set_xticks([])
    ax.set_yticks([])
    if title is not None:
        ax.set_title(title, fontsize=8)


def plot_training_curves(history):
    """Loss and accuracy per epoch, with validation curves when present.

    Args:
        history: A dict of per-epoch lists (`History.history`, or the columns
            of `history.csv`) with `loss` and optionally `accuracy`,
            `val_loss`, `val_accuracy`.

    Returns:
        A Figure with one axis for the loss and one for the accuracy.
    """
    fig = Figure(figsize=(9, 3.5), layout="constrained")
    loss_ax, acc_ax = fig.subplots(1, 2)
    epochs = np.arange(1, len(history["loss"]) + 1)
    for ax, key, label in ((loss_ax, "loss", "loss"), (acc_ax, "accuracy", "accuracy")):
        for prefix, style in (("", "-o"), ("val_", "--s")):
            if prefix + key in history:
                name = "test" if prefix else "train"
                ax.plot(epochs, history[prefix + key], style, label=name, markersize=3)
        ax.set_xlabel("epoch")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend()
    loss_ax.set_yscale("log")
    fig.suptitle("Training curves")
    return fig


def plot_reconstructions(images, reconstructions, labels=None, predictions=None):
    """Digits (top row) above their reconstructions (bottom row).

    Args:
        images: `(n, height, width, channels)` inputs.
        reconstructions: The decoder's outputs for them, same shape.
        labels: Optional true labels, shown above the digits.
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


def plot_confusion_matrix(y_true, y_pred, num_classes=10):
    """Confusion matrix of counts, with the counts written in the cells.

    Returns:
        A Figure with the matrix axis and its colour bar.
    """
    counts = confusion_matrix(y_true, y_pred, num_classes)
    fig = Figure(figsize=(5.5, 4.8), layout="constrained")
    ax = fig.subplots()
    shown = ax.imshow(np.log1p(counts), cmap="Blues")
    for t in range(num_classes):
        for p in range(num_classes):
            if counts[t, p]:
                color = "white" if counts[t, p] > counts.max() / 2 else "black"
                ax.text(
                    p,
                    t,
                    counts[t, p],
                    ha="center",
                    va="center",
                    fontsize=7,
                    color=color,
                )
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    ax.set_xticks(range(num_classes))
    ax.set_yticks(range(num_classes))
    accuracy = np.trace(counts) / max(counts.sum(), 1)
    ax.set_title(f"Confusion matrix (accuracy {accuracy:.2%})")
    fig.colorbar(shown, ax=ax, label="log(1 + count)")
    return fig
