"""Matplotlib figures shared by the training CLI's report and the notebooks.

Every function returns a `matplotlib.figure.Figure` built without pyplot, so
nothing is shown or kept in global state: save it with `fig.savefig(path)` or
let Jupyter display it.

The figures live in one module per topic: `training` (training curves, the
confusion matrix), `routing` (routing iterations, coupling coefficients),
`capsules` (reconstructions, a grid of digits) and `multi_digit` (overlapping
digits); every figure is importable from here. These are the figures that
the trainer's report or several notebooks draw; a figure that one notebook
draws lives beside the notebooks, in `notebooks/figures.py`.
"""

import importlib.util

if importlib.util.find_spec("matplotlib") is None:
    raise ImportError(
        "capsules_keras.plots draws with matplotlib, which is not installed: "
        "pip install 'capsules-keras[plots]' (or matplotlib itself)."
    )

from capsules_keras.plots.capsules import plot_digit_grid, plot_reconstructions
from capsules_keras.plots.multi_digit import plot_overlapping_digits
from capsules_keras.plots.routing import (
    coupling_maps,
    plot_coupling_coefficients,
    plot_routing_iterations,
)
from capsules_keras.plots.training import (
    confusion_matrix,
    plot_confusion_matrix,
    plot_training_curves,
)

__all__ = [
    "confusion_matrix",
    "coupling_maps",
    "plot_confusion_matrix",
    "plot_coupling_coefficients",
    "plot_digit_grid",
    "plot_overlapping_digits",
    "plot_reconstructions",
    "plot_routing_iterations",
    "plot_training_curves",
]
