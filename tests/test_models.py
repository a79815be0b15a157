"""The paper's CapsNet: shapes, parameter count, masking, training, saving."""

import json
import os

import keras
import numpy as np
import pytest
from conftest import NARROW
from keras import ops

from capsules_keras import MarginLoss, ReconstructionLoss
from capsules_keras.models import CapsNet


@pytest.fixture(scope="module")
def digits(mnist_path):
    """300 real training digits and their labels."""
    keep = np.random.default_rng(0).permutation(5000)[:300]  # every class
    with np.load(mnist_path) as data:
        x = data["x_train"][keep].astype("float32")[..., None] / 255.0
        y = data["y_train"][keep].astype("int32")
    return x, y


def test_paper_parameter_count():
    model = CapsNet()
    assert model.count_params() == 8_215_568
    assert tuple(model.digit_caps.kernel.shape) == (1152, 10, 8, 16)


@pytest.mark.parametrize(
    "image_shape, num_classes, primary",
    # 6x6 and 8x8 grids of 4 capsule types (NARROW; the paper has 32 types)
    [((28, 28, 1), 10, 144), ((32, 32, 3), 10, 256), ((28, 28, 1), 2, 144)],
)
def test_shapes_follow_the_input_and_one_step_trains(image_shape, num_classes, primary):
    model = CapsNet(image_shape=image_shape, num_classes=num_classes, **NARROW)
    assert tuple(model.digit_caps.kernel.shape) == (primary, num_classes, 8, 16)
    assert tuple(model.decoder.output_shape) == (None, *image_shape)
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, (4, *image_shape)).astype("float32")
    y = np.arange(4) % num_classes
    model.compile(optimizer="adam")
    history = model.fit(x, y, batch_size=4, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    probabilities = model.predict(x, verbose=0)
    assert probabilities.shape == (4, num_classes)
    assert np.all((probabilities >= 0) & (probabilities < 1))


def _loss_parts(model, x, y, labels_for_decoder):
    outputs = model(x)
    margin = MarginLoss()(y, outputs["lengths"])
    reconstructions = model.reconstruct(outputs["capsules"], labels_for_decoder)
    recon = ReconstructionLoss()(x, reconstructions)
    weighted = margin + model.reconstruction_weight * recon
    return outputs, float(ops.convert_to_numpy(weighted))


def _evaluated_terms_add_up(model, x, y):
    """`evaluate` logs margin and reconstruction losses that make up its loss."""
    outputs = model(x)
    margin = float(ops.convert_to_numpy(MarginLoss()(y, outputs["lengths"])))
    recon = float(
        ops.convert_to_numpy(
            ReconstructionLoss()(x, model.reconstruct(outputs["capsules"]))
        )
    )
    evaluated = model.evaluate(x, y, batch_size=len(x), verbose=0, return_dict=True)
    assert evaluated["margin_loss"] == pytest.approx(margin, rel=1e-4)
    assert evaluated["reconstruction_loss"] == pytest.approx(recon, rel=1e-4)
    assert evaluated["loss"] == pytest.approx(
        margin + model.reconstruction_weight * recon, rel=1e-4
    )


def test_decoder_masks_by_true_label_in_training_and_prediction_otherwise(digits):
    x, _ = digits
    x = x[:8]
    # Long capsules and a heavy reconstruction term make the choice of the
    # masked capsule show clearly in the loss.
    model = CapsNet(reconstruction_weight=1.0, **NARROW)
    model.digit_caps.kernel.assign(model.digit_caps.kernel * 20)
    first_dense = model.decoder.layers[0].kernel
    first_dense.assign(first_dense * 50)
    predicted = model.predict(x, verbose=0).argmax(-1)
    wrong = ((predicted + 1) % 10).astype("int32")  # never the prediction
    outputs, by_label = _loss_parts(model, x, wrong, wrong)
    _, by_prediction = _loss_parts(model, x, wrong, None)
    assert abs(by_label - by_prediction) > 0.1
    training = model.compute_loss(x, wrong, outputs, training=True)
    inference = model.compute_loss(x, wrong, outputs, training=False)
    assert float(ops.convert_to_numpy(training)) == pytest.approx(by_label, rel=1e-5)
    assert float(ops.convert_to_numpy(inference)) == pytest.approx(
        by_prediction, rel=1e-5
    )
    model.compile()
    _evaluated_terms_add_up(model, x, wrong)


def test_one_epoch_on_real_digits_lowers_the_loss(digits):
    x, y = digits
    # A quarter of the paper's width in batches of 10: its 30 steps teach it
    # more than 6 batches of 50 teach the paper's network, in less time.
    model = CapsNet(conv_filters=64, primary_capsules=8)
    model.compile(optimizer=keras.optimizers.Adam(1e-3))
    before = model.evaluate(x, y, batch_size=100, verbose=0, return_dict=True)
    history = model.fit(x, y, batch_size=10, epochs=1, verbose=0)
    after = model.evaluate(x, y, batch_size=100, verbose=0, return_dict=True)
    assert set(history.history) == {
        "loss",
        "margin_loss",
        "reconstruction_loss",
        "accuracy",
    }
    assert after["loss"] < before["loss"]
    assert after["accuracy"] > 0.5  # chance is 0.1


def test_one_hot_labels_train_too(digits):
    x, y = digits
    model = CapsNet(**NARROW)
    model.compile()
    history = model.fit(x[:20], np.eye(10)[y[:20]], batch_size=10, verbose=0)
    assert np.isfinite(history.history["loss"][0])


def test_without_reconstruction_only_the_margin_loss_is_logged(digits):
    x, y = digits
    model = CapsNet(reconstruction_weight=0, **NARROW)
    model.compile()
    history = model.fit(x[:20], y[:20], batch_size=10, verbose=0)
    assert set(history.history) == {"loss", "margin_loss", "accuracy"}
    assert history.history["margin_loss"] == pytest.approx(history.history["loss"])


@pytest.mark.parametrize("loss", [MarginLoss(), "sparse_categorical_crossentropy"])
def test_compile_takes_a_keras_loss_in_place_of_the_models_own(digits, loss):
    """The model's own loss by default (`loss="auto"` or None); a loss of the
    user's replaces it, computed on the class scores that `predict` gives."""
    x, y = digits[0][:20], digits[1][:20]
    model = CapsNet(**NARROW)
    for default in ("auto", None):
        model.compile(loss=default)
        own = model.evaluate(x, y, batch_size=20, verbose=0, return_dict=True)
        assert own["loss"] == pytest.approx(
            own["margin_loss"]
            + model.reconstruction_weight * own["reconstruction_loss"],
            rel=1e-5,
        )
    model.compile(loss=loss)
    scores = model.predict(x, verbose=0)
    expected = np.mean(ops.convert_to_numpy(keras.losses.get(loss)(y, scores)))
    result = model.evaluate(x, y, batch_size=20, verbose=0, return_dict=True)
    assert result["loss"] == pytest.approx(expected, rel=1e-5)
    assert result["loss"] != pytest.approx(own["loss"], rel=1e-3)


def test_analyze_returns_everything(digits):
    x, y = digits
    model = CapsNet(**NARROW)
    # One batch shape throughout (2): on jax every new shape compiles anew.
    inside = model.analyze(x[:4], batch_size=2)
    assert inside["lengths"].shape == (4, 10)
    assert inside["capsules"].shape == (4, 10, 16)
    assert inside["reconstructions"].shape == (4, 28, 28, 1)
    assert inside["coupling"].shape == (4, 144, 10)
    np.testing.assert_allclose(inside["coupling"].sum(-1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(inside["predictions"], inside["lengths"].argmax(-1))
    np.testing.assert_allclose(
        inside["lengths"],
        model.predict(x[:4], batch_size=2, verbose=0),
        rtol=1e-4,
        atol=1e-6,
    )
    # Three images in batches of 2, the last one shorter; and three padded to a
    # batch of 4 (with labels too): the same results, one row per image.
    for key, value in model.analyze(x[:3], batch_size=2).items():
        np.testing.assert_allclose(value, inside[key][:3], rtol=1e-5, atol=1e-6)
    for key, value in model.analyze(x[:3], batch_size=4).items():
        np.testing.assert_allclose(value, inside[key][:3], rtol=1e-5, atol=1e-6)
    other = (inside["predictions"] + 1) % 10
    labelled = model.analyze(x[:4], labels=other, batch_size=2)
    padded = model.analyze(x[:3], labels=other[:3], batch_size=4)["reconstructions"]
    np.testing.assert_allclose(
        padded, labelled["reconstructions"][:3], rtol=1e-5, atol=1e-6
    )
    assert np.abs(labelled["reconstructions"] - inside["reconstructions"]).max() > 0
    first = model.analyze(x[:4], routing_iterations=1, batch_size=2)["coupling"]
    np.testing.assert_allclose(first, 0.1, atol=1e-6)  # uniform before any update


@pytest.mark.parametrize(
    "rows, batch_size, shapes",
    [
        (1, 128, [16]),  # at least MIN_PADDED_ROWS
        (21, 128, [32]),  # the next power of two
        (300, 250, [250, 64]),
        (5, 4, [4, 4]),  # never more than batch_size
    ],
)
def test_analyze_pads_its_batches_to_a_few_shapes(rows, batch_size, shapes):
    seen = []

    def step(values):
        seen.append(len(values))
        return {"twice": ops.convert_to_tensor(2 * values)}

    values = np.arange(rows, dtype="float32")
    result = CapsNet(**NARROW)._in_batches(step, batch_size, values)
    assert seen == shapes
    np.testing.assert_array_equal(result["twice"], 2 * values)  # padding dropped


@pytest.mark.parametrize(
    "kwargs",
    [
        {"image_shape": (28, 28)},
        {"image_shape": (12, 12, 1)},
        {"num_classes": 0},
        {"routing_iterations": 0},
        {"reconstruction_weight": -1.0},
        {"decoder_units": (512, 0)},
    ],
)
def test_bad_model_arguments(kwargs):
    with pytest.raises(ValueError, match="Received: "):
        CapsNet(**kwargs)


def _trained_and_saved(digits, folder):
    """A CapsNet trained for two steps and saved as .keras; (model, path)."""
    x, y = digits
    model = CapsNet(**NARROW)
    model.compile()
    model.fit(x[:40], y[:40], batch_size=20, verbose=0)
    path = os.path.join(folder, "capsnet.keras")
    model.save(path)
    return model, path


def test_save_and_load_gives_identical_predictions(digits, tmp_path):
    x, y = digits
    model, path = _trained_and_saved(digits, tmp_path)
    loaded = keras.saving.load_model(path)
    assert isinstance(loaded, CapsNet)
    assert loaded.get_config() == model.get_config()
    np.testing.assert_allclose(
        loaded.predict(x[:16], verbose=0), model.predict(x[:16], verbose=0), atol=1e-6
    )
    # The loaded model trains on (optimizer state included).
    loaded.fit(x[:20], y[:20], batch_size=20, verbose=0)


def test_config_is_json_serializable():
    config = CapsNet(image_shape=(32, 32, 3), num_classes=2).get_config()
    revived = CapsNet.from_config(json.loads(json.dumps(config)))
    assert (
        revived.count_params()
        == CapsNet(image_shape=(32, 32, 3), num_classes=2).count_params()
    )
