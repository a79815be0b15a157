"""The figures of notebooks 01 and 04 return Figures with the expected axes."""

import os
import sys

import numpy as np
import pytest
from conftest import REPO_ROOT
from matplotlib.colors import to_hex
from matplotlib.figure import Figure

from capsules_keras import plots

# The figures that one notebook each draws live beside the notebooks.
sys.path.insert(0, os.path.join(REPO_ROOT, "notebooks"))

import figures  # noqa: E402


def test_squash_figure():
    lengths = np.linspace(0, 5, 51)
    fig = figures.plot_squash(lengths, lengths**2 / (1 + lengths**2))
    assert isinstance(fig, Figure)
    (ax,) = fig.axes
    assert ax.get_xlabel() == "input length |s|"
    assert ax.get_ylabel() == "output length |v|"
    assert len(ax.lines) == 3  # the squash, |s|^2 and the limit 1
    np.testing.assert_allclose(ax.lines[0].get_ydata(), lengths**2 / (1 + lengths**2))


def test_routing_toy_figure(tmp_path):
    rng = np.random.default_rng(0)
    votes = rng.normal(size=(6, 2, 2))  # (i, j, m)
    parents = rng.normal(size=(3, 2, 2)) * 0.3  # (r, j, m)
    couplings = rng.dirichlet(np.ones(2), size=(3, 6))  # (r, i, j)
    fig = figures.plot_routing_toy(votes, parents, couplings, outliers=(4, 5))
    assert isinstance(fig, Figure)
    assert len(fig.axes) == 3  # one per parent + the couplings
    assert fig.axes[0].get_title() == "votes for parent 0"
    coupling_ax = fig.axes[-1]
    assert len(coupling_ax.lines) == 6  # one line per child
    np.testing.assert_allclose(coupling_ax.lines[4].get_ydata(), couplings[:, 4, 0])
    assert coupling_ax.lines[4].get_linestyle() == "--"  # outliers are dashed
    fig.savefig(tmp_path / "toy.png")
    assert (tmp_path / "toy.png").stat().st_size > 1000


def test_routing_iterations_figure():
    iterations = range(1, 5)
    single = [0.1, 0.2, 0.3, 0.4]
    two = np.array([[0.1, 0.1], [0.1, 0.2], [0.1, 0.3], [0.1, 0.4]])
    fig = plots.plot_routing_iterations(
        iterations, {"max c": two, "agreement": two}, series=["a", "b"]
    )
    assert len(fig.axes) == 2
    assert [len(ax.lines) for ax in fig.axes] == [2, 2]
    assert fig.axes[1].get_ylabel() == "agreement"
    # One legend for the figure, below the axes: the series are the same in each.
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == ["a", "b"]
    assert all(ax.get_legend() is None for ax in fig.axes)
    fig.canvas.draw()
    bottom = min(ax.get_window_extent().y0 for ax in fig.axes)
    assert legend.get_window_extent().y1 <= bottom
    fig = plots.plot_routing_iterations(iterations, {"agreement": single})
    (ax,) = fig.axes
    assert len(ax.lines) == 1 and not fig.legends


def test_routing_iterations_on_fixed_axes():
    values = np.array([[0.9, np.nan], [0.95, np.nan], [1.0, np.nan]])
    fig = plots.plot_routing_iterations(
        [1, 2, 3],
        {"plain": values, "weighted": values},
        series=["x", "y"],
        ylim=(0, 1.05),
    )
    assert [ax.get_ylim() for ax in fig.axes] == [(0, 1.05)] * 2
    # A series of one pass (NaN after the first iteration) is drawn as one dot.
    np.testing.assert_array_equal(fig.axes[0].lines[1].get_ydata()[1:], [np.nan] * 2)
    with pytest.raises(ValueError, match="ylim"):
        plots.plot_routing_iterations([1, 2, 3], {"plain": values}, ylim=(1, 0))
    with pytest.raises(ValueError, match="series"):
        plots.plot_routing_iterations([1, 2, 3], {"plain": values}, series=["x"])


def test_pca_2d():
    rng = np.random.default_rng(0)
    # Variance mostly along the first axis, then the second.
    features = rng.normal(size=(200, 5)) * np.array([10.0, 3.0, 0.1, 0.1, 0.1])
    projected, explained = figures.pca_2d(features)
    assert projected.shape == (200, 2)
    np.testing.assert_allclose(projected.mean(axis=0), 0.0, atol=1e-9)
    assert explained[0] > explained[1] > 0 and explained.sum() > 0.99
    first = np.abs(np.corrcoef(projected[:, 0], features[:, 0])[0, 1])
    assert first > 0.99


def test_capsule_pca_figure():
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(3), 20)
    features = rng.normal(size=(60, 8)) + labels[:, None]
    fig = figures.plot_capsule_pca(features, labels)
    (ax,) = fig.axes
    points, *means = ax.collections  # every point, then one mean per class
    assert len(points.get_offsets()) == 60 and len(means) == 3
    # Drawn mixed, so that the last class drawn does not cover the others.
    last_drawn = {tuple(colour) for colour in points.get_facecolors()[-20:]}
    assert len(last_drawn) > 1
    assert [text.get_text() for text in ax.texts] == ["0", "1", "2"]
    assert ax.get_xlabel().startswith("PC 1")


def test_nearest_neighbours_figure():
    rng = np.random.default_rng(0)
    queries = rng.uniform(size=(2, 14, 14, 1))
    neighbours = rng.uniform(size=(2, 3, 14, 14, 1))
    fig = figures.plot_nearest_neighbours(
        queries, neighbours, query_labels=[4, 7], labels=[[4, 4, 9], [7, 1, 7]]
    )
    assert len(fig.axes) == 2 * 4
    assert fig.axes[0].get_title() == "query 4"
    assert fig.axes[6].get_title() == "1"  # second query's second neighbour
    colours = [fig.axes[k].title.get_color() for k in (1, 3, 6, 7)]
    assert colours == ["green", "red", "red", "green"]  # the query's class or not


def _pose(x, y, degrees):
    t = np.radians(degrees)
    return np.array([[np.cos(t), -np.sin(t), x], [np.sin(t), np.cos(t), y], [0, 0, 1]])


def test_pose_votes_one_axis_per_panel_with_an_arrow_per_part_and_vote():
    parts = np.stack([_pose(0, 0, 0), _pose(2, 1, 45), _pose(-1, 3, 90)])
    votes = np.stack([_pose(1, 1, 10)] * 3)
    fig = figures.plot_pose_votes({"face": (parts, votes), "again": (parts, votes)})
    first, second = fig.get_axes()
    assert first.get_title() == "face" and second.get_title() == "again"
    assert len(first.texts) == 6  # an arrow per part and per vote
    assert len(first.get_lines()) == 6  # and a marker at each
    start, end = first.texts[1].xyann, first.texts[1].xy  # the first vote
    np.testing.assert_allclose(start, (1, 1))
    np.testing.assert_allclose(
        np.subtract(end, start), [np.cos(0.1745), np.sin(0.1745)], atol=1e-3
    )
    assert not fig.legends  # no names, no key
    # Named parts: one key below the panels, each name in its part's colour.
    names = ["left eye", "right eye", "mouth"]
    fig = figures.plot_pose_votes({"face": (parts, votes)}, part_names=names)
    (legend,) = fig.legends
    assert [text.get_text() for text in legend.get_texts()] == names
    arrows = [text.arrow_patch.get_edgecolor() for text in fig.axes[0].texts[::2]]
    keys = [line.get_color() for line in legend.get_lines()]
    assert [to_hex(c) for c in arrows] == [to_hex(c) for c in keys]
    with pytest.raises(ValueError, match="Received: \\['mouth'\\]"):
        figures.plot_pose_votes({"face": (parts, votes)}, part_names=["mouth"])


@pytest.mark.parametrize(
    ("panels", "match"),
    [
        ({}, "at least one"),
        ({"a": (np.eye(3), np.eye(3)[None])}, "homogeneous"),
        ({"a": (np.stack([np.eye(3)] * 2), np.eye(3)[None])}, "one vote"),
    ],
)
def test_pose_votes_names_bad_inputs(panels, match):
    with pytest.raises(ValueError, match=match):
        figures.plot_pose_votes(panels)
