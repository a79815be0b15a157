"""Figures of notebook 05 (MultiMNIST): each returns a Figure with the expected axes."""

import os
import sys

import numpy as np
import pytest
from conftest import REPO_ROOT
from matplotlib.figure import Figure

from capsules_keras.data.multi_mnist import overlay_pairs
from capsules_keras.plots import plot_overlapping_digits

# The figures that one notebook each draws live beside the notebooks.
sys.path.insert(0, os.path.join(REPO_ROOT, "notebooks"))

import figures  # noqa: E402


def _pairs(n):
    """`n` pairs of blocky digits: (digits, placed, images, labels, shifts)."""
    digits = np.zeros((2 * n, 28, 28, 1), "float32")
    digits[:, 8:20, 10:18] = 1.0  # a 12x8 block of ink in every digit
    labels = np.arange(2 * n) % 10
    rows, partners = np.arange(n), np.arange(n, 2 * n)
    shifts = np.tile([[[-2, 3], [1, -4]]], (n, 1, 1))
    images, pair_labels, placed = overlay_pairs(digits, labels, rows, partners, shifts)
    both = np.stack([digits[rows], digits[partners]], axis=1)
    return both, placed, images, pair_labels, shifts


def test_pair_construction_shows_digits_placements_and_boxes(tmp_path):
    digits, placed, images, labels, shifts = _pairs(2)
    fig = figures.plot_pair_construction(digits, placed, images, labels, shifts)
    assert isinstance(fig, Figure)
    assert len(fig.axes) == 12  # 2 pairs x (2 digits, 2 placed, overlay, boxes)
    assert fig.axes[0].get_title() == "digit 0"
    assert fig.axes[2].get_title() == "0 placed (-2, +3)"
    assert fig.axes[4].get_title() == f"overlay 0, {labels[0, 1]}"
    boxes = fig.axes[5].patches
    assert len(boxes) == 2  # one bounding box per digit
    # The first digit's block (rows 8:20, cols 10:18), centred on 36x36 and
    # moved by (-2, +3): rows 10:22, cols 17:25.
    assert boxes[0].get_xy() == (16.5, 9.5)
    assert (boxes[0].get_width(), boxes[0].get_height()) == (8, 12)
    fig.savefig(tmp_path / "pairs.png")
    assert (tmp_path / "pairs.png").stat().st_size > 1000
    # Without shifts the titles say less; an empty digit has no box.
    placed[0, 1] = 0
    fig = figures.plot_pair_construction(digits[:1], placed[:1], images[:1], labels[:1])
    assert fig.axes[2].get_title() == "0 placed"
    assert len(fig.axes[5].patches) == 1
    with pytest.raises(ValueError, match="Received: 0"):
        figures.plot_pair_construction(digits[:0], placed[:0], images[:0], labels[:0])


def test_overlapping_digits_titles_say_which_capsules_were_decoded():
    _, placed, images, labels, _ = _pairs(2)
    read = np.array([labels[0][::-1], [labels[1][0], 9]])  # the second misread
    fig = plot_overlapping_digits(images, placed, labels, read)
    bottom = fig.axes[2:]
    assert [ax.get_title() for ax in bottom] == ["R: 2, 0", "R: 1, 9"]
    assert bottom[1].title.get_color() == "tab:red"
    assert bottom[0].title.get_color() != "tab:red"
    # From the true classes: no "R:" that could pass for classes read.
    fig = plot_overlapping_digits(images, placed, labels)
    assert [ax.get_title() for ax in fig.axes[2:]] == ["", ""]
    assert "true" in fig.axes[2].get_ylabel() and "true" in fig.get_suptitle()
    assert fig.axes[0].get_title() == "L: 0, 2"
    with pytest.raises(ValueError, match="Received: 0"):
        plot_overlapping_digits(images[:0], placed[:0], labels[:0])


def test_overlap_histogram_marks_mean_and_median():
    overlaps = np.array([0.0, 0.5, 0.5, 1.0, 1.0])
    fig = figures.plot_overlap_histogram(overlaps, bins=4)
    (ax,) = fig.axes
    heights = [patch.get_height() for patch in ax.patches]
    np.testing.assert_allclose(heights, [0.2, 0.0, 0.4, 0.4])  # shares of pairs
    assert [line.get_xdata()[0] for line in ax.lines] == pytest.approx([0.6, 0.5])
    assert ax.get_legend().get_texts()[0].get_text() == "mean 60%"
    assert "5 pairs" in ax.get_title()
    with pytest.raises(ValueError, match="Received: 0"):
        figures.plot_overlap_histogram([])


def test_pair_routing_maps_the_two_digit_capsules():
    grid, types, classes = (3, 4), 2, 10
    in_capsules = 3 * 4 * types
    c = np.full((in_capsules, classes), 0.1)
    # Capsules of the first grid cell (i // types == 0) send more to 7 than to 2.
    c[:types, 7], c[:types, 2] = 0.3, 0.05
    digits = np.zeros((2, 36, 36, 1))
    fig = figures.plot_pair_routing(
        np.zeros((36, 36, 1)),
        [np.full((in_capsules, classes), 0.1), c],
        grid,
        classes=(2, 7),
        digits=digits,
        row_titles=["start", "end"],
    )
    # input, 2 rows x (to a, to b, share), two colour bars.
    assert len(fig.axes) == 1 + 2 * 3 + 2
    assert fig.axes[0].get_title() == "input: 2 red, 7 green"
    to_b = fig.axes[1 + 3 + 1].images[0].get_array()  # row "end", map "to 7"
    assert to_b.shape == grid
    assert to_b[0, 0] == pytest.approx(0.3) and to_b[1, 1] == pytest.approx(0.1)
    share = fig.axes[1 + 3 + 2].images[0].get_array()
    assert share[0, 0] == pytest.approx(0.3 / 0.35) and share[2, 3] == 0.5
    assert fig.axes[1 + 3].get_ylabel() == "end"
    # Both scales centred: the couplings on uniform (1/10), the share on 0.5.
    low, high = fig.axes[1 + 3 + 1].images[0].get_clim()
    assert (low + high) / 2 == pytest.approx(0.1) and high - 0.1 == pytest.approx(0.2)
    assert fig.axes[1 + 3 + 2].images[0].get_clim()[1] == pytest.approx(0.3 / 0.35)
    fixed = figures.plot_pair_routing(
        np.zeros((36, 36, 1)), [c], grid, (2, 7), coupling_range=0.02, share_range=0.1
    )
    assert fixed.axes[2].images[0].get_clim() == pytest.approx((0.08, 0.12))
    assert fixed.axes[3].images[0].get_clim() == pytest.approx((0.4, 0.6))
    with pytest.raises(ValueError, match="coupling_range"):
        figures.plot_pair_routing(
            np.zeros((36, 36, 1)), [c], grid, (2, 7), coupling_range=0
        )
    with pytest.raises(ValueError, match="do not fill"):
        figures.plot_pair_routing(np.zeros((36, 36, 1)), [c], (5, 5), (2, 7))
