"""Classify image files with a trained model: `python -m capsules_keras.predict`.

    python -m capsules_keras.predict RUN_OR_MODEL IMAGE... [--top-k K] [--json]
        [--redraw DIR]

RUN_OR_MODEL is a run folder of `python -m capsules_keras.train` (its
`model.keras`), a `.keras` file, or the name of a pretrained model
(`capsules_keras.models.PRETRAINED`, e.g. `efficient_capsnet_mnist`). Each
IMAGE (PNG, JPEG, ... : what Pillow reads) is read as the trainer reads an
image folder (`capsules_keras.data.image_folder.read_images`): converted to
the model's colour (1 channel: grayscale; 3: RGB), stretched to its height
and width (bilinear) and scaled to [0, 1]; the output says which images
were resized or converted.

It prints one line per image: the path, the predicted class and its score,
which for the capsule models is the length of the class capsule (Sabour et
al. 2017: the probability that the entity is present, but the lengths of
one image need not sum to 1), for matrix capsules the class capsule's
activation, and for a softmax or sigmoid classifier (the CNN baseline) a
probability. `--top-k` adds the next classes, `--json` prints one JSON
document instead, `--redraw DIR` writes what the decoder redraws from the
predicted capsule (the capsule classifiers only).

The class names come from the run folder (`metrics.json`'s or
`config.json`'s `class_names`, else the names of its `dataset`), the
pretrained model's card, or else are the class indices. The functions
below do the work and print nothing; `main` is the command line.
"""

import argparse
import json
import os
import sys
from typing import NamedTuple

import keras
import numpy as np

from capsules_keras.data import get_dataset
from capsules_keras.data.image_folder import image_headers, read_images
from capsules_keras.inputs import prepare_images
from capsules_keras.layers import Length
from capsules_keras.models import (
    PRETRAINED,
    CapsuleClassifier,
    CapsuleModel,
    MatrixCapsNet,
    pretrained_card,
)
from capsules_keras.training.config import config_flag

#: The image folder reader's colour mode for a model's number of channels.
COLOR_MODES = {1: "grayscale", 3: "rgb"}
#: Pillow's mode that each colour mode converts to.
PIL_MODES = {"grayscale": "L", "rgb": "RGB"}
#: How the notes name Pillow's modes.
MODE_NAMES = {"L": "grayscale", "1": "black-and-white", "P": "palette colour"}
#: Pillow's grey modes of more than 8 bits, which the reader scales to 0..255.
WIDE_GREY_MODES = ("I", "I;16", "I;16L", "I;16B")


class TrainedModel(NamedTuple):
    """A model to predict with, where it came from, and its class names."""

    model: keras.Model
    path: str
    class_names: tuple | None


def load_trained_model(source):
    """The model of a run folder, a `.keras` file or a pretrained name.

    Args:
        source: A run folder of `capsules_keras.train` (its `model.keras`),
            a `.keras` file (a `model.keras` inside a run folder takes that
            run's class names), or a key of `PRETRAINED`.

    Returns:
        A `TrainedModel`: `class_names` from `run_class_names` or the
        pretrained model's card; None where nothing names the classes.

    Raises:
        FileNotFoundError: `source` names no folder, file or pretrained
            model, or a folder without `model.keras`.
        ValueError: a file that is not a `.keras` model Keras can load.
    """
    source = os.fspath(source)
    if os.path.isdir(source):
        path = os.path.join(source, "model.keras")
        if not os.path.isfile(path):
            raise FileNotFoundError(
                f"The folder {source!r} holds no model.keras: not a finished run "
                "of capsules_keras.train (a run writes model.keras when it "
                "ends; `--resume` finishes a killed one)."
            )
        return TrainedModel(_load(path), path, run_class_names(source))
    if os.path.isfile(source):
        if not source.endswith(".keras"):
            raise ValueError(
                "The model must be a run folder, a .keras file or a pretrained "
                f"model's name. Received: {source!r}, a file that is not .keras"
            )
        folder = os.path.dirname(source) or "."
        names = None
        if os.path.basename(source) == "model.keras":
            names = run_class_names(folder)
        return TrainedModel(_load(source), source, names)
    if source in PRETRAINED:
        model = CapsuleModel.from_preset(source)
        dataset = pretrained_card(source).get("dataset")
        names = tuple(get_dataset(dataset).class_names) if dataset else None
        return TrainedModel(model, source, names or None)
    raise FileNotFoundError(
        f"No run folder, .keras file or pretrained model is named {source!r}. "
        f"Pretrained models: {sorted(PRETRAINED)}"
    )


def _load(path):
    try:
        return keras.saving.load_model(path)
    # Keras raises many kinds of error for a file it cannot load.
    except Exception as error:
        raise ValueError(
            f"Could not load {path!r} as a Keras model: {type(error).__name__}: {error}"
        ) from error


def run_class_names(run_dir):
    """The class names of a run folder, in label order, or None.

    From `metrics.json`'s `class_names`, else `config.json`'s (an image
    folder's run records its classes there), else the class names of the
    dataset `config.json` names (`capsules_keras.data.get_dataset`).
    """
    for name in ("metrics.json", "config.json"):
        names = _read_json(os.path.join(run_dir, name)).get("class_names")
        if names:
            return tuple(str(n) for n in names)
    dataset = _read_json(os.path.join(run_dir, "config.json")).get("dataset")
    try:
        names = get_dataset(dataset).class_names if dataset else ()
    except ValueError:  # a dataset this version does not know
        names = ()
    return tuple(names) or None


def _read_json(path):
    if not os.path.isfile(path):
        return {}
    with open(path) as f:
        content = json.load(f)
    return content if isinstance(content, dict) else {}


def model_image_shape(model):
    """`(height, width, channels)` of the images `model` takes.

    A capsule model's `image_shape`, else a functional model's input shape.

    Raises:
        ValueError: the model takes no single image input of a fixed size.
    """
    shape = getattr(model, "image_shape", None)
    if shape is None:
        try:
            shape = model.input_shape[1:]
        except (AttributeError, ValueError):
            shape = None
    shape = tuple(shape) if shape is not None else None
    if shape is None or len(shape) != 3 or not all(shape):
        raise ValueError(
            "The model must take images of one fixed size (height, width, "
            "channels), as the capsule models and functional models on "
            "`keras.Input((height, width, channels))` do. Received: a "
            f"{type(model).__name__} with image shape {shape}"
        )
    return shape


def model_num_classes(model):
    """How many classes `model` scores: a capsule model's `num_classes`, else
    the size of a functional model's output."""
    num_classes = getattr(model, "num_classes", None)
    if num_classes is None:
        num_classes = model.output_shape[-1]
    return int(num_classes)


def score_kind(model):
    """What `model`'s class scores are: "capsule length", "activation",
    "probability" (a softmax or sigmoid output layer) or "score"."""
    if isinstance(model, MatrixCapsNet):
        return "activation"
    if isinstance(model, CapsuleModel):
        return "capsule length"
    last = model.layers[-1] if getattr(model, "layers", None) else None
    if isinstance(last, Length):
        return "capsule length"
    if isinstance(last, keras.layers.Softmax):
        return "probability"
    activation = getattr(getattr(last, "activation", None), "__name__", "")
    return "probability" if activation in ("softmax", "sigmoid") else "score"


def load_images(paths, image_shape):
    """Image files as the model takes them, and what was done to each.

    The files are read as the trainer reads an image folder
    (`capsules_keras.data.image_folder.read_images`): converted to the
    colour of `image_shape` (1 channel: grayscale, Pillow's luma; 3: RGB,
    alpha dropped; 16-bit grey scaled to 8 bits) and stretched to its
    height and width (bilinear, no cropping), so that a model sees new
    images as it saw its training images.

    Args:
        paths: Image files.
        image_shape: `(height, width, channels)`, channels 1 or 3.

    Returns:
        `(images, notes)`: uint8 images `(n, *image_shape)` in 0..255, and
        for each file a list of what was done to it (e.g.
        `"resized from 64x48 to 28x28"`, `"converted RGB to grayscale"`).

    Raises:
        FileNotFoundError: a path that is not a file.
        ValueError: files Pillow cannot read as images (named), or a number
            of channels other than 1 or 3.
    """
    height, width, channels = image_shape
    if channels not in COLOR_MODES:
        raise ValueError(
            "Images are read with 1 (grayscale) or 3 (RGB) channels, as the "
            f"trainer reads them. Received: image_shape={tuple(image_shape)}"
        )
    paths = [os.fspath(path) for path in paths]
    headers = check_images(paths)
    color_mode = COLOR_MODES[channels]
    images = read_images(paths, (height, width), color_mode)
    notes = [
        _notes(stored_size, stored_mode, (height, width), color_mode)
        for stored_size, stored_mode in headers
    ]
    return images, notes


def check_images(paths):
    """`((height, width), mode)` of each image file, from its header only.

    Cheap: the command line checks the images with it before it loads the
    model.

    Raises:
        FileNotFoundError: a path that is not a file.
        ValueError: files Pillow cannot read as images (named).
    """
    paths = [os.fspath(path) for path in paths]
    for path in paths:
        if not os.path.isfile(path):
            raise FileNotFoundError(f"No image file at {path!r}")
    return image_headers(paths)


def _notes(stored_size, stored_mode, size, color_mode):
    """What `read_images` does to an image stored at `stored_size` in
    `stored_mode` to read it at `size` in `color_mode`."""
    notes = []
    if tuple(stored_size) != tuple(size):
        notes.append(
            f"resized from {stored_size[0]}x{stored_size[1]} to {size[0]}x{size[1]}"
        )
    target = PIL_MODES[color_mode]
    if stored_mode in WIDE_GREY_MODES:
        notes.append("scaled 16-bit grey to 8 bits")
        stored_mode = "L"
    if stored_mode != target:
        stored = MODE_NAMES.get(stored_mode, stored_mode)
        notes.append(f"converted {stored} to {MODE_NAMES.get(target, target)}")
    return notes


def class_scores(model, images, batch_size=32):
    """`model`'s class scores `(n, num_classes)` for prepared images, NumPy."""
    scores = model.predict(images, batch_size=batch_size, verbose=0)
    if isinstance(scores, dict):  # a model whose call returns a dict
        scores = scores["scores"]
    return np.asarray(keras.ops.convert_to_numpy(scores))


def predict_images(model, paths, class_names=None, top_k=None, batch_size=32):
    """The predicted classes of image files, one record per file.

    Args:
        model: A trained model (e.g. `load_trained_model(...).model`): a
            capsule model, or a functional model from images to class
            scores.
        paths: Image files (`load_images`).
        class_names: One name per class, in label order; None: the indices.
        top_k: How many classes each record lists, best first; None: one
            (a `MultiDigitClassifier`: its `digits_per_image`).
        batch_size: Images per forward pass.

    Returns:
        A list of dicts, one per path: `path`, `class` (the name),
        `class_index`, `score` (the predicted class's score) and
        `score_kind` (`score_kind(model)`), `top_k` (a list of `class`,
        `class_index`, `score`, best first) and `notes` (`load_images`).

    Raises:
        ValueError: an unreadable image, `class_names` of the wrong length,
            or a `top_k` out of range.
        FileNotFoundError: a missing image file.
    """
    image_shape = model_image_shape(model)
    num_classes = model_num_classes(model)
    if class_names is None:
        class_names = [str(c) for c in range(num_classes)]
    if len(class_names) != num_classes:
        raise ValueError(
            f"`class_names` must name the model's {num_classes} classes. "
            f"Received: {len(class_names)} names {list(class_names)}"
        )
    if top_k is None:
        top_k = getattr(model, "digits_per_image", 1)
    if isinstance(top_k, bool) or not isinstance(top_k, int):
        raise ValueError(f"`top_k` must be an integer. Received: top_k={top_k!r}")
    if not 1 <= top_k <= num_classes:
        raise ValueError(
            f"`top_k` must be between 1 and the number of classes ({num_classes}). "
            f"Received: top_k={top_k}"
        )
    images, notes = load_images(paths, image_shape)
    scores = class_scores(model, prepare_images(images, image_shape), batch_size)
    kind = score_kind(model)
    records = []
    for path, row, done in zip(paths, scores, notes, strict=True):
        best = np.argsort(-row, kind="stable")[:top_k]
        ranked = [
            {"class": class_names[c], "class_index": int(c), "score": float(row[c])}
            for c in best
        ]
        records.append(
            {
                "path": os.fspath(path),
                **ranked[0],
                "score_kind": kind,
                "top_k": ranked,
                "notes": done,
            }
        )
    return records


def redraw_images(model, paths, batch_size=32):
    """What the decoder redraws from each image's predicted capsule.

    Args:
        model: A `CapsuleClassifier` (CapsNet, EfficientCapsNet, ...).
        paths: Image files (`load_images`).

    Returns:
        uint8 images `(n, height, width * k, channels)`: the redrawing of
        the predicted class, or of each of a `MultiDigitClassifier`'s `k`
        digits side by side.

    Raises:
        ValueError: a model without a decoder.
    """
    if not isinstance(model, CapsuleClassifier):
        raise ValueError(
            "Only the capsule classifiers (CapsNet, EfficientCapsNet, ...) have "
            f"a decoder that redraws images. Received: a {type(model).__name__}"
        )
    image_shape = model_image_shape(model)
    images, _ = load_images(paths, image_shape)
    inside = model.analyze(prepare_images(images, image_shape), batch_size=batch_size)
    redrawn = inside["reconstructions"]  # (n, h, w, c), or (n, k, h, w, c)
    if redrawn.ndim == 5:  # a MultiDigitClassifier's k digits, side by side
        redrawn = np.concatenate(list(np.moveaxis(redrawn, 1, 0)), axis=2)
    return np.clip(np.round(redrawn * 255.0), 0, 255).astype("uint8")


def describe(record):
    """One record of `predict_images` as the command line prints it.

    >>> top = [{"class": "7", "score": 0.98765}, {"class": "1", "score": 0.12}]
    >>> describe({"path": "seven.png", "class": "7", "score": 0.98765,
    ...           "score_kind": "capsule length", "top_k": top,
    ...           "notes": ["resized from 56x56 to 28x28"]})
    'seven.png: 7 (capsule length 0.988), then 1 (0.120) [resized from 56x56 to 28x28]'
    """
    line = f"{record['path']}: {record['class']} ({record['score_kind']} "
    line += f"{record['score']:.3f})"
    others = [f"{r['class']} ({r['score']:.3f})" for r in record["top_k"][1:]]
    if others:
        line += ", then " + ", ".join(others)
    if record["notes"]:
        line += " [" + "; ".join(record["notes"]) + "]"
    return line


def _redraw_paths(folder, paths):
    """`folder/<name>-redrawn.png` for each image, made unique."""
    names, chosen = set(), []
    for index, path in enumerate(paths):
        stem = os.path.splitext(os.path.basename(path))[0]
        name = f"{stem}-redrawn.png"
        if name in names:
            name = f"{stem}-{index}-redrawn.png"
        names.add(name)
        chosen.append(os.path.join(folder, name))
    return chosen


def build_parser():
    parser = argparse.ArgumentParser(
        prog="python -m capsules_keras.predict",
        description="Predict the classes of image files with a trained model.",
    )
    parser.add_argument(
        "model",
        help="a run folder of capsules_keras.train, a .keras file, or a "
        f"pretrained model's name ({', '.join(sorted(PRETRAINED))})",
    )
    parser.add_argument("images", nargs="+", help="image files (PNG, JPEG, ...)")
    parser.add_argument(
        "--top-k",
        type=int,
        help="list this many classes per image, best first (default: 1)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument(
        "--redraw",
        metavar="DIR",
        help="write the decoder's redrawing of each image into DIR "
        "(<name>-redrawn.png); capsule classifiers only",
    )
    parser.add_argument("--batch-size", **config_flag("batch_size"))
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        check_images(args.images)  # before the slower loading of the model
        trained = load_trained_model(args.model)
        records = predict_images(
            trained.model,
            args.images,
            trained.class_names,
            top_k=args.top_k,
            batch_size=args.batch_size,
        )
        if args.redraw:
            redrawn = redraw_images(trained.model, args.images, args.batch_size)
            os.makedirs(args.redraw, exist_ok=True)
            for record, path, image in zip(
                records, _redraw_paths(args.redraw, args.images), redrawn, strict=True
            ):
                keras.utils.save_img(path, image, scale=False)
                record["redrawn"] = path
    except (FileNotFoundError, ValueError, ImportError) as error:
        raise SystemExit(f"error: {error}") from error
    if args.json:
        document = {
            "model": trained.path,
            "backend": keras.backend.backend(),
            "score_kind": score_kind(trained.model),
            "class_names": list(trained.class_names or []) or None,
            "predictions": records,
        }
        print(json.dumps(document, indent=2))
        return 0
    for record in records:
        print(describe(record))
    return 0


if __name__ == "__main__":
    sys.exit(main())
