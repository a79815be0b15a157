"""The figures that one notebook each draws, kept beside the notebooks.

Every function returns a `matplotlib.figure.Figure` built without pyplot,
like those of `capsules_keras.plots`, which holds the figures that the
trainer's report or several notebooks draw (training curves, the confusion
matrix, reconstructions, coupling coefficients, ...). The notebooks import
this module as `figures` (Jupyter and nbval run a notebook in its folder);
a notebook opened alone, as on Colab, fetches it and `analysis.py` first.

By notebook:

    01  plot_pose_votes, plot_squash, plot_routing_toy
    02  plot_capsnet_architecture, plot_loss_terms, plot_mistakes
    03  plot_class_reconstructions, rank_dimensions,
        plot_dimension_perturbations, plot_robustness
    04  pca_2d, plot_capsule_pca, plot_nearest_neighbours
    05  plot_pair_construction, plot_overlap_histogram, plot_pair_routing
    06  plot_seed_spread
    07  plot_transform_sweep, plot_roc_curves, plot_grouped_intervals
    08  plot_model_curves, plot_seed_spread (with 06)
    09  rank_dimensions, plot_dimension_perturbations (with 03)

The capsule dimensions' mosaics and the explorer that nudges them by hand
are in dimensions.py.
"""

import numpy as np
from analysis import auroc, roc_curve  # notebooks/analysis.py, beside this file
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle
from matplotlib.path import Path

from capsules_keras._checks import check_positive_int, check_positive_number
from capsules_keras.metrics import binomial_interval
from capsules_keras.plots._common import _image, _row_label
from capsules_keras.plots.multi_digit import overlay_colors
from capsules_keras.plots.routing import coupling_maps
from capsules_keras.plots.training import _plot_per_epoch

#: A panel's legend below its axis, where it covers no point or curve.
LEGEND_BELOW = {"loc": "upper center", "bbox_to_anchor": (0.5, -0.2), "frameon": False}

# Notebook 01: squash and routing by agreement


def _poses(name, poses):
    poses = np.asarray(poses, dtype=float)
    if poses.ndim != 3 or poses.shape[1:] != (3, 3) or len(poses) == 0:
        raise ValueError(
            f"`{name}` must be (k, 3, 3) homogeneous 2-D poses, k >= 1. "
            f"Received: shape {poses.shape}"
        )
    return poses


def plot_pose_votes(panels, arrow=1.0, part_names=None):
    """Parts, and the pose of the whole each part votes for, side by side.

    Args:
        panels: A dict from a panel's title to `(parts, votes)`: `(k, 3, 3)`
            homogeneous 2-D poses (a rotation and a translation) of the `k`
            parts, and of the whole as each part predicts it.
        arrow: Length of the arrows that show the orientations.
        part_names: Optional names of the `k` parts, in their order: a legend
            below the panels keys each colour to its part.

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
    if part_names is not None:
        if len(part_names) != len(colors):
            raise ValueError(
                f"`part_names` must name the {len(colors)} parts. "
                f"Received: {list(part_names)}"
            )
        keys = [
            Line2D([], [], color=color, marker="o", linewidth=1.6, label=name)
            for color, name in zip(colors, part_names, strict=True)
        ]
        fig.legend(
            handles=keys, loc="outside lower center", ncols=len(keys), fontsize=8
        )
    return fig


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


# Notebook 02: train a CapsNet on MNIST


_BOX_COLORS = {"data": "0.92", "encoder": "#dce9f5", "decoder": "#fbe5cc"}


def _shape_text(shape):
    """`(20, 20, 256)` as `"20 x 20 x 256"`."""
    return " x ".join(str(int(size)) for size in shape)


def _window_text(layer):
    """A convolution's kernel and stride, e.g. `"9x9, stride 2"`."""
    kernel = "x".join(str(size) for size in layer.kernel_size)
    strides = set(layer.strides)
    stride = (
        str(layer.strides[0])
        if len(strides) == 1
        else "x".join(str(size) for size in layer.strides)
    )
    return f"{kernel}, stride {stride}"


def _activation_text(layer):
    name = getattr(layer.activation, "__name__", str(layer.activation))
    return {"relu": "ReLU"}.get(name, name)


def _params_text(layer):
    return f"{layer.count_params():,} params"


def _block(ax, x, y, width, height, kind, title, body, params=None):
    """A rounded box at `(x, y)` (lower left) with a bold title and its lines."""
    ax.add_patch(
        FancyBboxPatch(
            (x, y),
            width,
            height,
            boxstyle="round,pad=0,rounding_size=0.08",
            facecolor=_BOX_COLORS[kind],
            edgecolor="0.35",
            linewidth=1,
        )
    )
    center = x + width / 2
    ax.text(
        center,
        y + height - 0.1,
        title,
        ha="center",
        va="top",
        fontsize=9,
        fontweight="bold",
    )
    ax.text(
        center,
        y + height - 0.36,
        body,
        ha="center",
        va="top",
        fontsize=8,
        linespacing=1.3,
    )
    if params is not None:
        ax.text(
            center,
            y + 0.08,
            params,
            ha="center",
            va="bottom",
            fontsize=8,
            color="0.3",
            style="italic",
        )
    return x, y, width, height


def _arrow(ax, vertices):
    """An arrow along the straight segments through `vertices`."""
    codes = [Path.MOVETO] + [Path.LINETO] * (len(vertices) - 1)
    ax.add_patch(
        FancyArrowPatch(
            path=Path(vertices, codes),
            arrowstyle="-|>,head_length=5,head_width=3",
            color="0.25",
            linewidth=1,
        )
    )


def _diagram_canvas(width, height):
    """A Figure of `width` x `height` inches and one bare axis in inches."""
    fig = Figure(figsize=(width, height))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.axis("off")
    return fig, ax


def _elbow(ax, upper, lower):
    """An arrow from the box `upper` (x, y, width, height) down to `lower`, a
    box of the row below, with an elbow halfway; returns the elbow's height."""
    x, y, width, _ = upper
    low_x, low_y, low_width, low_height = lower
    middle = (y + low_y + low_height) / 2
    _arrow(
        ax,
        [
            (x + width / 2, y - 0.04),
            (x + width / 2, middle),
            (low_x + low_width / 2, middle),
            (low_x + low_width / 2, low_y + low_height + 0.04),
        ],
    )
    return middle


def _row(ax, blocks, y, height, width, gap=0.42, margin=0.2):
    """Boxes left to right from `margin`, joined by arrows; their extents."""
    size = (width - 2 * margin - gap * (len(blocks) - 1)) / len(blocks)
    boxes = []
    for k, (kind, title, body, params) in enumerate(blocks):
        x = margin + k * (size + gap)
        boxes.append(_block(ax, x, y, size, height, kind, title, body, params))
        if k:
            _arrow(ax, [(x - gap + 0.04, y + height / 2), (x - 0.04, y + height / 2)])
    return boxes


def plot_capsnet_architecture(model):
    """Block diagram of a `CapsNet`: encoder (paper, Fig. 1) and decoder (Fig. 2).

    Every size, shape and parameter count is read from `model`, so a CapsNet
    built with other sizes is drawn as it is.

    Args:
        model: A `capsules_keras.models.CapsNet` (a `Conv2D` then
            `PrimaryCaps` encoder; Efficient-CapsNet's stack is not drawn).

    Returns:
        A Figure with one axis: the encoder as a row of boxes (input, Conv1,
        PrimaryCaps, DigitCaps, capsule lengths) and, branching from
        DigitCaps, the decoder as a second row (mask, the dense layers, the
        reconstruction), each weighted stage with its parameter count and
        the total in the title.
    """
    conv, primary, digit = model.conv, model.primary_caps, model.digit_caps
    if not hasattr(conv, "kernel_size") or not hasattr(primary, "capsule_types"):
        raise ValueError(
            "plot_capsnet_architecture draws CapsNet's Conv2D + PrimaryCaps "
            f"encoder. Received: a model of type {type(model).__name__}"
        )
    image_shape = tuple(model.image_shape)
    conv_shape = conv.compute_output_shape((None, *image_shape))
    _, rows, cols, _ = primary.conv.compute_output_shape(conv_shape)
    in_capsules, primary_dim = primary.compute_output_shape(conv_shape)[1:]
    classes, digit_dim = digit.num_capsules, digit.capsule_dim
    iterations = digit.routing_iterations
    routing = digit.routing.replace("_", "-")
    dense = [layer for layer in model.decoder.layers if hasattr(layer, "units")]

    width, height = 12.0, 4.0
    fig, ax = _diagram_canvas(width, height)
    encoder = _row(
        ax,
        [
            ("data", "input image", _shape_text(image_shape), None),
            (
                "encoder",
                "Conv1",
                f"{conv.filters} filters, {_window_text(conv)}\n"
                f"{_activation_text(conv)}\n→ {_shape_text(conv_shape[1:])}",
                _params_text(conv),
            ),
            (
                "encoder",
                "PrimaryCaps",
                f"{primary.capsule_types} types x {primary_dim}D, "
                f"{_window_text(primary.conv)}\n"
                f"{rows} x {cols} grid → {in_capsules:,} capsules\nsquash",
                _params_text(primary),
            ),
            (
                "encoder",
                "DigitCaps",
                f"{classes} capsules x {digit_dim}D\n"
                f"W_ij: {primary_dim}D → {digit_dim}D per pair\n"
                f"{routing} routing, {iterations} "
                f"iteration{'s' if iterations != 1 else ''}",
                _params_text(digit),
            ),
            (
                "data",
                "lengths ||v_j||",
                f"{classes} class probabilities\n(margin loss)",
                None,
            ),
        ],
        y=2.1,
        height=1.25,
        width=width,
    )
    loss = (
        f"\n(loss weight {model.reconstruction_weight:g})"
        if model.reconstruction_weight
        else ""
    )
    decoder = _row(
        ax,
        [
            (
                "decoder",
                "mask",
                "keep one capsule:\ntrue label in training,\nlongest otherwise\n"
                f"→ {classes * digit_dim}",
                None,
            ),
            *(
                (
                    "decoder",
                    f"FC {layer.units:,}",
                    f"{_activation_text(layer)}\n→ {layer.units:,}",
                    _params_text(layer),
                )
                for layer in dense
            ),
            ("data", "reconstruction", _shape_text(image_shape) + loss, None),
        ],
        y=0.2,
        height=1.25,
        width=width,
    )
    middle = _elbow(ax, encoder[3], decoder[0])  # DigitCaps down to the mask
    mask_x, _, mask_w, _ = decoder[0]
    y = encoder[3][1]
    captions = (
        (mask_x + mask_w / 2 + 0.1, middle + 0.05, "decoder (paper, Figure 2)"),
        (0.2, y + encoder[0][3] + 0.05, "encoder (paper, Figure 1)"),
    )
    for caption_x, caption_y, caption in captions:
        ax.text(
            caption_x,
            caption_y,
            caption,
            ha="left",
            va="bottom",
            fontsize=8,
            style="italic",
            color="0.3",
        )
    fig.suptitle(
        f"CapsNet: {model.count_params():,} parameters (decoder "
        f"{model.decoder.count_params():,})",
        fontsize=10,
        y=0.985,
    )
    return fig


def plot_cnn_architecture(model):
    """Block diagram of a plain CNN such as `baseline_cnn`, drawn as
    `plot_capsnet_architecture` draws CapsNet, to set the two side by side.

    Every layer is read from `model`: each convolution (with the pooling
    after it), then each dense layer (with the flattening or dropout before
    it), in order, with its parameter count and its share of the total, so
    that where a same-budget CNN puts its parameters shows at a glance.

    Args:
        model: A functional `keras.Model` made of `Conv2D`, `MaxPooling2D`,
            `Flatten`, `Dropout` and `Dense` layers.

    Returns:
        A Figure with one axis: the input and the convolutions as the top row
        of boxes, the dense layers and the output as the bottom row.
    """
    total = model.count_params()
    features, classifier, before = [], [], []
    for layer in model.layers:
        kind = type(layer).__name__
        if kind == "InputLayer":
            continue
        if kind == "Conv2D":
            shape = layer.output.shape[1:]
            body = f"{layer.filters} filters, {_window_text(layer)}\n"
            body += f"{_activation_text(layer)} → {_shape_text(shape)}"
            features.append(["encoder", f"conv {len(features) + 1}", body, layer])
        elif kind == "MaxPooling2D" and features:
            size = "x".join(str(v) for v in layer.pool_size)
            features[-1][2] += (
                f"\nmax-pool {size} → {_shape_text(layer.output.shape[1:])}"
            )
        elif kind in ("Flatten", "Dropout"):
            before.append("flatten" if kind == "Flatten" else f"dropout {layer.rate:g}")
        elif kind == "Dense":
            body = "\n".join(
                [*(f"{step} →" for step in before), f"{layer.units:,} units"]
            )
            body += f"\n{_activation_text(layer)}"
            classifier.append(["decoder", f"dense {len(classifier) + 1}", body, layer])
            before = []
        else:
            raise ValueError(
                "plot_cnn_architecture draws Conv2D, MaxPooling2D, Flatten, "
                f"Dropout and Dense layers. Received: a {kind} layer ({layer.name!r})"
            )
    if not features or not classifier:
        raise ValueError(
            "plot_cnn_architecture needs convolutions and dense layers. "
            f"Received: a model of type {type(model).__name__}"
        )

    def params(layer):
        return f"{layer.count_params():,} params ({layer.count_params() / total:.0%})"

    width, height = 12.0, 4.0
    fig, ax = _diagram_canvas(width, height)
    image_shape = tuple(model.input.shape[1:])
    top = _row(
        ax,
        [
            ("data", "input image", _shape_text(image_shape), None),
            *(
                (kind, title, body, params(layer))
                for kind, title, body, layer in features
            ),
        ],
        y=2.1,
        height=1.25,
        width=width,
    )
    bottom = _row(
        ax,
        [(kind, title, body, params(layer)) for kind, title, body, layer in classifier],
        y=0.2,
        height=1.25,
        width=width,
    )
    _elbow(ax, top[-1], bottom[0])  # the last convolution down to the dense layers
    fig.suptitle(f"{model.name}: {total:,} parameters", fontsize=10, y=0.985)
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


# Notebook 03: inside the capsules


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
        A Figure with one axis per digit, each a `dims x steps` mosaic, side
        by side (or `k x steps` with `dimensions`, one under another).
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
    # All dimensions: the digits side by side. Chosen ones, drawn larger: one
    # digit under another, so that the figure fits a page at its own size.
    columns = n if dimensions is None else 1
    fig = Figure(
        figsize=(
            (tile_size + 0.03) * steps * columns + 0.6,
            (tile_size * shown + 0.8) * (n // columns),
        ),
        layout="constrained",
    )
    axes = fig.subplots(n // columns, columns, squeeze=False).ravel()
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


# Notebook 04: reuse DigitCaps


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

    The points are drawn in a random order and each class's mean is marked
    with its digit, so that a class in the middle of the crowd stays visible.

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
    # Drawn in a random order, so that no class hides under the ones drawn
    # after it; each class's mean is marked with its digit.
    order = np.random.default_rng(0).permutation(len(labels))
    colors = np.array([f"C{label % 10}" for label in labels])
    ax.scatter(*projected[order].T, s=4, c=colors[order], alpha=0.5, linewidths=0)
    for label in np.unique(labels):
        centre = projected[labels == label].mean(axis=0)
        ax.scatter(*centre, s=14, color=f"C{label % 10}", label=str(label))
        ax.annotate(
            str(label),
            centre,
            fontsize=11,
            fontweight="bold",
            ha="center",
            va="center",
            bbox={"boxstyle": "circle,pad=0.15", "fc": "white", "ec": f"C{label % 10}"},
        )
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


# Notebook 05: overlapping digits


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
            _row_label(axes[r, 1], row_titles[r])
    fig.colorbar(coupled, ax=axes[:, 1:3], label="mean coupling", shrink=0.9)
    fig.colorbar(split, ax=axes[:, 3], label=f"share to {b}", shrink=0.9)
    return fig


# Notebook 06: does routing matter?


def plot_seed_spread(results, ylabel="test accuracy", title=None, seeds=None):
    """One value per seed for each of several models, with mean and range.

    Args:
        results: A dict from a model's name to its values, one per seed
            (e.g. test accuracies), in the order the x axis shows them.
        ylabel: The name of the values.
        title: Optional title of the axis.
        seeds: Optional names of the seeds, when every model has a value for
            each, in the same order: each seed's values are then joined by a
            line across the models, in a colour of their own, and keyed below
            the axis, so that a paired comparison can be read off the figure.

    Returns:
        A Figure with one axis: per model, a dot per seed, a bar from the
        lowest to the highest value and a tick at the mean.
    """
    if not results:
        raise ValueError(f"`results` must name at least one model. Received: {results}")
    values = [np.asarray(v, dtype=float).ravel() for v in results.values()]
    if seeds is not None and any(len(v) != len(seeds) for v in values):
        raise ValueError(
            f"With `seeds`, every model needs one value per seed ({len(seeds)}). "
            f"Received: {[len(v) for v in values]} values for {list(results)}"
        )
    fig = Figure(figsize=(1.3 * len(results) + 1.5, 3.4), layout="constrained")
    ax = fig.subplots()
    for x, v in enumerate(values):
        ax.vlines(x, v.min(), v.max(), color="tab:gray", linewidth=2)
        ax.plot([x - 0.2, x + 0.2], [v.mean()] * 2, color="black")
        if seeds is None:
            ax.plot(np.full(len(v), x), v, "o", color="tab:blue", alpha=0.7)
    if seeds is not None:
        for k, seed in enumerate(seeds):
            ax.plot(
                range(len(values)),
                [v[k] for v in values],
                "-o",
                alpha=0.7,
                linewidth=1,
                markersize=5,
                color=f"C{k}",
                label=f"seed {seed}",
            )
        fig.legend(loc="outside lower center", ncols=len(seeds), fontsize=8)
    ax.set_xticks(range(len(results)))
    ax.set_xticklabels(list(results), rotation=20, ha="right", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.grid(axis="y", alpha=0.3)
    if title is not None:
        ax.set_title(title, fontsize=9)
    return fig


# Notebook 08: capsules on your own images


def plot_model_curves(histories, validation_label="validation", metric="accuracy"):
    """Several models' accuracy per epoch, on their training and held-apart images.

    Args:
        histories: A dict from a model's name to its `History.history` (per
            epoch lists with `metric` and `"val_" + metric`).
        validation_label: What the `val_` images are, for the legend.
        metric: The accuracy key of the histories.

    Returns:
        A Figure with one axis: per model, one colour, its training accuracy
        dashed and its `validation_label` accuracy solid, so that where a
        model stops gaining on held-apart images while it still gains on its
        training images (it overfits) reads off the gap between its two lines.
    """
    missing = [
        name
        for name, history in histories.items()
        if metric not in history or "val_" + metric not in history
    ]
    if not histories or missing:
        raise ValueError(
            f"Every history needs `{metric}` and `val_{metric}`. "
            f"Received: {list(histories)} (without them: {missing})"
        )
    fig = Figure(figsize=(7.5, 3.8), layout="constrained")
    ax = fig.subplots()
    for k, history in enumerate(histories.values()):
        epochs = np.arange(1, len(history[metric]) + 1)
        ax.plot(epochs, history[metric], "--", color=f"C{k}", linewidth=1)
        ax.plot(epochs, history["val_" + metric], "-o", color=f"C{k}", markersize=3)
    ax.set_xlabel("epoch")
    ax.set_ylabel(metric.replace("_", " "))
    ax.grid(alpha=0.3)
    models = [
        Line2D([], [], color=f"C{k}", label=name) for k, name in enumerate(histories)
    ]
    styles = [
        Line2D([], [], color="black", linestyle="--", linewidth=1, label="training"),
        Line2D([], [], color="black", marker="o", markersize=3, label=validation_label),
    ]
    ax.legend(handles=models + styles, loc="lower right", fontsize=8)
    return fig


# Notebook 07: what capsules can do, measured


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
        its AUROC, in a legend below the axis, where it covers no curve.
    """
    if not panels or not all(panels.values()):
        raise ValueError(f"`panels` must name tasks with scores. Received: {panels}")
    rows = max(len(scores) for scores in panels.values())
    fig = Figure(figsize=(3.4 * len(panels), 3.6 + 0.16 * rows), layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (title, scores) in zip(axes, panels.items(), strict=True):
        for name, (positive, negative) in scores.items():
            fpr, tpr = roc_curve(positive, negative)
            ax.plot(fpr, tpr, label=f"{name}: {auroc(positive, negative):.3f}")
        ax.plot([0, 1], [0, 1], ":", color="gray", linewidth=1)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("false-positive rate")
        ax.set_aspect("equal")
        ax.legend(fontsize=7, title="AUROC", title_fontsize=7, **LEGEND_BELOW)
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
        A Figure with one axis per panel; each series' points carry their
        intervals as error bars, not joined by lines (the groups may be
        categories with no order between them, e.g. shifts and turns). A series
        has one colour in every panel it appears in; each panel's legend lies
        below it.
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
    fig = Figure(figsize=(4.2 * len(panels), 4.6), layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    positions = np.arange(len(groups))
    names = list(dict.fromkeys(name for series in panels.values() for name in series))
    colours = {name: f"C{k % 10}" for k, name in enumerate(names)}
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
                fmt="o",
                markersize=4,
                capsize=3,
                color=colours[name],
                label=name,
            )
        if quantity in references:
            value, name = references[quantity]
            ax.axhline(value, linestyle="--", color="gray", linewidth=1, label=name)
        ax.set_xticks(positions, groups, fontsize=8)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(quantity)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, **LEGEND_BELOW)
    return fig
