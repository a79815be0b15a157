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


def test_seed_spread_needs_results():
    with pytest.raises(ValueError, match="Received"):
        figures.plot_seed_spread({})
