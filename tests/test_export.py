"""Exported models (ONNX, SavedModel) give what `model.predict` gives.

Each backend exports what it can (`capsules_keras.export.EXPORTS`): ONNX on
all three, run here in onnxruntime; a SavedModel on tensorflow and jax, run
with `tf.saved_model.load`; on torch a SavedModel is refused, and a test
below holds Keras' own torch path to the failures that make it so. The
exports run on batch sizes other than the one torch traces with (1).
"""

import json

import keras
import numpy as np
import pytest

from capsules_keras import export
from capsules_keras.models import CapsNet
from capsules_keras.predict import load_trained_model

PRESET = "efficient_capsnet_mnist"
#: Batch sizes the exported models run on: none of them the trace's.
BATCHES = (7, 3)
#: The trained model's class scores (lengths in [0, 1]): float32, the same
#: operations in another order.
TRAINED_TOLERANCE = {"rtol": 1e-5, "atol": 1e-5}
#: The untrained CapsNet's lengths are about 1e-3: compared relative to that.
CAPSNET_TOLERANCE = {"rtol": 1e-4, "atol": 1e-8}


def needs(format):
    """Skips the test where a package the export needs is not installed."""
    if format == "onnx":
        pytest.importorskip("onnxruntime", reason="running ONNX needs onnxruntime")
    try:
        export.check_export(format)
    except ImportError as error:
        pytest.skip(str(error))


@pytest.fixture(scope="module")
def digits(mnist_path):
    """The first MNIST test digits, float32 in [0, 1], and their labels."""
    with np.load(mnist_path) as data:
        images, labels = data["x_test"][: max(BATCHES)], data["y_test"][: max(BATCHES)]
    return images[..., None].astype("float32") / 255.0, labels


@pytest.fixture(scope="module")
def trained(digits):
    """The pretrained Efficient-CapsNet, its class names (the card's) and
    its class scores for `digits`."""
    loaded = load_trained_model(PRESET)
    return loaded, loaded.model.predict(digits[0], verbose=0)


@pytest.fixture(scope="module")
def capsnet(digits):
    """A narrow, untrained CapsNet (dynamic routing, the paper's model) and
    its class scores for `digits`."""
    keras.utils.set_random_seed(0)
    model = CapsNet(
        conv_filters=8,
        primary_capsules=2,
        primary_dim=4,
        digit_dim=4,
        decoder_units=(8,),
    )
    model.build((None, *model.image_shape))
    return model, model.predict(digits[0], verbose=0)


def run_onnx(path, images):
    """An ONNX file's session and its outputs for the first `BATCHES` images."""
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path))
    (given,) = session.get_inputs()
    # One input, `images`, with a free batch size and the model's image shape.
    assert given.name == "images" and given.type == "tensor(float)"
    assert isinstance(given.shape[0], str) and given.shape[1:] == [28, 28, 1]
    outputs = [session.run(None, {"images": images[:n]}) for n in BATCHES]
    assert all(len(output) == 1 for output in outputs)
    return session, [output[0] for output in outputs]


def test_cli_exports_onnx_that_onnxruntime_runs(trained, digits, tmp_path, capsys):
    needs("onnx")
    (loaded, expected), (images, labels) = trained, digits
    path = tmp_path / "efficient.onnx"
    capsys.readouterr()
    assert export.main([PRESET, str(path)]) == 0
    printed = capsys.readouterr().out
    backend = keras.backend.backend()
    assert printed.startswith(f"Exported: {path} (onnx, {backend})\n")
    assert "Input:    images, float32 (batch, 28, 28, 1) in [0, 1]" in printed
    assert "Output:   class scores (batch, classes): capsule length" in printed
    session, scores = run_onnx(path, images)
    for n, got in zip(BATCHES, scores, strict=True):
        # Each image's scores are its own: the first n of the batch's.
        np.testing.assert_allclose(got, expected[:n], **TRAINED_TOLERANCE)
        assert got.argmax(-1).tolist() == labels[:n].tolist()
    # The class names travel in the file: the pretrained model's card's.
    metadata = session.get_modelmeta().custom_metadata_map
    assert json.loads(metadata["class_names"]) == list(loaded.class_names)
    assert loaded.class_names == tuple(str(digit) for digit in range(10))


def test_dynamic_routing_exports_to_onnx(capsnet, digits, tmp_path):
    needs("onnx")
    (model, expected), (images, _) = capsnet, digits
    path = tmp_path / "capsnet.onnx"
    assert export.export_model(model, path) == path
    session, scores = run_onnx(path, images)
    assert "class_names" not in session.get_modelmeta().custom_metadata_map
    for n, got in zip(BATCHES, scores, strict=True):
        np.testing.assert_allclose(got, expected[:n], **CAPSNET_TOLERANCE)


def test_saved_model_runs_in_tensorflow(capsnet, digits, tmp_path):
    if keras.backend.backend() == "torch":
        pytest.skip("torch cannot export a SavedModel: see the tests below")
    needs("tf_saved_model")
    import tensorflow as tf

    (model, expected), (images, _) = capsnet, digits
    path = export.export_model(model, tmp_path / "capsnet", "tf_saved_model")
    loaded = tf.saved_model.load(str(path))  # kept: it holds the variables
    for n in BATCHES:
        got = loaded.serve(tf.constant(images[:n])).numpy()
        np.testing.assert_allclose(got, expected[:n], **CAPSNET_TOLERANCE)


def test_torch_refuses_a_saved_model(capsnet, tmp_path):
    # Refused by name on every backend; on torch by the export and the CLI.
    with pytest.raises(ValueError, match="cannot be exported on the torch backend"):
        export.check_export("tf_saved_model", backend="torch")
    if keras.backend.backend() != "torch":
        return
    path = tmp_path / "saved"
    with pytest.raises(ValueError, match="Export it on the tensorflow or jax"):
        export.export_model(capsnet[0], path, "tf_saved_model")
    assert not path.exists()
    with pytest.raises(SystemExit) as error:
        export.main([PRESET, str(path), "--format", "tf_saved_model"])
    assert error.value.code.startswith("error: format='tf_saved_model' cannot")


def test_keras_own_torch_saved_model_export_fails_as_said(capsnet, tmp_path):
    """The reasons `TORCH_SAVED_MODEL` gives: if Keras or torch lift them,
    this fails, and the refusal can go."""
    if keras.backend.backend() != "torch":
        pytest.skip("the torch backend's export path")
    pytest.importorskip("tensorflow", reason="Keras writes the SavedModel with it")
    serving = export.ClassScores(capsnet[0])

    def keras_export(batch_size):
        spec = keras.InputSpec(shape=(batch_size, 28, 28, 1), dtype="float32")
        path = str(tmp_path / f"batch-{batch_size}")
        serving.export(
            path, format="tf_saved_model", verbose=False, input_signature=[spec]
        )

    # A free batch size: torch.export rejects the dynamic shapes Keras gives.
    with pytest.raises(Exception, match="dynamic_shapes"):
        keras_export(None)
    # A fixed one: Keras needs torch_xla, which does not load with this torch.
    with pytest.raises(ImportError, match="torch_xla|_XLAC"):
        keras_export(2)


def test_bad_formats_and_missing_packages(capsnet, tmp_path, monkeypatch):
    model = capsnet[0]
    with pytest.raises(ValueError, match="`format` must be one of"):
        export.export_model(model, tmp_path / "model", "tflite")
    with pytest.raises(ValueError, match="must name the model's 10 classes"):
        export.export_model(model, tmp_path / "model.onnx", class_names=["a", "b"])
    unbuilt = keras.Sequential([keras.layers.Dense(10)])
    with pytest.raises(ValueError, match="must be built"):
        export.export_model(unbuilt, tmp_path / "model.onnx")
    assert not (tmp_path / "model.onnx").exists()
    with pytest.raises(ValueError, match="Received: backend='numpy'"):
        export.check_export("onnx", backend="numpy")
    with pytest.raises(SystemExit) as error:  # argparse: usage and status 2
        export.main([PRESET, str(tmp_path / "model"), "--format", "tflite"])
    assert error.value.code == 2
    # A converter that is not installed: the message says what to install.
    real_find_spec = export.importlib.util.find_spec
    monkeypatch.setattr(
        export.importlib.util,
        "find_spec",
        lambda name: None if name == "tf2onnx" else real_find_spec(name),
    )
    with pytest.raises(ImportError, match="pip install tf2onnx"):
        export.check_export("onnx", backend="tensorflow")
