"""The CNNs of the comparisons: `baseline_cnn` (CapsNet's parameter budget)
and `ResidualCNN` (the residual encoder's trunk) train and save on every
backend."""

import keras
import numpy as np
import pytest

from capsules_keras.models import (
    BaselineCNN,
    CapsNet,
    CapsuleBackbone,
    ResidualCNN,
    ResidualEncoder,
    baseline_cnn,
)


def test_parameter_budget_matches_capsnet():
    model = baseline_cnn()
    assert model.count_params() == 8_214_401
    capsnet = CapsNet().count_params()
    assert abs(model.count_params() - capsnet) / capsnet < 0.0002
    assert model.output_shape == (None, 10)


def test_probabilities_one_step_and_save_load(tmp_path):
    model = baseline_cnn(image_shape=(28, 28, 1), num_classes=4)
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, (8, 28, 28, 1)).astype("float32")
    y = np.arange(8) % 4
    model.compile(
        optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"]
    )
    history = model.fit(x, y, batch_size=4, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    probabilities = model.predict(x, verbose=0)
    assert probabilities.shape == (8, 4)
    np.testing.assert_allclose(probabilities.sum(-1), 1.0, rtol=1e-5)
    path = tmp_path / "cnn.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_allclose(loaded.predict(x, verbose=0), probabilities, atol=1e-6)


@pytest.mark.parametrize(
    "kwargs, match",
    [({"dropout_rate": 1.0}, "dropout_rate=1.0"), ({"num_classes": 0}, "num_classes")],
)
def test_invalid_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        baseline_cnn(**kwargs)


def test_integer_images_are_scaled_as_the_capsule_models_scale_them(tmp_path):
    model = baseline_cnn(num_classes=3, dense_units=8)
    rng = np.random.default_rng(1)
    x = rng.integers(0, 256, (4, 28, 28), dtype="uint8")  # as image folders give
    scaled = x[..., None].astype("float32") / 255
    probabilities = model.predict(scaled, verbose=0)
    np.testing.assert_allclose(model.predict(x, verbose=0), probabilities, atol=1e-6)
    model.save(tmp_path / "cnn.keras")
    loaded = keras.saving.load_model(tmp_path / "cnn.keras")
    assert isinstance(loaded, BaselineCNN) and loaded.get_config() == model.get_config()
    np.testing.assert_allclose(loaded.predict(x, verbose=0), probabilities, atol=1e-6)
    # Files saved before the class existed hold a plain functional model of
    # the same layers: they load as one and predict as before.
    keras.Model(model.inputs, model.outputs).save(tmp_path / "old.keras")
    old = keras.saving.load_model(tmp_path / "old.keras")
    assert type(old).__name__ == "Functional"
    np.testing.assert_allclose(old.predict(scaled, verbose=0), probabilities, atol=1e-6)


def test_the_residual_cnn_shares_the_capsule_models_trunk(tmp_path):
    model = ResidualCNN((40, 40, 3), 3, widths=(4, 8, 8))
    capsules = CapsuleBackbone(ResidualEncoder((40, 40, 3), widths=(4, 8, 8)), 3)
    capsules.build((None, 40, 40, 3))
    trunk = [layer.name for layer in model.get_layer("conv").layers]
    assert trunk == [layer.name for layer in capsules.encoder.conv.layers]
    assert model.get_layer("conv").count_params() == (
        capsules.encoder.conv.count_params()
    )
    x = np.random.default_rng(0).integers(0, 256, (6, 40, 40, 3), dtype="uint8")
    y = np.arange(6) % 3
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    model.fit(x, y, batch_size=3, epochs=1, verbose=0)
    probabilities = model.predict(x, verbose=0)
    np.testing.assert_allclose(probabilities.sum(-1), 1.0, rtol=1e-5)
    # uint8 images are scaled as the capsule models scale them.
    scaled = model.predict(x.astype("float32") / 255, verbose=0)
    np.testing.assert_allclose(scaled, probabilities, atol=1e-6)
    model.save(tmp_path / "residual_cnn.keras")
    loaded = keras.saving.load_model(tmp_path / "residual_cnn.keras")
    assert loaded.get_config() == model.get_config()
    np.testing.assert_allclose(loaded.predict(x, verbose=0), probabilities, atol=1e-6)
    assert ResidualCNN((28, 28, 1), 10, multi_label=True).output_shape == (None, 10)
