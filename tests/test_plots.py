"""Every figure function returns a Figure with the expected axes."""

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


def test_confusion_matrix_counts():
    counts = plots.confusion_matrix([0, 1, 1, 2], [0, 1, 2, 2], num_classes=3)
    np.testing.assert_array_equal(counts, [[1, 0, 0], [0, 1, 1], [0, 0, 1]])


def test_training_curves():
    history = {"loss": [0.5, 0.3], "accuracy": [0.8, 0.9], "val_accuracy": [0.7, 0.8]}
    fig = plots.plot_training_curves(history)
    assert isinstance(fig, Figure)
    loss_ax, acc_ax = fig.axes
    assert len(loss_ax.lines) == 1 and len(acc_ax.lines) == 2
    assert acc_ax.get_ylabel() == "accuracy"
    labels = [line.get_label() for line in acc_ax.lines]
    assert labels == ["train", "validation"]
    fig = plots.plot_training_curves(history, validation_label="test")
    assert [line.get_label() for line in fig.axes[1].lines] == ["train", "test"]
    ticks = fig.axes[0].get_xticks()  # whole epochs only, even for 2 epochs
    np.testing.assert_array_equal(ticks, np.round(ticks))


def test_loss_terms_one_axis_per_term():
    history = {
        "loss": [0.5, 0.3],
        "margin_loss": [0.4, 0.2],
        "reconstruction_loss": [60.0, 40.0],
        "val_margin_loss": [0.3, 0.2],
    }
    fig = figures.plot_loss_terms(history, validation_label="test")
    margin_ax, reconstruction_ax = fig.axes
    assert [line.get_label() for line in margin_ax.lines] == ["train", "test"]
    assert len(reconstruction_ax.lines) == 1  # no validation curve given
    np.testing.assert_array_equal(reconstruction_ax.lines[0].get_ydata(), [60, 40])
    assert reconstruction_ax.get_ylabel() == "reconstruction loss"
    with pytest.raises(ValueError, match="'kl_loss'"):
        figures.plot_loss_terms(history, terms=("margin_loss", "kl_loss"))


def test_model_curves_one_colour_per_model():
    histories = {
        "capsules": {"accuracy": [0.5, 0.9], "val_accuracy": [0.4, 0.6]},
        "CNN": {"accuracy": [0.3, 0.8], "val_accuracy": [0.3, 0.7]},
    }
    fig = figures.plot_model_curves(histories, validation_label="held apart")
    (ax,) = fig.axes
    assert len(ax.lines) == 4  # each model's training and held-apart curves
    np.testing.assert_array_equal(ax.lines[3].get_ydata(), [0.3, 0.7])
    assert ax.lines[2].get_color() == ax.lines[3].get_color() != ax.lines[0].get_color()
    legend = [text.get_text() for text in ax.get_legend().get_texts()]
    assert legend == ["capsules", "CNN", "training", "held apart"]
    with pytest.raises(ValueError, match="without them: \\['CNN'\\]"):
        figures.plot_model_curves({**histories, "CNN": {"accuracy": [0.3]}})


def test_reconstructions(tmp_path):
    images = np.random.default_rng(0).uniform(0, 1, (4, 28, 28, 1))
    fig = plots.plot_reconstructions(images, images, labels=[1, 2, 3, 4])
    assert len(fig.axes) == 8
    assert fig.axes[0].get_title() == "label 1"
    fig.savefig(tmp_path / "r.png")
    assert (tmp_path / "r.png").stat().st_size > 1000


def test_confusion_matrix_figure():
    fig = plots.plot_confusion_matrix([0, 1, 2, 2], [0, 1, 2, 1], num_classes=3)
    assert len(fig.axes) == 2  # matrix and colour bar
    assert "75.00%" in fig.axes[0].get_title()


def test_confusion_matrix_names_the_classes():
    names = ["T-shirt/top", "Trouser", "Pullover"]
    fig = plots.plot_confusion_matrix([0, 1, 2], [0, 1, 1], class_names=names)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == names
    assert [t.get_text() for t in ax.get_yticklabels()] == names
    assert "66.67%" in ax.get_title()
