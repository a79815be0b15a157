"""A run's report: its figures, `report.md`, and the summary the CLI prints."""

import importlib.util

import numpy as np

from capsules_keras.data import get_dataset
from capsules_keras.inputs import prepare_images
from capsules_keras.models import CapsuleClassifier
from capsules_keras.training.registry import MODELS


def report_figures(model, history, x_test, y_test, scores, dataset):
    """The report's figures by file name: the training curves, then the dataset's.

    `dataset.figures` names the figures that show its results (keys of
    `FIGURES`); a figure that needs a capsule decoder is left out for models
    without one (not a `CapsuleClassifier`). None at all without matplotlib (the
    `plots` extra): the run trains and reports its numbers all the same.
    """
    if importlib.util.find_spec("matplotlib") is None:
        return {}
    from capsules_keras import plots

    # --validate evaluates on the test set after every epoch.
    curves = plots.plot_training_curves(history, "test", dataset.accuracy_metric)
    figures = {"training_curves.png": curves}
    for name in dataset.figures:
        figure = FIGURES[name](model, x_test, y_test, scores, dataset)
        if figure is not None:
            figures[name] = figure
    return figures


def confusion_figure(model, x_test, y_test, scores, dataset):
    """Test labels against the predicted classes."""
    from capsules_keras import plots

    return plots.plot_confusion_matrix(
        y_test, scores.argmax(-1), class_names=dataset.class_names
    )


def reconstructions_figure(model, x_test, y_test, scores, dataset):
    """A test image of each class above its reconstruction; capsule models only."""
    if not isinstance(model, CapsuleClassifier):
        return None
    names = dataset.class_names
    shown = np.concatenate(
        [np.flatnonzero(y_test == c)[:1] for c in range(dataset.num_classes)]
    )
    inside = model.analyze(x_test[shown])
    from capsules_keras import plots

    return plots.plot_reconstructions(
        prepare_images(x_test[shown], x_test.shape[1:]),  # uint8 to [0, 1]
        inside["reconstructions"],
        [names[c] for c in y_test[shown]],
        [names[c] for c in inside["predictions"]],
    )


def overlapping_digits_figure(model, x_test, y_test, scores, dataset):
    """Ten test pairs, each digit reconstructed from its own capsule."""
    if not isinstance(model, CapsuleClassifier):
        return None
    shown = slice(0, 10)
    inside = model.analyze(x_test[shown])
    from capsules_keras import plots

    return plots.plot_overlapping_digits(
        x_test[shown],
        inside["reconstructions"],
        y_test["labels"][shown],
        inside["predictions"],
    )


#: The figures a dataset can ask for (`Dataset.figures`), by file name.
FIGURES = {
    "confusion_matrix.png": confusion_figure,
    "reconstructions.png": reconstructions_figure,
    "overlapping_digits.png": overlapping_digits_figure,
}


def title(metrics):
    """E.g. "CapsNet on Fashion-MNIST", "CapsNet on image folder 'flowers'"."""
    data = metrics.get("dataset_title") or get_dataset(metrics["dataset"]).title
    return f"{MODELS[metrics['model']].title} on {data}"


#: How many class names the report and the summary show.
CLASSES_SHOWN = 20


def describe_classes(class_names):
    """E.g. "3: daisy, rose, tulip"; of many, the first `CLASSES_SHOWN`."""
    shown = ", ".join(class_names[:CLASSES_SHOWN])
    more = len(class_names) - CLASSES_SHOWN
    return f"{len(class_names)}: {shown}" + (f", ... ({more} more)" if more > 0 else "")


def classes_text(metrics):
    """`describe_classes` of a run's classes (None for a metrics.json without)."""
    names = metrics.get("class_names")
    return describe_classes(names) if names else None


#: The report's figures, in order, with their headings.
FIGURE_TITLES = {
    "training_curves.png": "Training curves",
    "reconstructions.png": "Test images and their reconstructions",
    "confusion_matrix.png": "Confusion matrix",
    "overlapping_digits.png": "Overlapping test digits, each reconstructed from "
    "its own capsule",
}


def accuracy_lines(metrics, markdown=True):
    """The test accuracy in words: table rows, or the summary's lines."""
    strong = "**" if markdown else ""
    accuracy = (
        f"{strong}{metrics['test_accuracy']:.2%}{strong} "
        f"(error {metrics['test_error']:.2%})"
    )
    if "test_accuracy_at_least_one" in metrics:
        where = f"on {metrics['n_test']:,} fixed pairs of test digits"
        rows = [
            ("Both digits right", f"{accuracy} {where}"),
            ("At least one right", f"{metrics['test_accuracy_at_least_one']:.2%}"),
        ]
    else:
        rows = [("Test accuracy", f"{accuracy} on {metrics['n_test']:,} images")]
    if markdown:
        return [f"| {name.lower()} | {value} |" for name, value in rows]
    return [f"{name:<19} {value}" for name, value in rows]


def training_text(metrics):
    """E.g. "5 epochs on 5,000 of 60,000 (...) training images"."""
    if metrics.get("pairs_per_epoch"):
        return (
            f"{metrics['epochs']} epochs of {metrics['pairs_per_epoch']:,} fresh "
            f"pairs drawn from {metrics['training_set']} training digits"
        )
    return f"{metrics['epochs']} epochs on {metrics['training_set']} training images"


def report(metrics, figures=FIGURE_TITLES):
    """The run's report in Markdown: the numbers, then the `figures` written."""
    lines = [
        f"# {title(metrics)}: {metrics['preset']} preset, {metrics['backend']}",
        "",
        "| | |",
        "|---|---|",
        *accuracy_lines(metrics),
        f"| training | {training_text(metrics)}, batch {metrics['batch_size']}, "
        f"{metrics['train_seconds']:.0f} s, "
        f"{metrics['images_per_second']:.0f} images/s |",
        f"| augmentation | {'random shifts' if metrics['augment'] else 'none'} |",
        f"| precision | {metrics['dtype_policy']} |",
        *(
            [
                f"| routing | {metrics.get('routing', 'dynamic')}, "
                f"{metrics['routing_iterations']} iterations |"
            ]
            if metrics["routing_iterations"]
            else []
        ),
        f"| parameters | {metrics['parameters']:,} |",
        f"| data | {metrics['data_source']} |",
        *([f"| classes | {classes_text(metrics)} |"] if classes_text(metrics) else []),
        f"| devices | {metrics['devices']} (Keras {metrics['keras_version']}) |",
        "",
    ]
    for name, heading in FIGURE_TITLES.items():
        if name in figures:
            lines += [f"## {heading}", "", f"![{heading}]({name})", ""]
    if not figures:
        lines += [
            "No figures: they need matplotlib (`pip install 'capsules-keras[plots]'`).",
            "",
        ]
    return "\n".join(lines)


def summary(metrics, run_dir):
    """The run's results in a box of text, as the CLI prints them at the end."""
    rows = [
        ("Training", f"{training_text(metrics)},"),
        (
            "",
            f"{metrics['train_seconds']:.0f} s, "
            f"{metrics['images_per_second']:.0f} images/s",
        ),
        ("Data", metrics["data_source"]),
        *([("Classes", classes_text(metrics))] if classes_text(metrics) else []),
        ("Parameters", f"{metrics['parameters']:,}"),
        ("Artifacts", run_dir),
        ("", "report.md (results and figures), model.keras, history.csv,"),
        ("", "metrics.json"),
    ]
    return "\n".join(
        [
            "",
            "=" * 64,
            f"{title(metrics)} -- {metrics['backend']}, preset {metrics['preset']}",
            "=" * 64,
            *accuracy_lines(metrics, markdown=False),
            *(f"{name:<19} {value}" for name, value in rows),
            "=" * 64,
        ]
    )
