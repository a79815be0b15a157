"""The pretrained models shipped with the package: they load offline on every
backend and score on the MNIST test digits what their cards say."""

import hashlib

import numpy as np
import pytest

from capsules_keras.data import get_dataset
from capsules_keras.metrics import binomial_interval
from capsules_keras.models import (
    PRETRAINED,
    CapsNet,
    CapsuleModel,
    EfficientCapsNet,
    pretrained_card,
)
from capsules_keras.models.pretrained import pretrained_path

#: The class each shipped model loads as.
CLASSES = {"capsnet_mnist": CapsNet, "efficient_capsnet_mnist": EfficientCapsNet}


@pytest.fixture(scope="module", params=sorted(PRETRAINED))
def pretrained(request):
    name = request.param
    return name, CLASSES[name].from_preset(name)


def test_every_pretrained_model_has_its_file_and_card():
    assert set(CLASSES) == set(PRETRAINED)
    for name in PRETRAINED:
        card = pretrained_card(name)
        assert card["name"] == name
        digest = hashlib.sha256(pretrained_path(name).read_bytes()).hexdigest()
        assert digest == card["sha256"]  # the card describes this very file


def test_it_scores_its_card_on_the_test_digits(pretrained, mnist_path):
    name, model = pretrained
    # mnist-offline.npz holds the full MNIST test set, the card's.
    _, (x_test, y_test), _ = get_dataset("mnist").load(path=mnist_path)
    assert len(y_test) == 10_000
    card = pretrained_card(name)
    assert card["test_accuracy"] == (10_000 - len(card["test_errors"])) / 10_000
    # The first 1,000 digits and every one the card lists as wrong (the
    # exporter scored all 10,000): any change to the weights that moves a
    # prediction shows here, at a tenth of the time the paper's network takes
    # over all of them on each backend.
    picked = np.union1d(np.arange(1_000), card["test_errors"])
    scores = model.predict(x_test[picked], batch_size=500, verbose=0)
    wrong = picked[np.argmax(scores, axis=-1) != y_test[picked]]
    assert wrong.tolist() == card["test_errors"]


def test_it_is_the_model_its_card_describes(pretrained):
    name, model = pretrained
    card = pretrained_card(name)
    assert type(model).__name__ == card["model"]
    assert model.count_params() == card["parameters"]
    assert model.count_encoder_params() == card["encoder_parameters"]
    assert CapsuleModel.from_preset(name).count_params() == card["parameters"]
    # Shipped in float32 whatever the run trained in; the weights as stored.
    assert model.dtype_policy.name == "float32"
    assert {w.dtype for w in model.weights} == {"float32"}
    interval = binomial_interval(card["test_accuracy"], 10_000)  # Wilson's
    assert card["test_accuracy_95"] == pytest.approx(list(interval))


def test_from_preset_refuses_an_unknown_name():
    with pytest.raises(ValueError, match="'capsnet_imagenet'"):
        EfficientCapsNet.from_preset("capsnet_imagenet")


def test_from_preset_refuses_another_model_class():
    with pytest.raises(ValueError, match="of class EfficientCapsNet, not CapsNet"):
        CapsNet.from_preset("efficient_capsnet_mnist")
    with pytest.raises(ValueError, match="of class CapsNet, not EfficientCapsNet"):
        EfficientCapsNet.from_preset("capsnet_mnist")
