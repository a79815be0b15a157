"""The figures of notebook 06 (does routing matter?) show the data they get."""

import os
import sys

import numpy as np
import pytest
from conftest import REPO_ROOT
from matplotlib.figure import Figure

# The figures that one notebook each draws live beside the notebooks.
sys.path.insert(0, os.path.join(REPO_ROOT, "notebooks"))

import figures  # noqa: E402


def test_seed_spread_figure(tmp_path):
    results = {"dynamic, 3": [0.91, 0.93, 0.92], "self-attention": [0.95, 0.94]}
    fig = figures.plot_seed_spread(results, ylabel="accuracy", title="MNIST")
    assert isinstance(fig, Figure)
    (ax,) = fig.axes
    assert ax.get_ylabel() == "accuracy" and ax.get_title() == "MNIST"
    assert [t.get_text() for t in ax.get_xticklabels()] == list(results)
    # Per model: the mean tick, then the dots of the seeds.
    mean_tick, dots = ax.lines[0], ax.lines[1]
    np.testing.assert_allclose(mean_tick.get_ydata(), [0.92, 0.92])
    np.testing.assert_allclose(dots.get_ydata(), results["dynamic, 3"])
    np.testing.assert_allclose(ax.lines[3].get_ydata(), results["self-attention"])
    np.testing.assert_allclose(ax.lines[3].get_xdata(), [1, 1])
    # The range bars span min to max.
    (segment,) = ax.collections[1].get_segments()
    np.testing.assert_allclose(segment, [[1, 0.94], [1, 0.95]])
    fig.savefig(tmp_path / "spread.png")
    assert (tmp_path / "spread.png").stat().st_size > 1000


def test_seed_spread_links_each_seed_across_the_models():
    results = {
        "none": [0.90, 0.93],
        "dynamic, 3": [0.91, 0.94],
        "inverted": [0.92, 0.92],
    }
    fig = figures.plot_seed_spread(results, seeds=(0, 1))
    (ax,) = fig.axes
    seed_lines = [line for line in ax.lines if line.get_label().startswith("seed")]
    assert [line.get_label() for line in seed_lines] == ["seed 0", "seed 1"]
    np.testing.assert_allclose(seed_lines[0].get_ydata(), [0.90, 0.91, 0.92])
    np.testing.assert_allclose(seed_lines[1].get_ydata(), [0.93, 0.94, 0.92])
    np.testing.assert_allclose(seed_lines[1].get_xdata(), [0, 1, 2])
    assert seed_lines[0].get_color() != seed_lines[1].get_color()
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == ["seed 0", "seed 1"]
    fig.canvas.draw()
    assert legend.get_window_extent().y1 <= ax.get_window_extent().y0
    with pytest.raises(ValueError, match="one value per seed"):
        figures.plot_seed_spread(
            {"none": [0.9], "dynamic, 3": [0.9, 0.8]}, seeds=(0, 1)
        )


def test_seed_spread_needs_results():
    with pytest.raises(ValueError, match="Received"):
        figures.plot_seed_spread({})
