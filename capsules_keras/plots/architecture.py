"""The block diagram of a CapsNet, drawn from the model's own layers."""

from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch
from matplotlib.path import Path

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
    if not hasattr(conv, "kernel_size") or not hasattr(primary, "num_capsules"):
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
    fig = Figure(figsize=(width, height))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.axis("off")
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
    # DigitCaps down to the mask, with an elbow between the rows.
    x, y, w, _ = encoder[3]
    mask_x, mask_y, mask_w, mask_h = decoder[0]
    middle = (y + mask_y + mask_h) / 2
    _arrow(
        ax,
        [
            (x + w / 2, y - 0.04),
            (x + w / 2, middle),
            (mask_x + mask_w / 2, middle),
            (mask_x + mask_w / 2, mask_y + mask_h + 0.04),
        ],
    )
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
