"""Figures of notebook 07: transform sweeps, ROC curves, grouped intervals."""

import os
import sys

import numpy as np
import pytest
from conftest import REPO_ROOT
from matplotlib.figure import Figure

# The figures that one notebook each draws live beside the notebooks.
sys.path.insert(0, os.path.join(REPO_ROOT, "notebooks"))

import figures  # noqa: E402

RNG = np.random.default_rng(0)
STEPS = 5


def _sweep(**changes):
    arguments = {
        "values": np.linspace(-4, 4, STEPS),
        "images": RNG.uniform(0, 1, (STEPS, 28, 28, 1)),
        "reconstructions": RNG.uniform(0, 1, (STEPS, 28, 28, 1)),
        "evidence": {
            "capsule length": RNG.uniform(0, 1, (STEPS, 30)),
            "CNN probability": RNG.uniform(0, 1, STEPS),
        },
        "poses": RNG.normal(size=(STEPS, 16)),
    }
    return {**arguments, **changes}


def test_transform_sweep_shows_images_evidence_and_poses(tmp_path):
    fig = figures.plot_transform_sweep(**_sweep(), label="shift (pixels)")
    assert isinstance(fig, Figure)
    axes = fig.get_axes()
    assert len(axes) == 2 * STEPS + 2
    evidence, poses = axes[-2], axes[-1]
    assert [text.get_text() for text in evidence.get_legend().get_texts()] == [
        "capsule length",
        "CNN probability",
    ]
    assert len(poses.get_lines()) == 16
    assert evidence.get_xlabel() == "shift (pixels)"
    fig.savefig(tmp_path / "sweep.png")


@pytest.mark.parametrize(
    "changes, match",
    [
        ({"images": np.zeros((STEPS - 1, 28, 28, 1))}, "images.shape"),
        ({"poses": np.zeros(STEPS)}, "poses.shape"),
        ({"evidence": {}}, "evidence"),
        ({"evidence": {"CNN": np.zeros(STEPS + 1)}}, "evidence\\['CNN'\\]"),
        ({"values": np.zeros(1)}, "at least 2 steps"),
    ],
)
def test_transform_sweep_names_bad_inputs(changes, match):
    with pytest.raises(ValueError, match=match):
        figures.plot_transform_sweep(**_sweep(**changes))


def test_roc_curves_one_axis_per_task_with_each_auroc():
    flagged, normal = np.array([0.9, 0.8, 0.4]), np.array([0.1, 0.5])
    fig = figures.plot_roc_curves(
        {
            "Fashion-MNIST vs MNIST": {
                "error": (flagged, normal),
                "CNN": (normal, flagged),
            },
            "noise vs MNIST": {"error": (flagged, normal)},
        }
    )
    first, second = fig.get_axes()
    labels = [text.get_text() for text in first.get_legend().get_texts()]
    assert labels == ["error: 0.833", "CNN: 0.167"]
    assert first.get_title() == "Fashion-MNIST vs MNIST"
    assert len(second.get_lines()) == 2  # the curve and the diagonal of chance
    # Each legend lies below its axis, where it covers no curve.
    fig.draw_without_rendering()
    for ax in (first, second):
        assert ax.get_legend().get_window_extent().y1 < ax.get_window_extent().y0
    with pytest.raises(ValueError, match="Received"):
        figures.plot_roc_curves({})


def test_grouped_intervals_one_axis_per_panel_with_bars_and_reference():
    groups = ["< 50%", "50-80%", ">= 80%"]
    estimate = np.array([0.8, 0.7, 0.6])
    panels = {
        "correlation": {
            "redrawn": (estimate, estimate - 0.05, estimate + 0.05),
            "overlay": (estimate - 0.2, estimate - 0.3, estimate - 0.1),
        },
        "share right": {"redrawn": (estimate, estimate - 0.1, estimate + 0.1)},
    }
    fig = figures.plot_grouped_intervals(
        groups, panels, "overlap", references={"share right": (0.5, "chance")}
    )
    first, second = fig.get_axes()
    assert [t.get_text() for t in first.get_xticklabels()] == groups
    assert first.get_ylabel() == "correlation"
    labels = [t.get_text() for t in second.get_legend().get_texts()]
    assert sorted(labels) == ["chance", "redrawn"]
    (bars,) = [c for c in second.containers if hasattr(c, "lines")]
    np.testing.assert_allclose(bars.lines[0].get_ydata(), estimate)
    assert bars.lines[0].get_linestyle() == "None"  # categories: no joining line
    # A series keeps its colour from panel to panel, whatever precedes it.
    redrawn = panels["correlation"]["redrawn"]
    panels = {"a": {"x": panels["correlation"]["overlay"], "redrawn": redrawn}}
    panels["b"] = {"redrawn": redrawn}
    axes = figures.plot_grouped_intervals(groups, panels, "overlap").get_axes()
    first, second = (
        [bars.lines[0].get_color() for bars in ax.containers] for ax in axes
    )
    assert first[1] == second[0] != first[0]
    # Each legend lies below its axis, where it covers no point.
    fig = figures.plot_grouped_intervals(groups, panels, "overlap")
    fig.draw_without_rendering()
    for ax in fig.get_axes():
        assert ax.get_legend().get_window_extent().y1 < ax.get_window_extent().y0


@pytest.mark.parametrize(
    ("groups", "panels", "references", "match"),
    [
        ([], {"a": {"s": ([1], [0], [2])}}, None, "must not be empty"),
        (["g"], {"a": {}}, None, "must not be empty"),
        (["g", "h"], {"a": {"s": ([1], [0], [2])}}, None, "one entry per step"),
        (["g"], {"a": {"s": ([1], [2], [3])}}, None, "hold its estimate"),
        (["g"], {"a": {"s": ([1], [0], [2])}}, {"b": (0.5, "x")}, "not in"),
    ],
)
def test_grouped_intervals_names_bad_inputs(groups, panels, references, match):
    with pytest.raises(ValueError, match=match):
        figures.plot_grouped_intervals(groups, panels, "x", references=references)
