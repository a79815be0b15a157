"""Matplotlib figures shared by the training CLI and the notebooks.

Every function returns a `matplotlib.figure.Figure` built without pyplot, so
nothing is shown or kept in global state: save it with `fig.savefig(path)` or
let Jupyter display it.

The figures live in one module per topic: `training` (curves, confusion
matrix, mistakes, robustness, seed spread), `routing` (squash, routing,
coupling coefficients), `capsules` (reconstructions and capsule features),
`multi_digit` (overlapping digits), `diagnostics` (transform sweeps, ROC
curves of detectors, estimates with intervals by group) and `architecture`
(the CapsNet diagram); every figure is importable from here.
"""

import importlib.util

if importlib.util.find_spec("matplotlib") is None:
    raise ImportError(
        "capsules_keras.plots draws with matplotlib, which is not installed: "
        "pip install 'capsules-keras[plots]' (or matplotlib itself)."
    )

from capsules_keras.plots.architecture import plot_capsnet_architecture
from capsules_keras.plots.capsules import (
    pca_2d,
    plot_capsule_pca,
    plot_class_reconstructions,
    plot_digit_grid,
    plot_dimension_perturbations,
    plot_nearest_neighbours,
    plot_reconstructions,
    rank_dimensions,
)
from capsules_keras.plots.diagnostics import (
    plot_grouped_intervals,
    plot_roc_curves,
    plot_transform_sweep,
)
from capsules_keras.plots.multi_digit import (
    overlay_colors,
    plot_overlap_histogram,
    plot_overlapping_digits,
    plot_pair_construction,
)
from capsules_keras.plots.routing import (
    coupling_maps,
    plot_coupling_coefficients,
    plot_pair_routing,
    plot_pose_votes,
    plot_routing_iterations,
    plot_routing_toy,
    plot_squash,
)
from capsules_keras.plots.training import (
    confusion_matrix,
    plot_confusion_matrix,
    plot_loss_terms,
    plot_mistakes,
    plot_robustness,
    plot_seed_spread,
    plot_training_curves,
)

__all__ = [
    "confusion_matrix",
    "coupling_maps",
    "overlay_colors",
    "pca_2d",
    "plot_capsnet_architecture",
    "plot_capsule_pca",
    "plot_class_reconstructions",
    "plot_confusion_matrix",
    "plot_coupling_coefficients",
    "plot_digit_grid",
    "plot_dimension_perturbations",
    "plot_grouped_intervals",
    "plot_loss_terms",
    "plot_mistakes",
    "plot_nearest_neighbours",
    "plot_overlap_histogram",
    "plot_overlapping_digits",
    "plot_pair_construction",
    "plot_pair_routing",
    "plot_pose_votes",
    "plot_reconstructions",
    "plot_robustness",
    "plot_roc_curves",
    "plot_routing_iterations",
    "plot_routing_toy",
    "plot_seed_spread",
    "plot_squash",
    "plot_training_curves",
    "plot_transform_sweep",
    "rank_dimensions",
]
