"""Several digits per image: the metrics, MultiDigitCapsNet, the CNN's variant."""

import json

import keras
import numpy as np
import pytest
from keras import ops
from numpy_reference import margin_loss

from capsules_keras.data import load_mnist
from capsules_keras.data.multi_mnist import MultiMNISTBatches, multi_mnist_pairs
from capsules_keras.metrics import (
    MultiLabelAccuracy,
    correct_in_top_k,
    k_hot,
    top_k_classes,
)
from capsules_keras.models import MultiDigitCapsNet, baseline_cnn

#: A small MultiDigitCapsNet: the paper's layers, fewer channels.
SMALL = {"conv_filters": 16, "primary_capsules": 4, "decoder_units": (32,)}


@pytest.fixture(scope="module")
def pairs(mnist_path):
    """64 test pairs and a generator of training pairs, from real digits."""
    (x_train, y_train), (x_test, y_test), _ = load_mnist("file", mnist_path)
    x, y = multi_mnist_pairs(x_test, y_test, 64, seed=0)
    return x, y, (x_train, y_train)


def correct_reference(labels, scores, k):
    """How many of each row's labels are among its k highest scores."""
    top = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    pairs = zip(top, labels, strict=True)
    return np.array([len(set(t) & set(lab)) for t, lab in pairs])


def test_correct_in_top_k_matches_a_reference():
    rng = np.random.default_rng(0)
    scores = rng.random((200, 10)).astype("float32")
    labels = np.stack([rng.permutation(10)[:2] for _ in range(200)])
    expected = correct_reference(labels, scores, 2)
    assert set(expected) == {0, 1, 2}  # every case occurs
    got = ops.convert_to_numpy(correct_in_top_k(labels, scores, 2))
    np.testing.assert_array_equal(got, expected)
    two_hot = np.zeros((200, 10), "float32")
    np.put_along_axis(two_hot, labels, 1.0, axis=1)
    np.testing.assert_array_equal(ops.convert_to_numpy(k_hot(labels, 10)), two_hot)
    got = ops.convert_to_numpy(correct_in_top_k(two_hot, scores, 2))
    np.testing.assert_array_equal(got, expected)
    top = ops.convert_to_numpy(top_k_classes(scores, 2))
    np.testing.assert_array_equal(top, np.argsort(-scores, axis=1)[:, :2])


def test_multi_label_accuracy_exact_and_at_least_one():
    rng = np.random.default_rng(1)
    scores = rng.random((64, 10)).astype("float32")
    labels = np.stack([rng.permutation(10)[:2] for _ in range(64)])
    correct = correct_reference(labels, scores, 2)
    exact, at_least_one = MultiLabelAccuracy(2), MultiLabelAccuracy(2, min_correct=1)
    for metric in (exact, at_least_one):
        metric.update_state(labels[:40], scores[:40])
        metric.update_state(labels[40:], scores[40:])
    assert exact.name == "exact_match" and at_least_one.name == "at_least_1"
    assert float(exact.result()) == pytest.approx(np.mean(correct == 2))
    assert float(at_least_one.result()) == pytest.approx(np.mean(correct >= 1))
    revived = MultiLabelAccuracy.from_config(json.loads(json.dumps(exact.get_config())))
    assert (revived.k, revived.min_correct, revived.name) == (2, 2, "exact_match")


@pytest.mark.parametrize(
    "kwargs", [{"k": 0}, {"k": 2, "min_correct": 3}, {"k": 2, "min_correct": 0}]
)
def test_multi_label_accuracy_refuses_bad_arguments(kwargs):
    with pytest.raises(ValueError, match="Received"):
        MultiLabelAccuracy(**kwargs)


def test_paper_size_for_36x36_images():
    model = MultiDigitCapsNet()
    assert model.count_params() == 11_361_808  # the 36x36 input: 10x10 grid
    assert tuple(model.digit_caps.kernel.shape) == (3200, 10, 8, 16)
    assert model.get_config()["digits_per_image"] == 2


def test_loss_is_the_margin_loss_of_both_digits_plus_each_reconstruction(pairs):
    x, y, _ = pairs
    model = MultiDigitCapsNet(**SMALL)
    outputs = model(x[:8])
    lengths = ops.convert_to_numpy(outputs["lengths"])
    two_hot = np.zeros((8, 10), "float32")
    np.put_along_axis(two_hot, y["labels"][:8], 1.0, axis=1)
    errors = 0.0
    for d in (0, 1):
        decoded = model.reconstruct(outputs["capsules"], y["labels"][:8, d])
        difference = y["digits"][:8, d] - ops.convert_to_numpy(decoded)
        errors = errors + np.sum(difference**2, axis=(1, 2, 3))
    expected = np.mean(margin_loss(two_hot, lengths) + 0.0005 * errors)
    targets = {"labels": y["labels"][:8], "digits": y["digits"][:8]}
    loss = model.compute_loss(x[:8], targets, outputs, training=True)
    assert float(ops.convert_to_numpy(loss)) == pytest.approx(expected, rel=1e-5)
    # Labels alone (evaluation without the digits): the margin loss only.
    margin_only = model.compute_loss(x[:8], y["labels"][:8], outputs, training=False)
    assert float(ops.convert_to_numpy(margin_only)) == pytest.approx(
        np.mean(margin_loss(two_hot, lengths)), rel=1e-5
    )


def test_fit_on_fresh_pairs_lowers_the_loss_and_reports_both_metrics(pairs):
    x, y, (x_train, y_train) = pairs
    model = MultiDigitCapsNet(**SMALL)
    model.compile(optimizer=keras.optimizers.Adam(1e-3))
    batches = MultiMNISTBatches(x_train, y_train, 32, pairs_per_epoch=128, seed=0)
    history = model.fit(batches, epochs=3, validation_data=(x, y), verbose=0)
    losses = history.history["loss"]
    assert losses[-1] < losses[0]
    for name in ("exact_match", "at_least_1", "val_exact_match", "val_at_least_1"):
        assert 0 <= history.history[name][-1] <= 1
    scores = model.predict(x, verbose=0)
    result = model.evaluate(x, y["labels"], verbose=0, return_dict=True)
    correct = correct_reference(y["labels"], scores, 2)
    assert result["exact_match"] == pytest.approx(np.mean(correct == 2))
    assert result["at_least_1"] == pytest.approx(np.mean(correct >= 1))


def test_predictions_analysis_and_fewer_routing_iterations(pairs, tmp_path):
    x, y, _ = pairs
    model = MultiDigitCapsNet(**SMALL)
    model.compile()
    lengths = model.predict(x[:6], verbose=0)
    predicted = model.predicted_classes(lengths)
    assert predicted.shape == (6, 2)
    np.testing.assert_array_equal(predicted, np.argsort(-lengths, axis=1)[:, :2])
    inside = model.analyze(x[:6])
    assert inside["reconstructions"].shape == (6, 2, 36, 36, 1)
    assert inside["coupling"].shape == (6, 400, 10)
    np.testing.assert_array_equal(inside["predictions"], predicted)
    # Reconstruction d comes from the capsule of predicted class d.
    first = model.reconstruct(model(x[:6])["capsules"], predicted[:, 0])
    np.testing.assert_allclose(
        inside["reconstructions"][:, 0], ops.convert_to_numpy(first), atol=1e-5
    )
    with_labels = model.analyze(x[:6], labels=y["labels"][:6])
    second = model.reconstruct(model(x[:6])["capsules"], y["labels"][:6, 1])
    np.testing.assert_allclose(
        with_labels["reconstructions"][:, 1], ops.convert_to_numpy(second), atol=1e-5
    )
    one = model.with_routing_iterations(1)
    assert one.routing_iterations == 1 and model.routing_iterations == 3
    np.testing.assert_allclose(
        one.predict(x[:6], verbose=0),
        model.analyze(x[:6], routing_iterations=1)["lengths"],
        atol=1e-5,
    )
    path = str(tmp_path / "multi.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert isinstance(loaded, MultiDigitCapsNet)
    np.testing.assert_allclose(loaded.predict(x[:6], verbose=0), lengths, atol=1e-6)


def test_targets_as_users_hold_them(pairs):
    x, y, _ = pairs
    model = MultiDigitCapsNet(**SMALL)
    model.compile()
    as_uint8 = {
        "labels": y["labels"][:8].astype("uint8"),
        "digits": (y["digits"][:8, ..., 0] * 255).round().astype("uint8"),
    }
    model.fit((x[:8] * 255).round().astype("uint8"), as_uint8, verbose=0)


@pytest.mark.parametrize(
    "targets, match",
    [
        (lambda y: y["labels"], "reconstruct each digit alone"),
        (lambda y: {"labels": y["labels"], "images": y["digits"]}, "keys"),
        (lambda y: {"labels": y["labels"][:, :1]}, r"shape \(n, 2\)"),
        (lambda y: {"labels": np.zeros_like(y["labels"])}, "must differ"),
        (lambda y: {"labels": y["labels"] + 10}, r"0\.\.9"),
        (lambda y: {"labels": y["labels"], "digits": y["digits"][:, :1]}, "2 images"),
        (lambda y: {"labels": y["labels"], "digits": y["digits"] * 2}, r"\[0, 1\]"),
    ],
)
def test_bad_targets_are_refused_before_training(pairs, targets, match):
    x, y, _ = pairs
    model = MultiDigitCapsNet(**SMALL)
    model.compile()
    with pytest.raises(ValueError, match=match):
        model.fit(x[:8], targets({k: v[:8] for k, v in y.items()}), verbose=0)


def test_bad_model_arguments():
    with pytest.raises(ValueError, match="digits_per_image"):
        MultiDigitCapsNet(digits_per_image=10)
    with pytest.raises(ValueError, match="digits_per_image"):
        MultiDigitCapsNet(digits_per_image=0)


def test_cnn_with_sigmoid_outputs_trains_on_two_hot_targets(pairs):
    x, y, (x_train, y_train) = pairs
    model = baseline_cnn((36, 36, 1), 10, multi_label=True)
    probabilities = model.predict(x[:4], verbose=0)
    assert probabilities.shape == (4, 10)
    assert not np.allclose(probabilities.sum(axis=1), 1.0)  # not a softmax
    model.compile(
        "adam",
        loss="binary_crossentropy",
        metrics=[MultiLabelAccuracy(2), MultiLabelAccuracy(2, min_correct=1)],
    )
    batches = MultiMNISTBatches(
        x_train, y_train, 32, pairs_per_epoch=64, seed=0, targets="two_hot"
    )
    history = model.fit(batches, epochs=1, verbose=0)
    assert {"exact_match", "at_least_1"} <= set(history.history)
