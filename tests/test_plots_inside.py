"""Figures of notebooks 02 and 03: each returns a Figure with the expected axes."""

import os
import sys

import numpy as np
import pytest
from conftest import REPO_ROOT
from matplotlib.figure import Figure

from capsules_keras import plots

# The figures that one notebook each draws live beside the notebooks.
sys.path.insert(0, os.path.join(REPO_ROOT, "notebooks"))

import figures  # noqa: E402

RNG = np.random.default_rng(0)


def _digits(*shape):
    return RNG.uniform(0, 1, (*shape, 28, 28, 1)).astype("float32")


def test_digit_grid_fills_rows_and_drops_spare_axes(tmp_path):
    fig = plots.plot_digit_grid(
        _digits(7), titles=[str(k) for k in range(7)], columns=3
    )
    assert isinstance(fig, Figure)
    assert len(fig.axes) == 7  # a 3x3 grid less the two unused cells
    assert fig.axes[6].get_title() == "6"
    fig.savefig(tmp_path / "grid.png")
    with pytest.raises(ValueError, match="Received: 0"):
        plots.plot_digit_grid(_digits(0))


def test_mistakes_show_digits_above_capsule_lengths():
    lengths = np.full((3, 10), 0.05)
    lengths[np.arange(3), [7, 2, 9]] = 0.8  # predictions
    fig = figures.plot_mistakes(_digits(3), labels=[1, 3, 4], lengths=lengths)
    assert len(fig.axes) == 6
    assert fig.axes[0].get_title() == "true 1, pred 7"
    bars = fig.axes[3].patches  # row-major: 3 digits, then their bar charts
    assert len(bars) == 10
    assert bars[7].get_height() == pytest.approx(0.8)
    assert bars[7].get_facecolor() != bars[0].get_facecolor()  # predicted: red
    assert fig.axes[3].get_ylim() == (0.0, 1.0)


def test_class_reconstructions_grid():
    fig = figures.plot_class_reconstructions(_digits(2), _digits(2, 10), labels=[3, 5])
    assert len(fig.axes) == 2 * 11
    assert fig.axes[0].get_title() == "input"
    assert fig.axes[1].get_title() == "as 0"
    framed = fig.axes[11 + 1 + 5]  # second row, the column of its label 5
    assert framed.spines["top"].get_linewidth() == pytest.approx(2.5)


@pytest.mark.parametrize("n", [None, 1, 3])
def test_dimension_perturbations_one_mosaic_per_digit(n):
    deltas = np.round(np.arange(-0.25, 0.26, 0.05), 2)
    shape = (16, len(deltas)) if n is None else (n, 16, len(deltas))
    fig = figures.plot_dimension_perturbations(_digits(*shape), deltas)
    assert len(fig.axes) == (n or 1)
    ax = fig.axes[0]
    assert len(ax.get_yticks()) == 16
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels[0] == "-0.25" and labels[-1] == "+0.25"
    (mosaic,) = ax.get_images()
    assert mosaic.get_array().shape == (16 * 30 - 2, len(deltas) * 30 - 2)


def test_coupling_coefficients_maps():
    grid, types, classes = (6, 6), 32, 10
    couplings = [RNG.dirichlet(np.ones(classes), 36 * types) for _ in range(2)]
    weights = RNG.uniform(0, 1, 36 * types)
    fig = plots.plot_coupling_coefficients(
        _digits(1)[0],
        couplings,
        grid,
        row_titles=["first", "inverted dot-product, 3"],
        weights=weights,
        highlight=3,
    )
    # A long row name is wrapped, to fit the row's height unclipped.
    assert fig.axes[1 + classes].get_ylabel() == "inverted\ndot-product, 3"
    # The image, 2 rows of 10 maps, the colour bar.
    assert len(fig.axes) == 1 + 2 * classes + 1
    maps = [ax for ax in fig.axes if ax.get_images() and ax.get_title() != "input"]
    assert len(maps) == 2 * classes
    first = maps[0].get_images()[0].get_array()
    assert first.shape == grid
    # Each cell averages the types: with couplings summing to 1 over the
    # classes, the ten maps of a row sum to 1 in every cell.
    total = sum(ax.get_images()[0].get_array() for ax in maps[:classes])
    np.testing.assert_allclose(total, 1.0, rtol=1e-6)
    assert fig.axes[-1].get_ylabel() == "mean coupling"  # the colour bar
    fig = plots.plot_coupling_coefficients(
        _digits(1)[0], couplings[:1], grid, label="mean assignment R"
    )
    assert fig.axes[-1].get_ylabel() == "mean assignment R"
    with pytest.raises(ValueError, match="grid_shape"):
        plots.plot_coupling_coefficients(_digits(1)[0], couplings, (5, 5))


def test_robustness_one_axis_per_sweep_one_curve_per_model():
    sweeps = {
        "shift (pixels)": (
            [0, 2, 4],
            {"CapsNet": [0.9, 0.8, 0.5], "CNN": [0.9, 0.7, 0.3]},
        ),
        "rotation (degrees)": ([0, 30], {"CapsNet": [0.9, 0.6], "CNN": [0.9, 0.5]}),
    }
    fig = figures.plot_robustness(sweeps)
    assert len(fig.axes) == 2
    assert [len(ax.lines) for ax in fig.axes] == [2, 2]
    assert fig.axes[1].get_xlabel() == "rotation (degrees)"
    assert fig.axes[0].get_ylabel() == "test accuracy"


def _diagram_texts(model, plot=figures.plot_capsnet_architecture):
    fig = plot(model)
    (ax,) = fig.axes
    texts = "\n".join([fig._suptitle.get_text()] + [t.get_text() for t in ax.texts])
    return fig, ax, texts


def test_capsnet_architecture_diagram_reads_the_model(tmp_path):
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    from capsules_keras.models import CapsNet

    model = CapsNet(conv_filters=16, primary_capsules=4, decoder_units=(32, 64))
    fig, ax, texts = _diagram_texts(model)
    boxes = [p for p in ax.patches if isinstance(p, FancyBboxPatch)]
    arrows = [p for p in ax.patches if isinstance(p, FancyArrowPatch)]
    # Encoder: input, Conv1, PrimaryCaps, DigitCaps, lengths; decoder: mask,
    # the dense layers 32, 64 and 784 (the image), the reconstruction.
    assert len(boxes) == 5 + 5
    assert len(arrows) == 4 + 1 + 4  # each row's chain and DigitCaps -> mask
    total = model.count_params()
    assert f"{total:,} parameters" in fig._suptitle.get_text()
    assert "28 x 28 x 1" in texts
    assert "16 filters, 9x9, stride 1" in texts and "→ 20 x 20 x 16" in texts
    assert "4 types x 8D, 9x9, stride 2" in texts
    assert "6 x 6 grid → 144 capsules" in texts  # 6 * 6 * 4
    assert "10 capsules x 16D" in texts and "dynamic routing, 3 iterations" in texts
    for units in ("FC 32", "FC 64", "FC 784"):
        assert units in texts
    for layer in (model.conv, model.primary_caps, model.digit_caps):
        assert f"{layer.count_params():,} params" in texts
    fig.savefig(tmp_path / "architecture.png")

    other = CapsNet(
        image_shape=(32, 32, 1),
        conv_filters=8,
        primary_capsules=2,
        primary_dim=4,
        digit_dim=6,
        decoder_units=(16,),
        routing_iterations=2,
    )
    fig, ax, other_texts = _diagram_texts(other)
    assert len([p for p in ax.patches if isinstance(p, FancyBboxPatch)]) == 5 + 4
    assert f"{other.count_params():,} parameters" in other_texts
    assert f"{total:,} parameters" not in other_texts
    assert "8 x 8 grid → 128 capsules" in other_texts  # 8 * 8 * 2
    assert "10 capsules x 6D" in other_texts and "routing, 2 iterations" in other_texts
    assert "FC 1,024" in other_texts and "FC 32" not in other_texts  # 32 * 32 * 1


def test_cnn_architecture_diagram_shows_where_the_parameters_sit(tmp_path):
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    from capsules_keras.models import baseline_cnn

    model = baseline_cnn(dense_units=32)
    fig, ax, texts = _diagram_texts(model, figures.plot_cnn_architecture)
    # Top: the input and three convolutions; bottom: three dense layers.
    assert len([p for p in ax.patches if isinstance(p, FancyBboxPatch)]) == 4 + 3
    assert len([p for p in ax.patches if isinstance(p, FancyArrowPatch)]) == 3 + 1 + 2
    assert f"baseline_cnn: {model.count_params():,} parameters" in texts
    assert "128 filters, 5x5, stride 1\nReLU → 28 x 28 x 128" in texts
    assert "max-pool 2x2 → 14 x 14 x 128" in texts
    assert "flatten →\n32 units\nReLU" in texts
    assert "dropout 0.5 →\n10 units\nsoftmax" in texts
    fc1 = model.get_layer("fc1").count_params()
    share = fc1 / model.count_params()
    assert f"{fc1:,} params ({share:.0%})" in texts
    fig.savefig(tmp_path / "cnn.png")


def test_cnn_architecture_names_a_layer_it_cannot_draw():
    import keras

    inputs = keras.Input((8, 8, 1))
    x = keras.layers.Conv2D(2, 3)(inputs)
    x = keras.layers.BatchNormalization(name="norm")(x)
    outputs = keras.layers.Dense(2)(keras.layers.Flatten()(x))
    with pytest.raises(ValueError, match="BatchNormalization layer \\('norm'\\)"):
        figures.plot_cnn_architecture(keras.Model(inputs, outputs))


def test_capsnet_architecture_refuses_other_encoders():
    from capsules_keras.models import EfficientCapsNet

    with pytest.raises(ValueError, match="EfficientCapsNet"):
        figures.plot_capsnet_architecture(EfficientCapsNet(decoder_units=(8,)))


def test_class_reconstructions_write_the_capsule_lengths():
    lengths = np.linspace(0.01, 0.99, 20).reshape(2, 10)
    fig = figures.plot_class_reconstructions(
        _digits(2), _digits(2, 10), labels=[3, 5], lengths=lengths
    )
    assert len(fig.axes) == 2 * 11
    assert fig.axes[0].get_title() == "input"
    assert fig.axes[1].get_title() == f"as 0\n|v|={lengths[0, 0]:.2f}"  # |v|=0.01
    assert fig.axes[4].get_title() == "as 3\n|v|=0.16"
    assert fig.axes[11].get_title() == ""  # the second input has no title
    assert fig.axes[11 + 1 + 9].get_title() == "|v|=0.99"
    with pytest.raises(ValueError, match=r"Received: lengths.shape=\(2, 9\)"):
        figures.plot_class_reconstructions(
            _digits(2), _digits(2, 10), lengths=lengths[:, :9]
        )


def _mosaics(digits=2, dims=4, steps=5, loud=(2, 0)):
    """Mosaics whose dimension `loud[k]` of digit `k` changes most, then `dims-1`."""
    mosaics = np.zeros((digits, dims, steps, 6, 6, 1))
    ramp = np.linspace(0, 1, steps)[:, None, None, None]  # (steps, 1, 1, 1)
    for k in range(digits):
        for d in range(dims):
            # A change of 0.1 per dimension, 0.9 for the loud one; the last
            # dimension 0.3, so the expected order is loud, last, the others.
            size = 0.9 if d == loud[k] else 0.3 if d == dims - 1 else 0.1
            mosaics[k, d] = 0.05 + size * ramp
    return mosaics


def test_rank_dimensions_puts_the_most_changing_dimension_first():
    order, change = figures.rank_dimensions(_mosaics())
    assert order.shape == change.shape == (2, 4)
    np.testing.assert_array_equal(order, [[2, 3, 0, 1], [0, 3, 1, 2]])
    np.testing.assert_allclose(change[0], [0.1, 0.1, 0.9, 0.3])
    one_order, one_change = figures.rank_dimensions(_mosaics()[1])  # one digit
    np.testing.assert_array_equal(one_order, order[1:])
    with pytest.raises(ValueError, match="Received: reconstructions.shape"):
        figures.rank_dimensions(np.zeros((2, 4, 1, 6, 6, 1)))  # one step


def test_dimension_perturbations_draw_only_the_chosen_dimensions():
    mosaics = _mosaics()
    deltas = np.linspace(-0.25, 0.25, 5)
    full = figures.plot_dimension_perturbations(mosaics, deltas)
    fig = figures.plot_dimension_perturbations(mosaics, deltas, dimensions=[3, 1])
    assert len(fig.axes) == 2  # still one mosaic per digit
    for ax in fig.axes:
        assert [t.get_text() for t in ax.get_yticklabels()] == ["dim 3", "dim 1"]
        (mosaic,) = ax.get_images()
        assert mosaic.get_array().shape == (2 * 8 - 2, 5 * 8 - 2)
    canvas = fig.axes[0].get_images()[0].get_array()
    # Row 0 is dimension 3 (last step 0.35), row 1 dimension 1 (last 0.15).
    np.testing.assert_allclose(canvas[:6, -6:], 0.35)
    np.testing.assert_allclose(canvas[8:, -6:], 0.15)
    # Larger tiles: one digit under another, each as wide as a full row.
    width, full_width = fig.get_size_inches()[0], full.get_size_inches()[0]
    assert width < full_width and width / 5 > full_width / (2 * 5)
    # One order per digit, e.g. the top two of rank_dimensions.
    order, _ = figures.rank_dimensions(mosaics)
    fig = figures.plot_dimension_perturbations(mosaics, deltas, dimensions=order[:, :2])
    labels = [[t.get_text() for t in ax.get_yticklabels()] for ax in fig.axes]
    assert labels == [["dim 2", "dim 3"], ["dim 0", "dim 3"]]
    for bad in ([4], [], [[0, 1]], [0.5]):
        with pytest.raises(ValueError, match="Received: dimensions="):
            figures.plot_dimension_perturbations(mosaics, deltas, dimensions=bad)


def test_coupling_coefficients_centred_on_the_uniform_value():
    grid, types, classes = (6, 6), 32, 10
    couplings = [RNG.dirichlet(np.ones(classes), 36 * types) for _ in range(2)]
    plain = plots.plot_coupling_coefficients(_digits(1)[0], couplings, grid)
    fig = plots.plot_coupling_coefficients(
        _digits(1)[0], couplings, grid, label="c_ij", center=0.1
    )
    plain_maps = plain.axes[1:-1]
    maps = fig.axes[1:-1]
    assert len(maps) == 2 * classes
    deviations = []
    for ax, plain_ax in zip(maps, plain_maps, strict=True):
        (shown,) = ax.get_images()
        expected = plain_ax.get_images()[0].get_array() - 0.1
        np.testing.assert_allclose(shown.get_array(), expected)
        assert shown.get_cmap().name == "RdBu_r"
        assert shown.norm.vmin == -shown.norm.vmax
        deviations.append(expected)
    low, high = np.min(deviations), np.max(deviations)
    assert maps[0].get_images()[0].norm.vmax == pytest.approx(max(-low, high))
    assert fig.axes[-1].get_ylabel() == "c_ij - 0.1"
    assert fig.get_suptitle() == f"c_ij - 0.1 from {low:+.4f} to {high:+.4f}"
    # Without `center`: viridis on the maps' own range, and no title.
    assert plain_maps[0].get_images()[0].get_cmap().name == "viridis"
    assert plain.get_suptitle() == ""
    with pytest.raises(ValueError, match="Received: center='0.1'"):
        plots.plot_coupling_coefficients(_digits(1)[0], couplings, grid, center="0.1")


def test_coupling_coefficients_on_a_fixed_range():
    grid, types, classes = (6, 6), 32, 10
    couplings = [RNG.dirichlet(np.ones(classes), 36 * types)]
    image = _digits(1)[0]
    deviations = plots.coupling_maps(couplings, grid)[0] - 0.1
    low, high = deviations.min(), deviations.max()
    inside, cut = max(-low, high) * 1.01, min(-low, high) / 2
    for value_range, extend in [(inside, "neither"), (cut, "both")]:
        fig = plots.plot_coupling_coefficients(
            image, couplings, grid, center=0.1, value_range=value_range
        )
        for ax in fig.axes[1:-1]:
            (shown,) = ax.get_images()
            assert (shown.norm.vmin, shown.norm.vmax) == (-value_range, value_range)
        assert fig.axes[-1].get_ylabel() == "mean coupling - 0.1"
        assert fig.axes[-1]._colorbar.extend == extend  # arrows where values are cut
        assert fig.get_suptitle() == (
            f"mean coupling - 0.1 from {low:+.4f} to {high:+.4f}; "
            f"colour scale fixed at \u00b1{value_range:g}"
        )
    with pytest.raises(ValueError, match="pass `center` too"):
        plots.plot_coupling_coefficients(image, couplings, grid, value_range=0.05)
    with pytest.raises(ValueError, match="Received: value_range=0"):
        plots.plot_coupling_coefficients(
            image, couplings, grid, center=0.1, value_range=0
        )


def test_robustness_bands_are_wilson_intervals():
    from matplotlib.collections import PolyCollection
    from matplotlib.colors import to_rgb

    from capsules_keras.metrics import binomial_interval

    sweeps = {
        "shift (pixels)": (
            [0, 2, 4],
            {"CapsNet": [0.9, 0.8, 0.5], "CNN": [0.9, 0.7, 0.3]},
        ),
        "rotation (degrees)": ([0, 30], {"CapsNet": [0.9, 0.6], "CNN": [0.9, 0.5]}),
    }
    plain = figures.plot_robustness(sweeps)
    assert [len(ax.collections) for ax in plain.axes] == [0, 0]
    assert plain.axes[0].get_title() == ""
    fig = figures.plot_robustness(sweeps, num_samples=200)
    assert [len(ax.lines) for ax in fig.axes] == [2, 2]
    assert [len(ax.collections) for ax in fig.axes] == [2, 2]
    band = fig.axes[0].collections[1]  # CNN's shift band
    assert isinstance(band, PolyCollection)
    assert tuple(band.get_facecolor()[0][:3]) == pytest.approx(
        to_rgb(fig.axes[0].lines[1].get_color())
    )
    low, high = binomial_interval([0.9, 0.7, 0.3], 200)
    y = band.get_paths()[0].vertices[:, 1]
    assert y.max() == pytest.approx(high.max())
    assert y.min() == pytest.approx(low.min())
    assert "95% Wilson" in fig.axes[0].get_title()
    with pytest.raises(ValueError, match="Received: num_samples=0"):
        figures.plot_robustness(sweeps, num_samples=0)
