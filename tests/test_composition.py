"""Models composed from a backbone and a task: every encoder on every task.

`CapsuleBackbone(encoder)` routes an encoder's primary capsules to class
capsules; `CapsuleClassifier` and `MultiDigitClassifier` put a task on it.
The papers' models (`CapsNet`, `EfficientCapsNet`, `MultiDigitCapsNet`)
are such compositions, and files saved before the composition keep loading
(tests/test_saving_across_backends.py, the golden files).
"""

import io
import zipfile

import h5py
import keras
import numpy as np
import pytest

from capsules_keras.models import (
    CapsNet,
    CapsNetEncoder,
    CapsuleBackbone,
    CapsuleClassifier,
    EfficientCapsNet,
    EfficientEncoder,
    MultiDigitClassifier,
    ResidualEncoder,
)

#: The encoders, small: what is tested is the composition.
ENCODERS = {
    "capsnet": lambda shape: CapsNetEncoder(shape, conv_filters=8, primary_capsules=2),
    "efficient": lambda shape: EfficientEncoder(shape),
    "residual": lambda shape: ResidualEncoder(
        shape, widths=(4, 8, 8), primary_capsules=2
    ),
}


def _pairs(count, seed=0):
    """`count` 36x36 images of two different 'digits' (random blobs), and targets."""
    rng = np.random.default_rng(seed)
    labels = np.stack([rng.choice(10, 2, replace=False) for _ in range(count)])
    digits = rng.random((count, 2, 36, 36, 1)).astype("float32") * 0.5
    images = np.clip(digits.sum(axis=1), 0, 1)
    return images, {"labels": labels.astype("int32"), "digits": digits}


def _weight_paths(path):
    with zipfile.ZipFile(path) as archive:
        store = h5py.File(io.BytesIO(archive.read("model.weights.h5")), "r")
        paths = []
        store.visit(lambda name: paths.append(name) if name.endswith("/vars") else None)
    return paths


@pytest.mark.parametrize("encoder", sorted(ENCODERS))
def test_every_encoder_trains_on_the_one_label_task(encoder, tmp_path):
    rng = np.random.default_rng(0)
    x = rng.random((16, 28, 28, 1)).astype("float32")
    y = rng.integers(0, 4, 16).astype("int32")
    backbone = CapsuleBackbone(ENCODERS[encoder]((28, 28, 1)), num_classes=4)
    model = CapsuleClassifier(backbone, decoder_units=(16,))
    model.compile(optimizer=keras.optimizers.Adam(1e-3))
    before = model.evaluate(x, y, verbose=0, return_dict=True)["loss"]
    model.fit(x, y, batch_size=8, epochs=3, verbose=0)
    after = model.evaluate(x, y, verbose=0, return_dict=True)["loss"]
    assert after < before
    assert model.predict(x, verbose=0).shape == (16, 4)
    # The saved file holds the composition and loads with the same predictions.
    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert type(loaded.backbone.encoder) is type(backbone.encoder)
    np.testing.assert_allclose(
        loaded.predict(x, verbose=0), model.predict(x, verbose=0), atol=1e-6
    )
    # New files hold the backbone's layers under `backbone/`, once.
    paths = _weight_paths(path)
    assert "backbone/digit_caps/vars" in paths
    assert not [p for p in paths if p.startswith(("conv/", "digit_caps/"))]


@pytest.mark.parametrize("encoder", sorted(ENCODERS))
def test_every_encoder_trains_on_the_multi_digit_task(encoder):
    x, y = _pairs(16)
    backbone = CapsuleBackbone(ENCODERS[encoder]((36, 36, 1)), num_classes=10)
    model = MultiDigitClassifier(backbone, decoder_units=(16,))
    model.compile(optimizer=keras.optimizers.Adam(1e-3))
    history = model.fit(x, y, batch_size=8, epochs=3, verbose=0).history
    # The loss as it trains: six steps leave a batch normalisation's moving
    # statistics (the residual encoder's) short of the batches', which
    # `evaluate` would read.
    assert history["loss"][-1] < history["loss"][0]
    after = model.evaluate(x, y, verbose=0, return_dict=True)
    assert {"exact_match", "at_least_1"} <= set(after)
    analysis = model.analyze(x[:3])
    assert analysis["predictions"].shape == (3, 2)
    assert analysis["reconstructions"].shape == (3, 2, 36, 36, 1)


def test_the_papers_models_are_compositions():
    capsnet = CapsNet()
    assert isinstance(capsnet.backbone.encoder, CapsNetEncoder)
    assert capsnet.digit_caps is capsnet.backbone.digit_caps
    assert capsnet.conv is capsnet.backbone.encoder.conv
    efficient = EfficientCapsNet()
    assert isinstance(efficient.backbone.encoder, EfficientEncoder)
    assert efficient.backbone.digit_caps.routing == "self_attention"
    # `summary()` and `layers` list each layer once, the backbone's parts.
    assert [layer.name for layer in capsnet.layers] == [
        "conv",
        "primary_caps",
        "digit_caps",
        "length",
        "mask",
        "decoder",
    ]


def test_a_model_that_is_not_a_backbone_is_refused():
    with pytest.raises(ValueError, match="CapsuleBackbone. Received: backbone"):
        CapsuleClassifier(keras.layers.Dense(4))


def test_a_layer_that_is_not_an_encoder_is_refused():
    with pytest.raises(ValueError, match="CapsuleEncoder.*Received: encoder of type"):
        CapsuleBackbone(keras.layers.Conv2D(8, 3))


def test_with_routing_iterations_keeps_the_composition_and_weights():
    backbone = CapsuleBackbone(ENCODERS["efficient"]((28, 28, 1)), num_classes=3)
    model = CapsuleClassifier(backbone, decoder_units=(16,))
    clone = model.with_routing_iterations(1)
    assert clone.routing_iterations == 1 and model.routing_iterations == 3
    for a, b in zip(model.get_weights(), clone.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)
