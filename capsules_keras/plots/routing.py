"""Figures of the squash and of routing by agreement.

The squash curve, parts voting for the pose of a whole, a 2-D routing toy,
summaries against the number of routing iterations, and the coupling
coefficients of primary capsules drawn on their grid (per class, or split
between the two digits of a pair).
"""

import numbers

import numpy as np
from matplotlib.figure import Figure

from capsules_keras._checks import check_positive_number
from capsules_keras.plots._common import _image
from capsules_keras.plots.multi_digit import overlay_colors


def plot_squash(input_lengths, output_lengths):
    """Output length of the squash against the input length.

    Args:
        input_lengths: `|s|` for a range of inputs, shape `(n,)`.
        output_lengths: `|squash(s)|` for the same inputs, shape `(n,)`.

    Returns:
        A Figure with one axis: the squash curve, its limit 1, and `|s|^2`
        (what the squash is close to for short vectors).
    """
    input_lengths = np.asarray(input_lengths, dtype=float)
    output_lengths = np.asarray(output_lengths, dtype=float)
    fig = Figure(figsize=(5, 3.2), layout="constrained")
    ax = fig.subplots()
    ax.plot(input_lengths, output_lengths, label="|squash(s)|")
    short = input_lengths <= 1.0
    ax.plot(
        input_lengths[short],
        input_lengths[short] ** 2,
        ":",
        color="gray",
        label="|s|² (short vectors)",
    )
    ax.axhline(1.0, linestyle="--", color="black", linewidth=0.8, label="limit 1")
    ax.set_xlabel("input length |s|")
    ax.set_ylabel("output length |v|")
    ax.set_ylim(0, 1.1)
    ax.set_xlim(0, input_lengths.max())
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    ax.set_title("Squash: short vectors shrink, long ones approach length 1")
    return fig


def _poses(name, poses):
    poses = np.asarray(poses, dtype=float)
    if poses.ndim != 3 or poses.shape[1:] != (3, 3) or len(poses) == 0:
        raise ValueError(
            f"`{name}` must be (k, 3, 3) homogeneous 2-D poses, k >= 1. "
            f"Received: shape {poses.shape}"
        )
    return poses


def plot_pose_votes(panels, arrow=1.0):
    """Parts, and the pose of the whole each part votes for, side by side.

    Args:
        panels: A dict from a panel's title to `(parts, votes)`: `(k, 3, 3)`
            homogeneous 2-D poses (a rotation and a translation) of the `k`
            parts, and of the whole as each part predicts it.
        arrow: Length of the arrows that show the orientations.

    Returns:
        A Figure with one axis per panel: each part as a solid arrow at its
        position along its orientation, its vote as a dashed arrow of the
        same colour. Votes that agree lie on top of each other.
    """
    if not panels:
        raise ValueError(f"`panels` must name at least one panel. Received: {panels}")
    checked = {}
    for title, (parts, votes) in panels.items():
        parts, votes = _poses("parts", parts), _poses("votes", votes)
        if parts.shape != votes.shape:
            raise ValueError(
                "Every part needs one vote. Received for "
                f"{title!r}: {len(parts)} parts and {len(votes)} votes"
            )
        checked[title] = parts, votes
    fig = Figure(figsize=(3.3 * len(panels), 3.4), layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    colors = [f"C{k % 10}" for k in range(max(len(p) for p, _ in checked.values()))]
    for ax, (title, (parts, votes)) in zip(axes, checked.items(), strict=True):
        for k, (part, vote) in enumerate(zip(parts, votes, strict=True)):
            for pose, style, marker in ((part, "-", "o"), (vote, "--", "s")):
                x, y = pose[:2, 2]
                dx, dy = arrow * pose[:2, 0]  # the pose's own x-axis
                ax.annotate(
                    "",
                    xy=(x + dx, y + dy),
                    xytext=(x, y),
                    arrowprops={
                        "arrowstyle": "->",
                        "color": colors[k],
                        "linestyle": style,
                        "linewidth": 1.6,
                    },
                )
                ax.plot(x, y, marker, color=colors[k])
        everything = np.concatenate([parts[:, :2, 2], votes[:, :2, 2]])
        low, high = everything.min(0) - 1.5 * arrow, everything.max(0) + 1.5 * arrow
        ax.set_xlim(low[0], high[0])
        ax.set_ylim(low[1], high[1])
        ax.set_aspect("equal")
        ax.set_title(title, fontsize=9)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("solid o: parts, dashed square: their votes", fontsize=8)
    return fig


def plot_routing_toy(votes, parents, couplings, focus_parent=0, outliers=()):
    """Votes of 2-D child capsules and the parents routing makes of them.

    Args:
        votes: `u_hat[i, j, :]`, the 2-D vote of child `i` for parent `j`,
            shape `(in_capsules, out_capsules, 2)`.
        parents: `v[r, j, :]`, parent `j` after iteration `r + 1`, shape
            `(iterations, out_capsules, 2)`.
        couplings: `c[r, i, j]`, the coupling coefficients used in iteration
            `r + 1`, shape `(iterations, in_capsules, out_capsules)`.
        focus_parent: The parent whose coupling coefficients the last panel
            follows over the iterations.
        outliers: Indices of children drawn with dashed lines.

    Returns:
        A Figure with one axis per parent (the votes, drawn as strongly as
        their final coupling, and the parent after every iteration) and a last
        axis with `c[:, i, focus_parent]` against the iteration.
    """
    votes = np.asarray(votes, dtype=float)
    parents = np.asarray(parents, dtype=float)
    couplings = np.asarray(couplings, dtype=float)
    num_iterations, num_children, num_parents = couplings.shape
    colors = [f"C{i % 10}" for i in range(num_children)]
    fig = Figure(figsize=(3.4 * (num_parents + 1), 3.4), layout="constrained")
    axes = fig.subplots(1, num_parents + 1, squeeze=False)[0]
    reach = max(np.abs(votes).max(), 1.0) * 1.15
    circle = np.linspace(0, 2 * np.pi, 200)
    for j, ax in enumerate(axes[:num_parents]):
        ax.plot(np.cos(circle), np.sin(circle), ":", color="gray", linewidth=0.8)
        for i in range(num_children):
            strength = couplings[-1, i, j]
            ax.annotate(
                "",
                xy=votes[i, j],
                xytext=(0, 0),
                arrowprops={
                    "arrowstyle": "->",
                    "color": colors[i],
                    "alpha": 0.2 + 0.8 * strength,
                    "linestyle": "--" if i in outliers else "-",
                    "linewidth": 0.5 + 2 * strength,
                },
            )
            ax.text(*(votes[i, j] * 1.08), str(i), color=colors[i], fontsize=8)
        ax.plot(
            [0, parents[-1, j, 0]],
            [0, parents[-1, j, 1]],
            color="black",
            linewidth=1.5,
            zorder=4,
        )
        ax.plot(
            parents[:, j, 0],
            parents[:, j, 1],
            "-",
            color="black",
            linewidth=1,
            zorder=4,
        )
        for r in range(num_iterations):
            shade = 0.7 * (1 - (r + 1) / num_iterations)
            ax.plot(
                *parents[r, j],
                "o",
                color=(shade, shade, shade),
                markeredgecolor="white",
                markersize=7,
                zorder=5,
                label=f"v_{j} after r={r + 1}",
            )
        ax.set_xlim(-reach, reach)
        ax.set_ylim(-reach, reach)
        ax.set_aspect("equal")
        ax.grid(alpha=0.3)
        ax.set_title(f"votes for parent {j}")
        ax.legend(loc="lower left", fontsize=7)
    ax = axes[-1]
    steps = np.arange(1, num_iterations + 1)
    for i in range(num_children):
        ax.plot(
            steps,
            couplings[:, i, focus_parent],
            "--o" if i in outliers else "-o",
            color=colors[i],
            markersize=3,
            label=f"child {i}",
        )
    ax.set_xticks(steps)
    ax.set_ylim(0, 1)
    ax.set_xlabel("routing iteration r")
    ax.set_ylabel(f"coupling to parent {focus_parent}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title("coupling coefficients")
    return fig


def plot_routing_iterations(iterations, metrics, series=None):
    """Summaries of routing against the number of routing iterations.

    Args:
        iterations: The iteration counts, shape `(n,)`.
        metrics: A dict from an axis label to its values, shape `(n,)`, or
            `(n, k)` for `k` series drawn on the same axis.
        series: Optional names of the `k` series, for the legend.

    Returns:
        A Figure with one axis per metric.
    """
    iterations = list(iterations)
    fig = Figure(figsize=(3.8 * len(metrics), 3), layout="constrained")
    axes = fig.subplots(1, len(metrics), squeeze=False)[0]
    for ax, (label, values) in zip(axes, metrics.items(), strict=True):
        values = np.asarray(values, dtype=float).reshape(len(iterations), -1)
        for k in range(values.shape[1]):
            name = None if series is None else series[k]
            ax.plot(iterations, values[:, k], "-o", markersize=4, label=name)
        ax.set_xticks(iterations)
        ax.set_xlabel("routing iterations")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        if series is not None:
            ax.legend(fontsize=7)
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
            axes[r, 1].set_ylabel(row_titles[r], fontsize=8)
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


def plot_pair_routing(
    image,
    couplings,
    grid_shape,
    classes,
    weights=None,
    digits=None,
    row_titles=None,
    coupling_range=None,
    share_range=None,
):
    """Which primary capsules route to which of the two digits in one image.

    Primary capsule `i` sits at grid cell `i // types` (row by row). For the
    two digit capsules `a, b = classes`, each map shows per grid cell the
    coupling coefficients `c[i, a]` and `c[i, b]` averaged over the types
    (weighted by `weights`, e.g. the primary capsules' lengths), and the
    share `c[i, b] / (c[i, a] + c[i, b])` of the two that goes to `b`.

    Args:
        image: The input `(height, width, channels)`.
        couplings: A list of `(in_capsules, num_classes)` arrays, one row of
            maps each (e.g. after the first and the last routing update).
        grid_shape: `(rows, columns)` of the primary capsule grid.
        classes: The two digit capsules to show, e.g. the true labels.
        weights: Optional `(in_capsules,)` weights of the average over types.
        digits: Optional `(2, height, width, 1)`: each digit alone, to show
            the input with the first in red and the second in green.
        row_titles: Optional names of the rows.
        coupling_range: Half-width of the coupling maps' colour scale, which
            is centred on the uniform coupling `1 / num_classes` (no
            routing): blue below it, red above. None: the largest distance
            from uniform in the maps.
        share_range: Half-width of the share maps' scale, centred on the
            even split 0.5. None: the largest distance from 0.5 in the maps.

    Returns:
        A Figure with the input and, per row, the maps to `a` and to `b` (one
        colour scale) and the share map (red: towards `a`, green: towards
        `b`), and two colour bars.
    """
    for name, value in [
        ("coupling_range", coupling_range),
        ("share_range", share_range),
    ]:
        if value is not None:
            check_positive_number(name, value)
    a, b = (int(c) for c in classes)
    # per row: (2, grid_rows, grid_cols) mean couplings to a and b
    maps = [m[[a, b]] for m in coupling_maps(couplings, grid_shape, weights)]
    shares = [m[1] / (m[0] + m[1]) for m in maps]
    uniform = 1 / np.shape(couplings[0])[-1]
    if coupling_range is None:
        coupling_range = max(max(np.abs(m - uniform).max() for m in maps), 1e-4)
    if share_range is None:
        share_range = max(max(np.abs(s - 0.5).max() for s in shares), 1e-3)
    rows = len(maps)
    fig = Figure(figsize=(7.4, 1.75 * rows + 0.5), layout="constrained")
    axes = fig.subplots(rows, 4, squeeze=False)
    shown = image if digits is None else overlay_colors(np.asarray(digits)[None])[0]
    _image(
        axes[0, 0],
        shown,
        f"input: {a} red, {b} green" if digits is not None else "input",
    )
    for r in range(1, rows):
        axes[r, 0].remove()
    for r, (pair, share) in enumerate(zip(maps, shares, strict=True)):
        for d, label in enumerate((a, b)):
            ax = axes[r, 1 + d]
            coupled = ax.imshow(
                pair[d],
                cmap="RdBu_r",
                vmin=uniform - coupling_range,
                vmax=uniform + coupling_range,
            )
            ax.set_xticks([])
            ax.set_yticks([])
            if r == 0:
                ax.set_title(f"to {label}", fontsize=8)
        ax = axes[r, 3]
        split = ax.imshow(
            share, cmap="RdYlGn", vmin=0.5 - share_range, vmax=0.5 + share_range
        )
        ax.set_xticks([])
        ax.set_yticks([])
        if r == 0:
            ax.set_title(f"share to {b} of {a} + {b}", fontsize=8)
        if row_titles is not None:
            axes[r, 1].set_ylabel(row_titles[r], fontsize=8)
    fig.colorbar(coupled, ax=axes[:, 1:3], label="mean coupling", shrink=0.9)
    fig.colorbar(split, ax=axes[:, 3], label=f"share to {b}", shrink=0.9)
    return fig
