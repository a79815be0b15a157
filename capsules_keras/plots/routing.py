"""Figures of routing by agreement.

Summaries against the number of routing iterations, and the coupling
coefficients of primary capsules drawn on their grid, per class.
"""

import numbers

import numpy as np
from matplotlib.figure import Figure

from capsules_keras._checks import check_positive_number
from capsules_keras.plots._common import _image, _row_label


def plot_routing_iterations(iterations, metrics, series=None, ylim=None):
    """Summaries of routing against the number of routing iterations.

    Args:
        iterations: The iteration counts, shape `(n,)`.
        metrics: A dict from an axis label to its values, shape `(n,)`, or
            `(n, k)` for `k` series drawn on the same axis (NaN where a
            series has no value, e.g. a routing of one pass).
        series: Optional names of the `k` series, for the legend: one for
            the figure, below the axes, since every axis draws the same
            series in the same colours.
        ylim: Optional `(bottom, top)` of every axis, so that axes (and
            figures) are read on one scale; by default each axis fits its
            values.

    Returns:
        A Figure with one axis per metric.
    """
    iterations = list(iterations)
    if ylim is not None and (len(ylim) != 2 or not ylim[0] < ylim[1]):
        raise ValueError(
            f"`ylim` must be (bottom, top), bottom < top. Received: {ylim=}"
        )
    fig = Figure(figsize=(3.8 * len(metrics), 3), layout="constrained")
    axes = fig.subplots(1, len(metrics), squeeze=False)[0]
    for ax, (label, values) in zip(axes, metrics.items(), strict=True):
        values = np.asarray(values, dtype=float).reshape(len(iterations), -1)
        if series is not None and len(series) != values.shape[1]:
            raise ValueError(
                f"`series` must name each of the {values.shape[1]} series of "
                f"{label!r}. Received: {series=}"
            )
        for k in range(values.shape[1]):
            name = None if series is None else series[k]
            ax.plot(iterations, values[:, k], "-o", markersize=4, label=name)
        ax.set_xticks(iterations)
        ax.set_xlabel("routing iterations")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        if ylim is not None:
            ax.set_ylim(*ylim)
    if series is not None:
        handles, names = axes[0].get_legend_handles_labels()
        fig.legend(
            handles,
            names,
            loc="outside lower center",
            ncols=min(len(names), 3),
            fontsize=7,
        )
    return fig


def coupling_maps(couplings, grid_shape, weights=None):
    """Coupling coefficients per primary capsule grid cell, averaged over types.

    Primary capsule `i` sits at grid cell `i // types` (row by row) and has
    type `i % types`.

    Args:
        couplings: A list of `(in_capsules, num_classes)` arrays.
        grid_shape: `(rows, columns)` of the primary capsule grid.
        weights: Optional `(in_capsules,)` weights of the average over types.

    Returns:
        A list of `(num_classes, rows, columns)` arrays, one per coupling.
    """
    couplings = [np.asarray(c, dtype=float) for c in couplings]
    in_capsules, num_classes = couplings[0].shape
    grid_rows, grid_cols = grid_shape
    types = in_capsules // (grid_rows * grid_cols)
    if types * grid_rows * grid_cols != in_capsules:
        raise ValueError(
            f"{in_capsules} input capsules do not fill a {grid_rows}x{grid_cols} "
            f"grid. Received: grid_shape={tuple(grid_shape)}"
        )
    if weights is None:
        weights = np.ones(in_capsules)
    weights = np.asarray(weights, dtype=float).reshape(grid_rows, grid_cols, types)
    return [
        np.einsum(
            "hwtj,hwt->jhw",
            c.reshape(grid_rows, grid_cols, types, num_classes),
            weights,
        )
        / weights.sum(-1)
        for c in couplings
    ]


def plot_coupling_coefficients(
    image,
    couplings,
    grid_shape,
    row_titles=None,
    weights=None,
    highlight=None,
    label="mean coupling",
    center=None,
    value_range=None,
):
    """Where on the image each digit capsule draws its input from.

    Primary capsule `i` sits at grid cell `i // types` (row by row) and has
    type `i % types`. Each map shows, per grid cell, the coupling
    coefficients `c[i, j]` to one digit capsule `j`, averaged over the types
    (weighted by `weights`, e.g. the primary capsules' lengths, so that
    inactive capsules count little).

    Args:
        image: The input `(height, width, channels)`.
        couplings: A list of `(in_capsules, num_classes)` arrays, one row of
            maps each (e.g. after the first and the last routing update).
        grid_shape: `(rows, columns)` of the primary capsule grid.
        row_titles: Optional names of the rows.
        weights: Optional `(in_capsules,)` weights of the average over types.
        highlight: Optional class whose maps are framed (e.g. the prediction).
        label: The colour bar's label (e.g. "mean assignment R" for EM
            routing's assignment probabilities, which take the couplings'
            place).
        center: Optional reference value, e.g. the uniform `1 / num_classes`
            that dynamic routing starts from. The maps then show `map -
            center` in a diverging colour map (blue below, red above) on
            limits symmetric about 0, and the title gives the smallest and
            largest deviation.
        value_range: Optional half-width of that diverging scale, fixed
            (e.g. to compare figures): `center - value_range` is full blue,
            `center + value_range` full red, and values beyond are drawn
            at the ends (the colour bar is extended). Needs `center`. None:
            the largest deviation in the maps.

    Returns:
        A Figure with the image, `len(couplings) * num_classes` maps on one
        colour scale, and the colour bar.
    """
    if value_range is not None:
        check_positive_number("value_range", value_range)
        if center is None:
            raise ValueError(
                "`value_range` is the half-width of a scale centred on `center`; "
                f"pass `center` too. Received: value_range={value_range!r}, "
                "center=None"
            )
    maps = coupling_maps(couplings, grid_shape, weights)
    num_classes = len(maps[0])
    if center is not None:
        if (
            isinstance(center, bool)
            or not isinstance(center, numbers.Real)
            or not np.isfinite(center)
        ):
            raise ValueError(
                f"`center` must be a finite number. Received: center={center!r}"
            )
        maps = [m - center for m in maps]
    low, high = min(m.min() for m in maps), max(m.max() for m in maps)
    if center is None:
        # One colour scale for every map, spanning what they hold:
        # coefficients often stay close to the uniform 1 / num_classes.
        vmin, vmax = low, high
        cmap, bar_label = "viridis", label
    else:
        # Symmetric about 0, so that white means `center` in every map; the
        # floor keeps the limits apart when every map equals `center`.
        spread = value_range or max(abs(low), abs(high), 1e-12)
        vmin, vmax = -spread, spread
        cmap, bar_label = "RdBu_r", f"{label} - {center:g}"
    rows = len(maps)
    fig = Figure(
        figsize=(1.05 * (num_classes + 1) + 0.6, 1.15 * rows + 0.4),
        layout="constrained",
    )
    axes = fig.subplots(rows, num_classes + 1, squeeze=False)
    _image(axes[0, 0], image, "input")
    for r in range(1, rows):
        axes[r, 0].remove()
    for r, class_maps in enumerate(maps):
        for j in range(num_classes):
            ax = axes[r, j + 1]
            shown = ax.imshow(class_maps[j], cmap=cmap, vmin=vmin, vmax=vmax)
            ax.set_xticks([])
            ax.set_yticks([])
            if r == 0:
                ax.set_title(f"to {j}", fontsize=8)
            if highlight is not None and j == int(highlight):
                for spine in ax.spines.values():
                    spine.set_color("tab:red")
                    spine.set_linewidth(2.5)
        if row_titles is not None:
            _row_label(axes[r, 1], row_titles[r])
    # Arrows on the colour bar where a fixed scale cuts values off.
    below, above = int(low < vmin), int(high > vmax)
    extend = ("neither", "min", "max", "both")[below + 2 * above]
    fig.colorbar(shown, ax=axes[:, 1:], label=bar_label, shrink=0.9, extend=extend)
    if center is not None:
        title = f"{bar_label} from {low:+.4f} to {high:+.4f}"
        if value_range is not None:
            title += f"; colour scale fixed at \u00b1{value_range:g}"
        fig.suptitle(title, fontsize=9)
    return fig
