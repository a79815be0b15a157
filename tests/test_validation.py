"""Every bad argument and bad input raises a ValueError naming what it got."""

import keras
import numpy as np
import pytest

from capsules_keras import (
    DigitCaps,
    Length,
    MarginLoss,
    Mask,
    PrimaryCaps,
    Squash,
    dynamic_routing,
    margin_loss,
    safe_norm,
    squash,
)
from capsules_keras.training import TrainConfig, trainer_settings

RECEIVED = "Received: "


@pytest.mark.parametrize(
    "make",
    [
        lambda: Squash(axis="last"),
        lambda: Squash(epsilon=0),
        lambda: Length(epsilon=-1e-7),
        lambda: PrimaryCaps(capsule_types=0),
        lambda: PrimaryCaps(capsule_dim=-8),
        lambda: PrimaryCaps(capsule_types=2.5),
        lambda: DigitCaps(num_capsules=0),
        lambda: DigitCaps(capsule_dim=0),
        lambda: DigitCaps(routing_iterations=0),
        lambda: DigitCaps(routing_iterations=-3),
        lambda: DigitCaps(routing_iterations=True),
        lambda: MarginLoss(m_plus=0.1, m_minus=0.9),
        lambda: MarginLoss(lambda_=0),
        lambda: MarginLoss(m_minus=-0.1),
    ],
)
def test_bad_arguments(make):
    with pytest.raises(ValueError, match=RECEIVED):
        make()


def test_routing_iterations_error_names_the_value():
    with pytest.raises(ValueError, match=r"routing_iterations=0$"):
        DigitCaps(routing_iterations=0)


@pytest.mark.parametrize(
    "call",
    [
        lambda: squash(np.ones((2, 3), "float32"), epsilon=0),
        lambda: safe_norm(np.ones((2, 3), "float32"), epsilon=-1),
        lambda: dynamic_routing(np.ones((2, 3, 4), "float32")),
        lambda: dynamic_routing(np.ones((2, 3, 4, 5), "float32"), iterations=0),
        lambda: margin_loss(np.ones((2, 2, 2)), np.ones((2, 3), "float32")),
        lambda: margin_loss(np.ones((2, 4)), np.ones((2, 3), "float32")),
    ],
)
def test_bad_op_inputs(call):
    with pytest.raises(ValueError, match=RECEIVED):
        call()


@pytest.mark.parametrize(
    "layer, shape",
    [
        (lambda: PrimaryCaps(), (2, 28, 28)),  # no channel axis
        (lambda: DigitCaps(), (2, 1152)),  # rank 2
        (lambda: DigitCaps(), (2, 1152, 8, 1)),  # rank 4
        (lambda: Length(), (5,)),
        (lambda: Mask(), (2, 10)),
    ],
)
def test_wrong_input_rank(layer, shape):
    with pytest.raises(ValueError, match=RECEIVED):
        layer()(np.ones(shape, "float32"))


def test_wrong_input_rank_in_functional_model():
    with pytest.raises(ValueError, match=r"Received: input_shape=\(None, 1152\)"):
        DigitCaps()(keras.Input((1152,)))


def test_primary_caps_needs_known_grid():
    with pytest.raises(ValueError, match=RECEIVED):
        PrimaryCaps(kernel_size=3)(keras.Input((None, None, 4)))


def test_digit_caps_mismatched_capsule_dims():
    """Once built, the layer's `InputSpec` refuses other capsule counts and
    dimensions before `call` (Keras' message names the shape received)."""
    layer = DigitCaps(4, 5)
    layer(np.ones((2, 7, 3), "float32"))
    with pytest.raises(ValueError, match=r"received input with shape \(2, 7, 4\)"):
        layer(np.ones((2, 7, 4), "float32"))
    with pytest.raises(ValueError, match=r"received input with shape \(2, 6, 3\)"):
        layer(np.ones((2, 6, 3), "float32"))
    with pytest.raises(ValueError, match=r"Received: input_shape=\(2, 6, 3\)"):
        layer.votes(np.ones((2, 6, 3), "float32"))  # outside `__call__`


def test_primary_caps_refuses_other_channels_once_built():
    layer = PrimaryCaps(2, 4, kernel_size=3)
    layer(np.ones((1, 5, 5, 3), "float32"))
    with pytest.raises(ValueError, match=r"received input with shape \(1, 5, 5, 2\)"):
        layer(np.ones((1, 5, 5, 2), "float32"))


def test_mask_bad_inputs():
    caps = np.ones((2, 3, 4), "float32")
    with pytest.raises(ValueError, match=RECEIVED):
        Mask()([caps, np.array([0, 1]), np.array([1, 0])])
    with pytest.raises(ValueError, match=RECEIVED):
        Mask()([caps, np.ones((2, 5), "float32")])  # one-hot of the wrong width


@pytest.mark.parametrize(
    "layer, old, new, value",
    [
        (PrimaryCaps, "num_capsules", "capsule_types", 4),
        (Squash, "variant", "squash", "exponential"),
    ],
)
def test_old_argument_names_work_with_a_deprecation_warning(layer, old, new, value):
    """One name for one idea: `PrimaryCaps(capsule_types=)` as in
    `PrimaryMatrixCaps`, `Squash(squash=)` as in `DigitCaps`. The old names
    keep working, in code and in saved configs, and say what replaced them."""
    with pytest.warns(DeprecationWarning, match=f"`{old}` is deprecated.*`{new}`"):
        renamed = layer(**{old: value})
    assert getattr(renamed, new) == value
    config = {**layer(**{new: value}).get_config(), "name": "saved_before"}
    assert new in config and old not in config
    del config[new]
    with pytest.warns(DeprecationWarning, match=f"`{old}` is deprecated"):
        loaded = layer.from_config({**config, old: value})
    assert getattr(loaded, new) == value
    with pytest.warns(DeprecationWarning, match=f"`{old}` is deprecated"):
        assert getattr(loaded, old) == value
    with pytest.raises(ValueError, match=f"Received: {old}="):
        layer(**{old: value, new: value})


# The trainer's settings: `TrainConfig` refuses a bad value in one place.


@pytest.mark.parametrize(
    "values, received",
    [
        ({"preset": "slow"}, "preset='slow'"),
        ({"model": "resnet"}, "model='resnet'"),
        ({"dataset": "cifar10"}, "dataset='cifar10'"),
        ({"data": 3}, "data=3"),
        ({"epochs": 0}, "epochs=0"),
        ({"batch_size": 1.5}, "batch_size=1.5"),
        ({"learning_rate": 0}, "learning_rate=0"),
        ({"lr_decay": 1.5}, "lr_decay=1.5"),
        ({"augment": 1}, "augment=1"),
        ({"max_train_samples": -1}, "max_train_samples=-1"),
        ({"routing": "em"}, "routing='em'"),
        ({"routing": "self_attention", "routing_iterations": 3}, "iterations=3"),
        ({"reconstruction_weight": -1.0}, "reconstruction_weight=-1.0"),
        ({"model": "cnn", "conv_filters": 8}, "conv_filters=8"),
        ({"pairs_per_epoch": 10}, "pairs_per_epoch=10"),
        ({"model": "em", "dataset": "multi_mnist"}, "dataset='multi_mnist'"),
        ({"seed": -1}, "seed=-1"),
        ({"jit_compile": True}, "jit_compile=True"),
        ({"num_processes": 0}, "num_processes=0"),
    ],
)
def test_train_config_names_a_bad_value(values, received):
    with pytest.raises(ValueError, match=f"Received: .*{received}"):
        TrainConfig(**values)
    with pytest.raises(ValueError, match=f"Received: .*{received}"):
        trainer_settings(**values)
