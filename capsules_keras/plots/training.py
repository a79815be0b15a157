"""Figures of how training went and how the trained model does.

Training curves per epoch and the confusion matrix (and its counts).
"""

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator


def confusion_matrix(y_true, y_pred, num_classes):
    """Counts `m[t, p]` of samples of class `t` predicted as `p`."""
    y_true = np.asarray(y_true, dtype=int)
    y_pred = np.asarray(y_pred, dtype=int)
    counts = np.bincount(y_true * num_classes + y_pred, minlength=num_classes**2)
    return counts.reshape(num_classes, num_classes)


def _plot_per_epoch(ax, history, key, label, validation_label):
    """`history[key]` and `history["val_" + key]` (if present) against epochs."""
    epochs = np.arange(1, len(history["loss"]) + 1)
    for prefix, style in (("", "-o"), ("val_", "--s")):
        if prefix + key in history:
            name = validation_label if prefix else "train"
            ax.plot(epochs, history[prefix + key], style, label=name, markersize=3)
    ax.set_xlabel("epoch")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # no epoch 1.5
    ax.set_ylabel(label)
    ax.grid(alpha=0.3)
    if ax.lines:
        ax.legend()


def plot_training_curves(history, validation_label="validation", metric="accuracy"):
    """Loss and accuracy per epoch, with validation curves when present.

    Args:
        history: A dict of per-epoch lists (`History.history`, or the columns
            of `history.csv`) with `loss` and optionally `accuracy`,
            `val_loss`, `val_accuracy`.
        validation_label: Legend of the `val_` curves, e.g. "test" when the
            validation data are the test set.
        metric: The accuracy key of `history`, e.g. `"exact_match"`.

    Returns:
        A Figure with one axis for the loss and one for the accuracy.
    """
    fig = Figure(figsize=(9, 3.5), layout="constrained")
    loss_ax, acc_ax = fig.subplots(1, 2)
    _plot_per_epoch(loss_ax, history, "loss", "loss", validation_label)
    _plot_per_epoch(acc_ax, history, metric, metric.replace("_", " "), validation_label)
    loss_ax.set_yscale("log")
    fig.suptitle("Training curves")
    return fig


def plot_confusion_matrix(y_true, y_pred, num_classes=10, class_names=None):
    """Confusion matrix of counts, with the counts written in the cells.

    Args:
        y_true: True integer labels `(n,)`.
        y_pred: Predicted integer labels `(n,)`.
        num_classes: Number of classes (ignored when `class_names` is given).
        class_names: Optional tick labels, one per class.

    Returns:
        A Figure with the matrix axis and its colour bar.
    """
    if class_names is not None:
        num_classes = len(class_names)
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
    if class_names is not None:
        ax.set_xticklabels(class_names, rotation=90)
        ax.set_yticklabels(class_names)
    accuracy = np.trace(counts) / max(counts.sum(), 1)
    ax.set_title(f"Confusion matrix (accuracy {accuracy:.2%})")
    fig.colorbar(shown, ax=ax, label="log(1 + count)")
    return fig
