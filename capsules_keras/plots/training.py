"""Figures of how training went and how the trained model does.

Training curves and loss terms per epoch, the confusion matrix (and its
counts), the most confident mistakes, accuracy under transformed inputs
and the spread of a result over seeds.
"""

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from capsules_keras._checks import check_positive_int
from capsules_keras.metrics import binomial_interval
from capsules_keras.plots._common import _image


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


def plot_loss_terms(
    history,
    terms=("margin_loss", "reconstruction_loss"),
    validation_label="validation",
):
    """The terms of a composite loss per epoch, one axis each (log scale).

    Args:
        history: A dict of per-epoch lists (`History.history`) with `loss`,
            every key of `terms` and optionally their `val_` curves.
        terms: The keys to plot, e.g. `CapsNet`'s unweighted margin and
            reconstruction losses.
        validation_label: Legend of the `val_` curves.

    Returns:
        A Figure with one axis per term.
    """
    missing = [term for term in terms if term not in history]
    if missing:
        raise ValueError(
            f"`history` has no {missing}; it has {sorted(history)}. "
            f"Received: terms={tuple(terms)}"
        )
    fig = Figure(figsize=(4.5 * len(terms), 3.5), layout="constrained")
    axes = fig.subplots(1, len(terms), squeeze=False)[0]
    for ax, term in zip(axes, terms, strict=True):
        _plot_per_epoch(ax, history, term, term.replace("_", " "), validation_label)
        ax.set_yscale("log")
    fig.suptitle("Loss terms (unweighted)")
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


def plot_mistakes(images, labels, lengths, margins=(0.9, 0.1)):
    """Misclassified digits above bar charts of their capsule lengths.

    Args:
        images: `(n, height, width, channels)` digits.
        labels: Their true labels `(n,)`.
        lengths: Their digit capsule lengths `(n, num_classes)`; the longest
            capsule is the prediction.
        margins: Lengths drawn as dotted lines: the margin loss's `m+` and
            `m-`.

    Returns:
        A Figure with `2 * n` axes: the digits (titled with the true and the
        predicted class) above their capsule lengths, the true class's bar
        green and the predicted class's red.
    """
    lengths = np.asarray(lengths, dtype=float)
    n, num_classes = lengths.shape
    if n == 0:
        raise ValueError("plot_mistakes needs at least one image. Received: 0")
    predictions = lengths.argmax(-1)
    fig = Figure(figsize=(1.5 * max(n, 3), 3.2), layout="constrained")
    axes = fig.subplots(2, n, squeeze=False, height_ratios=(1.2, 1))
    for k in range(n):
        true, predicted = int(labels[k]), int(predictions[k])
        _image(axes[0, k], images[k], f"true {true}, pred {predicted}")
        colors = ["0.7"] * num_classes
        colors[true] = "tab:green"
        colors[predicted] = "tab:red"
        ax = axes[1, k]
        ax.bar(np.arange(num_classes), lengths[k], color=colors)
        for margin in margins:
            ax.axhline(margin, linestyle=":", color="black", linewidth=0.8)
        ax.set_ylim(0, 1)
        ax.set_xticks(np.arange(num_classes))
        ax.tick_params(labelsize=6)
        if k:
            ax.set_yticklabels([])
    axes[1, 0].set_ylabel("capsule length")
    fig.suptitle("Most confident mistakes (green: true class, red: predicted)")
    return fig


def plot_robustness(sweeps, num_samples=None):
    """Accuracy of several models as the test images are transformed more.

    Args:
        sweeps: A dict from an axis label (e.g. `"shift (pixels)"`) to
            `(amounts, {model_name: accuracies})`.
        num_samples: Optional number of test images behind each accuracy.
            When given, each curve gets a shaded band: the 95% Wilson score
            interval of `capsules_keras.metrics.binomial_interval`.

    Returns:
        A Figure with one axis per sweep and one curve per model (and, with
        `num_samples`, one band per curve).
    """
    if num_samples is not None:
        check_positive_int("num_samples", num_samples)
    fig = Figure(figsize=(4.2 * len(sweeps), 3.4), layout="constrained")
    axes = fig.subplots(1, len(sweeps), squeeze=False)[0]
    for ax, (label, (amounts, results)) in zip(axes, sweeps.items(), strict=True):
        for name, accuracies in results.items():
            (line,) = ax.plot(amounts, accuracies, "-o", markersize=4, label=name)
            if num_samples is not None:
                low, high = binomial_interval(accuracies, num_samples)
                ax.fill_between(
                    amounts, low, high, color=line.get_color(), alpha=0.2, linewidth=0
                )
        ax.set_xlabel(label)
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
        if num_samples is not None:
            ax.set_title(
                f"bands: 95% Wilson interval, {num_samples:,} images", fontsize=8
            )
    axes[0].set_ylabel("test accuracy")
    axes[0].legend()
    fig.suptitle("Accuracy on moved and turned test digits")
    return fig


def plot_seed_spread(results, ylabel="test accuracy", title=None):
    """One value per seed for each of several models, with mean and range.

    Args:
        results: A dict from a model's name to its values, one per seed
            (e.g. test accuracies), in the order the x axis shows them.
        ylabel: The name of the values.
        title: Optional title of the axis.

    Returns:
        A Figure with one axis: per model, a dot per seed, a bar from the
        lowest to the highest value and a tick at the mean.
    """
    if not results:
        raise ValueError(f"`results` must name at least one model. Received: {results}")
    fig = Figure(figsize=(1.3 * len(results) + 1.5, 3.2), layout="constrained")
    ax = fig.subplots()
    for x, values in enumerate(results.values()):
        values = np.asarray(values, dtype=float).ravel()
        ax.vlines(x, values.min(), values.max(), color="tab:gray", linewidth=2)
        ax.plot([x - 0.2, x + 0.2], [values.mean()] * 2, color="black")
        ax.plot(np.full(len(values), x), values, "o", color="tab:blue", alpha=0.7)
    ax.set_xticks(range(len(results)))
    ax.set_xticklabels(list(results), rotation=20, ha="right", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.grid(axis="y", alpha=0.3)
    if title is not None:
        ax.set_title(title, fontsize=9)
    return fig
