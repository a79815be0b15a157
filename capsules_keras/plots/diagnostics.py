"""Figures of what a trained model's outputs reveal (notebook 07).

`plot_transform_sweep` follows one digit as it is moved or turned step by
step: the images, the capsule network's reconstructions, its class evidence
beside a CNN's, and its 16 pose numbers. `plot_roc_curves` sets detectors of
wrong or foreign inputs side by side (`capsules_keras.diagnostics`).
`plot_grouped_intervals` draws estimates with their intervals, group by
group (e.g. a score of reconstructions by how much two digits overlap).
"""

import numpy as np
from matplotlib.figure import Figure

from capsules_keras.diagnostics import auroc, roc_curve
from capsules_keras.plots._common import _image


def _sweep_array(name, values, steps, trailing_ndim):
    values = np.asarray(values, dtype=float)
    if values.ndim != 1 + trailing_ndim or len(values) != steps:
        raise ValueError(
            f"`{name}` needs one entry per step of `values` ({steps}) and "
            f"{1 + trailing_ndim} dimensions. Received: {name}.shape={values.shape}"
        )
    return values


def plot_transform_sweep(
    values, images, reconstructions, evidence, poses, label="shift (pixels)"
):
    """One digit moved or turned step by step, as a capsule network sees it.

    Args:
        values: `(steps,)` amounts of the transform (e.g. -4..4 pixels).
        images: `(steps, height, width, 1)` the transformed digit.
        reconstructions: `(steps, height, width, 1)` the decoder's redrawing
            of each from the capsule of the digit's class.
        evidence: A dict from a model's name to `(steps,)` its evidence for
            the digit's class (a capsule's length, a softmax probability),
            or to `(steps, n)`, one column per digit: the mean is drawn, with
            a band from the 10th to the 90th percentile.
        poses: `(steps, dim)` the capsule of the digit's class, for the
            image shown.
        label: What `values` measure, for the axes.

    Returns:
        A Figure: a row of images, a row of reconstructions, then the
        evidence against the transform and the pose numbers against it.
    """
    values = np.asarray(values, dtype=float)
    if values.ndim != 1 or len(values) < 2:
        raise ValueError(
            f"`values` must be 1-D with at least 2 steps. Received: {values.shape}"
        )
    steps = len(values)
    images = _sweep_array("images", images, steps, 3)
    reconstructions = _sweep_array("reconstructions", reconstructions, steps, 3)
    poses = _sweep_array("poses", poses, steps, 1)
    if not evidence:
        raise ValueError(
            f"`evidence` must name at least one model. Received: {evidence}"
        )
    fig = Figure(figsize=(max(7.0, 0.85 * steps), 6.4), layout="constrained")
    top, bottom = fig.subfigures(2, 1, height_ratios=(1.5, 2.2))
    grid = top.subplots(2, steps, squeeze=False)
    for k in range(steps):
        _image(grid[0, k], images[k], f"{values[k]:g}")
        _image(grid[1, k], reconstructions[k])
    grid[0, 0].set_ylabel("input", fontsize=8)
    grid[1, 0].set_ylabel("redrawn", fontsize=8)
    top.suptitle(f"{label}: the digit and its reconstruction", fontsize=9)
    left, right = bottom.subplots(1, 2)
    for name, series in evidence.items():
        series = np.asarray(series, dtype=float)
        if series.ndim == 2:
            series = _sweep_array(f"evidence[{name!r}]", series, steps, 1)
            low, high = np.percentile(series, [10, 90], axis=1)
            (line,) = left.plot(values, series.mean(1), "-o", markersize=3, label=name)
            left.fill_between(
                values, low, high, color=line.get_color(), alpha=0.2, linewidth=0
            )
        else:
            series = _sweep_array(f"evidence[{name!r}]", series, steps, 0)
            left.plot(values, series, "-o", markersize=3, label=name)
    left.set_xlabel(label)
    left.set_ylabel("evidence for the true class")
    left.set_ylim(0, 1.02)
    left.grid(alpha=0.3)
    left.legend(fontsize=8)
    right.plot(values, poses, linewidth=1)
    right.set_xlabel(label)
    right.set_ylabel(f"the {poses.shape[1]} capsule numbers")
    right.grid(alpha=0.3)
    return fig


def plot_roc_curves(panels):
    """Detectors side by side: one ROC curve per score, one axis per task.

    Args:
        panels: A dict from a task's title (e.g. `"Fashion-MNIST vs MNIST"`)
            to a dict from a score's name to `(positive, negative)`: its
            values on the images to flag and on the others (higher = more
            suspicious).

    Returns:
        A Figure with one axis per task; each curve's legend entry gives
        its AUROC.
    """
    if not panels or not all(panels.values()):
        raise ValueError(f"`panels` must name tasks with scores. Received: {panels}")
    fig = Figure(figsize=(3.4 * len(panels), 3.4), layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (title, scores) in zip(axes, panels.items(), strict=True):
        for name, (positive, negative) in scores.items():
            fpr, tpr = roc_curve(positive, negative)
            ax.plot(fpr, tpr, label=f"{name}: {auroc(positive, negative):.3f}")
        ax.plot([0, 1], [0, 1], ":", color="gray", linewidth=1)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("false-positive rate")
        ax.set_aspect("equal")
        ax.legend(fontsize=7, title="AUROC", title_fontsize=7, loc="lower right")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("true-positive rate")
    return fig


def plot_grouped_intervals(groups, panels, xlabel, references=None):
    """Estimates with their intervals, side by side in each group.

    Args:
        groups: `(g,)` the groups' names, along the x-axis.
        panels: A dict from a panel's quantity (its y-axis label) to a dict
            from a series' name to `(estimates, lows, highs)`, each `(g,)`.
        xlabel: What the groups are.
        references: Optional dict from a panel's quantity to `(value, name)`:
            a dashed line at `value` (e.g. chance), labelled `name`.

    Returns:
        A Figure with one axis per panel; each series' points are joined
        across the groups and carry their intervals as error bars.
    """
    groups = [str(g) for g in groups]
    if not groups or not panels or not all(panels.values()):
        raise ValueError(
            "`groups` and `panels` must not be empty and every panel must hold "
            f"a series. Received: groups={groups}, panels={list(panels)}"
        )
    references = references or {}
    unknown = set(references) - set(panels)
    if unknown:
        raise ValueError(
            f"`references` names panels that are not in `panels`. Received: {unknown}"
        )
    fig = Figure(figsize=(4.2 * len(panels), 3.4), layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    positions = np.arange(len(groups))
    for ax, (quantity, series) in zip(axes, panels.items(), strict=True):
        offsets = np.linspace(-0.12, 0.12, len(series)) if len(series) > 1 else [0.0]
        for offset, (name, values) in zip(offsets, series.items(), strict=True):
            estimate, low, high = (
                _sweep_array(f"panels[{quantity!r}][{name!r}]", v, len(groups), 0)
                for v in values
            )
            if np.any(low > estimate) or np.any(estimate > high):
                raise ValueError(
                    f"Every interval must hold its estimate. Received for {name!r}: "
                    f"{estimate}, from {low} to {high}"
                )
            ax.errorbar(
                positions + offset,
                estimate,
                yerr=[estimate - low, high - estimate],
                fmt="-o",
                markersize=4,
                capsize=3,
                label=name,
            )
        if quantity in references:
            value, name = references[quantity]
            ax.axhline(value, linestyle="--", color="gray", linewidth=1, label=name)
        ax.set_xticks(positions, groups, fontsize=8)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(quantity)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    return fig
