"""Export a trained model's class scores for inference outside Keras.

    python -m capsules_keras.export RUN_OR_MODEL OUT [--format onnx|tf_saved_model]

RUN_OR_MODEL is what `python -m capsules_keras.predict` takes: a run folder,
a `.keras` file or a pretrained model's name. What is exported is a serving
function of one input and one output, written by Keras' own `model.export`
(`ClassScores`):

- input `images`: float32 `(batch, height, width, channels)` in [0, 1], any
  batch size: the images as `capsules_keras.predict.load_images` reads them,
  divided by 255;
- output: the class scores `(batch, num_classes)`, what `model.predict`
  returns (the class capsules' lengths for CapsNet and EfficientCapsNet, the
  activations for MatrixCapsNet, the output of a functional model), without
  the decoder and the capsules' poses.

An ONNX file runs in onnxruntime (`session.run(None, {"images": x})[0]`) and
names the classes in its metadata (`class_names`, JSON); a SavedModel loads
with `loaded = tf.saved_model.load(OUT)` and runs as `loaded.serve(x)` (keep
`loaded`: the function's variables go with it). Which format works on which
backend (`EXPORTS`), tried on CapsNet, EfficientCapsNet, MatrixCapsNet and
a functional model with `DigitCaps`:

    backend      onnx                      tf_saved_model
    tensorflow   yes (tf2onnx)             yes
    jax          yes (jax2onnx)            yes (through jax2tf: needs tensorflow)
    torch        yes (torch.onnx; onnx)    no (`TORCH_SAVED_MODEL` says why):
                                           export it on tensorflow or jax

A `.keras` file loads on every backend, so a model trained on torch exports
a SavedModel after `KERAS_BACKEND=tensorflow` (or jax). On torch, Keras
exports a free batch size with torch.onnx's TorchScript exporter, which
writes through `onnx` (not `onnxscript`, which only its dynamo exporter
needs). On tensorflow the ONNX export compiles the serving function whole
with XLA before tf2onnx converts it (`_tensorflow_onnx`).
"""

import argparse
import contextlib
import importlib.util
import json
import logging
import sys
import warnings

import keras

from capsules_keras.predict import (
    load_trained_model,
    model_image_shape,
    model_num_classes,
    score_kind,
)

#: The formats, and on each backend the packages (import names) an export
#: needs; None where it cannot be exported on that backend.
EXPORTS = {
    "onnx": {
        "tensorflow": ("tf2onnx", "onnx"),
        "jax": ("jax2onnx", "onnx"),
        "torch": ("onnx",),
    },
    "tf_saved_model": {
        "tensorflow": (),
        "jax": ("tensorflow",),
        "torch": None,
    },
}
#: Why a SavedModel cannot be exported on torch, and what to do instead.
TORCH_SAVED_MODEL = (
    "format='tf_saved_model' cannot be exported on the torch backend: Keras "
    "converts a torch model through torch.export and torch_xla, and neither "
    "step works (Keras 3.15, torch 2.13). With a free batch size Keras gives "
    "torch.export the dynamic shapes in a structure torch.export rejects; "
    "with a fixed one it needs torch_xla, which is built for one torch "
    "release (2.9 for its newest) and does not load with later ones. Export "
    "it on the tensorflow or jax backend instead (a .keras file loads on "
    "every backend), e.g. `KERAS_BACKEND=tensorflow python -m "
    "capsules_keras.export MODEL OUT --format tf_saved_model`, or export "
    "format='onnx' on torch."
)


def check_export(format, backend=None):
    """Raises unless `format` can be exported on `backend` here.

    Args:
        format: `"onnx"` or `"tf_saved_model"`.
        backend: A Keras backend's name; None: the current one.

    Raises:
        ValueError: an unknown format or backend, or a format the backend
            cannot export (the message says what works instead).
        ImportError: a package the export needs is not installed (the
            message says which to install).

    >>> check_export("tf_saved_model", backend="torch")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ValueError: format='tf_saved_model' cannot be exported on the torch backend: ...
    """
    backend = backend or keras.backend.backend()
    if format not in EXPORTS:
        raise ValueError(
            f"`format` must be one of {sorted(EXPORTS)}. Received: format={format!r}"
        )
    if backend not in EXPORTS[format]:
        raise ValueError(
            f"Exports run on the {', '.join(EXPORTS[format])} backends. "
            f"Received: backend={backend!r}"
        )
    needs = EXPORTS[format][backend]
    if needs is None:
        raise ValueError(TORCH_SAVED_MODEL)
    missing = [name for name in needs if importlib.util.find_spec(name) is None]
    if missing:
        raise ImportError(
            f"Exporting format={format!r} on the {backend} backend needs "
            f"{', '.join(missing)}: pip install {' '.join(missing)}"
        )


class ClassScores(keras.Model):
    """A model's class scores alone: what an exported model serves.

    `ClassScores(model)(images)` is `model.predict`'s result as a tensor:
    a capsule model's `"scores"` (its `call` returns a dict), any other
    model's output, computed in inference mode.

    Args:
        model: A built model from images to class scores.
        **kwargs: Passed to `keras.Model` (e.g. `name`).
    """

    def __init__(self, model, **kwargs):
        super().__init__(**kwargs)
        self.classifier = model
        self.built = True  # the classifier is built: no weights of its own

    def call(self, images):
        outputs = self.classifier(images, training=False)
        return outputs["scores"] if isinstance(outputs, dict) else outputs


def export_model(model, path, format="onnx", class_names=None):
    """Writes `model`'s class scores as an ONNX file or a TensorFlow SavedModel.

    Args:
        model: A built model from images to class scores: a capsule model
            (`CapsNet`, `EfficientCapsNet`, `MatrixCapsNet`, ...) or a
            functional model on `keras.Input((height, width, channels))`,
            in float32.
        path: Where to write: the ONNX file, or the SavedModel's folder.
        format: `"onnx"` or `"tf_saved_model"` (`EXPORTS` says which
            backend exports which, and what it needs).
        class_names: ONNX only: the class names, written into the file's
            metadata as `class_names` (a JSON list).

    Returns:
        `path`. The artifact takes float32 images `(batch, height, width,
        channels)` in [0, 1] as its input `images` and returns the class
        scores `(batch, num_classes)`.

    Raises:
        ValueError: a format this backend cannot export (`check_export`),
            an unbuilt model, a model without one fixed image size, or
            `class_names` that do not name its classes.
        ImportError: a package the export needs is missing.
    """
    if not model.built:
        raise ValueError(
            "The model must be built (trained, loaded, or called once) before "
            f"it is exported. Received: an unbuilt {type(model).__name__}"
        )
    image_shape = model_image_shape(model)
    num_classes = model_num_classes(model)
    if class_names is not None and len(class_names) != num_classes:
        raise ValueError(
            f"`class_names` must name the model's {num_classes} classes. "
            f"Received: {len(class_names)} names {list(class_names)}"
        )
    check_export(format)
    serving = ClassScores(model)
    spec = keras.InputSpec(shape=(None, *image_shape), dtype="float32", name="images")
    with _quiet():
        if format == "onnx" and keras.backend.backend() == "tensorflow":
            _tensorflow_onnx(serving, path, spec)
        else:
            serving.export(path, format=format, verbose=False, input_signature=[spec])
    if format == "onnx" and class_names is not None:
        _name_classes(path, class_names)
    return path


def _tensorflow_onnx(serving, path, spec):
    """ONNX on tensorflow: the serving function compiled whole, then tf2onnx.

    Keras' own path (`model.export(format="onnx")`) traces the model in a
    plain graph, where the routing compiles itself with XLA as a function
    of its own (`capsules_keras.routing._fast.compile_routing`); tf2onnx
    keeps that call as a `StatefulPartitionedCall` node, which onnxruntime
    refuses to load. Traced inside an XLA-compiled function, the routing's
    operations are part of the graph that tf2onnx converts. (Keras' path
    also patches tf2onnx for NumPy 2; tf2onnx 1.17 needs that only for
    models over 2 GB, which it writes with external data.)
    """
    import tensorflow as tf
    import tf2onnx

    signature = [tf.TensorSpec(spec.shape, spec.dtype, name=spec.name)]
    function = tf.function(
        serving.__call__, input_signature=signature, jit_compile=True, autograph=False
    )
    tf2onnx.convert.from_function(function, signature, output_path=str(path))


def _name_classes(path, class_names):
    """Writes the class names into an ONNX file's metadata (`class_names`)."""
    import onnx

    model = onnx.load(str(path))
    entry = model.metadata_props.add()
    entry.key, entry.value = "class_names", json.dumps(list(class_names))
    onnx.save(model, str(path))


@contextlib.contextmanager
def _quiet():
    """Silences the converters' logs and torch's tracer warnings.

    torch.onnx traces the model with a batch of one; the tracer warns about
    every shape it reads as a Python number. The batch size stays free in
    the exported graph (tests/test_export.py runs it on other batch sizes).
    """
    loggers = [logging.getLogger(name) for name in ("tf2onnx", "jax2onnx")]
    levels = [logger.level for logger in loggers]
    with warnings.catch_warnings():
        if keras.backend.backend() == "torch":
            import torch

            warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
        for logger in loggers:
            logger.setLevel(logging.ERROR)
        try:
            yield
        finally:
            for logger, level in zip(loggers, levels, strict=True):
                logger.setLevel(level)


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m capsules_keras.export",
        description="Export a trained model's class scores as ONNX or a "
        "TensorFlow SavedModel.",
    )
    parser.add_argument(
        "model", help="a run folder, a .keras file or a pretrained model's name"
    )
    parser.add_argument("output", help="the ONNX file or the SavedModel folder")
    parser.add_argument("--format", choices=sorted(EXPORTS), default="onnx")
    args = parser.parse_args(argv)
    try:
        trained = load_trained_model(args.model)
        export_model(trained.model, args.output, args.format, trained.class_names)
    except (FileNotFoundError, ValueError, ImportError) as error:
        raise SystemExit(f"error: {error}") from error
    height, width, channels = model_image_shape(trained.model)
    print(f"Exported: {args.output} ({args.format}, {keras.backend.backend()})")
    print(f"Model:    {trained.path}")
    print(f"Input:    images, float32 (batch, {height}, {width}, {channels}) in [0, 1]")
    print(f"Output:   class scores (batch, classes): {score_kind(trained.model)}")
    if trained.class_names:
        print(f"Classes:  {', '.join(trained.class_names)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
