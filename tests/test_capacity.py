"""The capacity planner: its counts against the models', its errors, its check.

Cheap on every backend: the large models are planned from unbuilt backbones,
whose weights are never allocated; the counts are held against
`count_params()` of small built models.
"""

import os
import sys

import keras
import pytest
from conftest import REPO_ROOT

from capsules_keras.capacity import (
    CapacityPlan,
    available_memory,
    check_fits,
    plan_capacity,
)
from capsules_keras.models import (
    CapsNet,
    CapsuleBackbone,
    CapsuleClassifier,
    EfficientCapsNet,
    EfficientEncoder,
    MatrixCapsNet,
    MultiDigitCapsNet,
    capsnet_backbone,
)

sys.path.insert(0, os.path.join(REPO_ROOT, "benchmarks"))

import capacity_check  # noqa: E402

#: A CapsNet of a few thousand weights, as the benchmark's tiny one.
SMALL = {"conv_filters": 8, "primary_capsules": 2, "primary_dim": 4}


@pytest.mark.parametrize(
    "make",
    [
        lambda: CapsNet((28, 28, 1), 10, **SMALL, decoder_units=(16, 32)),
        lambda: CapsNet((32, 32, 3), 4, **SMALL, digit_dim=8),
        lambda: CapsNet((28, 28, 1), 5, **SMALL, routing="inverted_dot_product"),
        lambda: CapsNet((28, 28, 1), 5, **SMALL, routing="self_attention"),
        lambda: EfficientCapsNet((28, 28, 1), decoder_units=(16,)),
        lambda: EfficientCapsNet((40, 36, 3), 5, decoder_units=(16,)),
        lambda: MultiDigitCapsNet((36, 36, 1), **SMALL, decoder_units=(16,)),
        lambda: CapsuleClassifier(
            CapsuleBackbone(EfficientEncoder((32, 32, 3)), 4), decoder_units=(8,)
        ),
    ],
    ids=[
        "capsnet",
        "rgb",
        "idp",
        "self-att",
        "efficient",
        "efficient-rgb",
        "multi",
        "composed",
    ],
)
def test_parameters_equal_count_params(make):
    model = make()
    plan = plan_capacity(model, batch_size=2)
    assert plan.parameters == model.count_params()
    trainable = sum(w.numpy().size for w in model.trainable_weights)
    assert plan.trainable_parameters == trainable
    digit_caps = model.backbone.digit_caps
    assert plan.class_capsule_parameters == digit_caps.count_params()
    assert plan.decoder_parameters == model.decoder.count_params()
    assert plan.primary_capsules == digit_caps.kernel.shape[0]
    assert plan.model == type(model).__name__


@pytest.mark.parametrize(
    "image_shape, num_classes, parameters, primary_capsules",
    [
        # Self-sized beyond 40 px (the paper's strides: 107,690,752 and
        # 30,329,600, tests/test_self_sizing.py); most of what remains at
        # 128 px is the decoder's last layer, 1024 x 128 x 128 x 3.
        ((128, 128, 3), 4, 58_292_992, 3_872),
        ((64, 64, 3), 5, 21_482_240, 4_608),
        ((32, 32, 3), 10, 11_749_120, 2_048),
        ((28, 28, 1), 10, 8_215_568, 1_152),  # the paper's (CapsNet's docstring)
    ],
)
def test_unbuilt_backbone_counts_the_named_models(
    image_shape, num_classes, parameters, primary_capsules
):
    backbone = capsnet_backbone(image_shape, num_classes)
    plan = plan_capacity(backbone, batch_size=4)
    assert not backbone.built  # planned from shapes, nothing allocated
    assert (plan.parameters, plan.primary_capsules) == (parameters, primary_capsules)


def test_multi_digit_default_from_its_backbone():
    # MultiDigitCapsNet's docstring: 11,361,808 on 36x36 images.
    plan = plan_capacity(capsnet_backbone((36, 36, 1)), batch_size=1)
    assert plan.parameters == 11_361_808


def test_votes_and_peak_grow_with_the_batch():
    plan = plan_capacity(capsnet_backbone((32, 32, 3), 4), batch_size=16)
    assert plan.vote_bytes_per_image == 2048 * 4 * 16 * 4
    assert plan.vote_bytes == 16 * 2048 * 4 * 16 * 4
    assert plan.peak_bytes == plan.peak_bytes_for(16) > plan.peak_bytes_for(8)
    assert plan.peak_bytes_for(8) - plan.peak_bytes_for(7) == plan.bytes_per_image
    assert plan.bytes_per_image > 3 * plan.vote_bytes_per_image
    assert plan.flops_per_image > 2 * 2048 * 4 * 8 * 16  # at least the votes
    assert plan.largest_batch(plan.peak_bytes) == 16
    assert plan.largest_batch(plan.peak_bytes - 1) == 15
    assert plan.largest_batch(0) == 0
    table = plan.table()
    assert "2,048 of 8 dims" in table and "votes per batch of 16" in table


def test_check_fits_names_the_largest_batch_and_the_knobs():
    plan = plan_capacity(capsnet_backbone((64, 64, 3), 5), batch_size=64)
    budget = plan.peak_bytes_for(10)
    with pytest.raises(ValueError) as error:
        check_fits(plan, budget)
    message = str(error.value)
    for part in ("batch_size=64", "largest batch that fits: 10", "primary_capsules"):
        assert part in message
    assert "image_shape" in message and "stride" in message
    assert f"{plan.peak_bytes / 2**20:,.0f} MB" in message
    check_fits(plan, plan.peak_bytes)  # a budget that fits passes
    check_fits(plan, None)  # unknown memory: nothing to check
    with pytest.raises(ValueError, match="largest batch that fits: none"):
        check_fits(plan, plan.fixed_bytes - 1)


def test_bad_arguments_name_what_was_received():
    backbone = capsnet_backbone()
    with pytest.raises(ValueError, match="Received: batch_size=0"):
        plan_capacity(backbone, 0)
    with pytest.raises(ValueError, match="Received: batch_size=2.5"):
        plan_capacity(backbone, 2.5)
    with pytest.raises(ValueError, match="Received: model of type Dense"):
        plan_capacity(keras.layers.Dense(2), 2)
    plan = plan_capacity(backbone, 2)
    with pytest.raises(ValueError, match="Received: plan of type dict"):
        check_fits({}, 2**30)
    with pytest.raises(ValueError, match="Received: available='1GB'"):
        check_fits(plan, "1GB")
    with pytest.raises(ValueError, match="Received: memory=None"):
        plan.largest_batch(None)


def test_matrix_capsnet_plans_parameters_and_fixed_state():
    model = MatrixCapsNet()
    plan = plan_capacity(model, batch_size=8)
    assert plan.parameters == model.count_params()
    assert plan.class_capsule_parameters == model.class_caps.count_params()
    assert plan.peak_bytes is None and plan.fixed_bytes > 4 * plan.parameters
    check_fits(plan, 2**40)
    with pytest.raises(ValueError, match="not planned"):
        plan.largest_batch(2**30)
    assert "n/a" in plan.table()


def test_available_memory_is_positive_or_unknown():
    memory = available_memory()
    assert memory is None or memory > 0
    assert isinstance(plan_capacity(capsnet_backbone(), 1), CapacityPlan)


def test_capacity_check_tiny():
    (row,) = capacity_check.run(
        [((28, 28, 1), 3, 2)], steps=1, model_kwargs=capacity_check.TINY
    )
    assert row["backend"] == keras.backend.backend()
    assert row["planned_mb"] > 0 and row["measured_mb"] > 0
    assert row["ratio"] == round(row["planned_mb"] / row["measured_mb"], 2)
    assert "| planned / measured |" in capacity_check.markdown([row])
