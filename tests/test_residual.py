"""The residual encoder: its sizes, its blocks, its checks, and the planner's
contract with encoders (it costs what an encoder lists, refuses what it
cannot cost).

Trained on both tasks and saved with the other encoders in
tests/test_composition.py; loaded under the next backend in
tests/test_saving_across_backends.py.
"""

import keras
import pytest

from capsules_keras.capacity import plan_capacity
from capsules_keras.layers import PrimaryCaps
from capsules_keras.models import (
    CapsuleBackbone,
    CapsuleClassifier,
    CapsuleEncoder,
    ResidualBlock,
    ResidualEncoder,
)
from capsules_keras.models.residual import MAX_FEATURE_MAP, MOMENTUM, stem_pools


@pytest.mark.parametrize(
    "image_shape, pools, cells",
    [
        ((28, 28, 1), 0, 5 * 5),  # 28 -> 28, 14, 7 -> a 5x5 grid
        ((40, 40, 3), 0, 8 * 8),
        ((48, 48, 3), 0, 10 * 10),  # the largest map without a pool: 12
        ((64, 64, 3), 1, 6 * 6),
        ((128, 96, 3), 2, 6 * 4),  # the longer side decides
    ],
)
def test_the_map_is_shrunk_before_the_primary_capsules(image_shape, pools, cells):
    encoder = ResidualEncoder(image_shape, primary_capsules=4)
    assert stem_pools(image_shape) == pools
    names = [layer.name for layer in encoder.conv.layers]
    assert sum(name.startswith("pool") for name in names) == pools
    features = encoder.conv.compute_output_shape((1, *image_shape))
    assert max(features[1:3]) <= MAX_FEATURE_MAP and features[-1] == 128
    capsules = encoder.compute_output_shape((1, *image_shape))
    assert capsules[1] == cells * 4  # 4 capsule types a cell


def test_every_batch_normalisation_follows_the_batches_quickly():
    encoder = ResidualEncoder((40, 40, 3), widths=(4, 8, 8), primary_capsules=2)
    encoder.build((None, 40, 40, 3))
    norms = [
        layer
        for layer in encoder._flatten_layers()
        if isinstance(layer, keras.layers.BatchNormalization)
    ]
    assert len(norms) == 1 + 2 * 3 + 2  # the stem, two a block, two shortcuts
    assert {layer.momentum for layer in norms} == {MOMENTUM}


def test_a_block_projects_its_shortcut_only_where_the_shape_changes():
    x = keras.ops.ones((2, 8, 8, 4))
    same = ResidualBlock(4)
    assert tuple(same(x).shape) == (2, 8, 8, 4) and same.shortcut is None
    strided = ResidualBlock(6, strides=2)
    assert tuple(strided(x).shape) == (2, 4, 4, 6)
    assert [layer.name for layer in strided.shortcut.layers] == [
        "average",
        "project",
        "project_bn",
    ]
    # Its output is a ReLU's, and its config rebuilds it. (An encoder's
    # forward pass: tests/test_composition.py.)
    assert float(keras.ops.min(strided(x))) >= 0
    again = ResidualBlock.from_config(strided.get_config())
    assert (again.filters, again.strides) == (6, 2)


def test_every_layer_is_planned_and_counted():
    model = CapsuleClassifier(
        CapsuleBackbone(
            ResidualEncoder((64, 64, 3), widths=(4, 8, 8), primary_capsules=2),
            num_classes=3,
        ),
        decoder_units=(8,),
    )
    model.build((None, 64, 64, 3))
    plan = plan_capacity(model, batch_size=2)
    assert plan.parameters == model.count_params()
    trainable = sum(w.numpy().size for w in model.trainable_weights)
    assert plan.trainable_parameters == trainable  # the moving statistics do not
    assert plan.primary_capsules == 6 * 6 * 2
    # The planner walks every layer with weights once, shortcuts included.
    encoder = model.backbone.encoder
    planned = {id(layer) for layer, _ in encoder.planned_layers((1, 64, 64, 3))}
    weighted = [
        layer
        for layer in encoder._flatten_layers(include_self=False)
        if layer.weights and not layer._layers
    ]
    assert {id(layer) for layer in weighted} - planned == {
        id(encoder.primary_caps.conv)  # planned as its PrimaryCaps
    }


class _DenseEncoder(CapsuleEncoder):
    """An encoder with a layer the planner does not know (Dense)."""

    squash = "sabour"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.image_shape = (8, 8, 1)
        self.conv = keras.layers.Dense(4, name="mixer")
        self.primary_caps = PrimaryCaps(2, 4, 3, strides=1)

    def call(self, images, training=None):
        return self.primary_caps(self.conv(images))

    def compute_output_shape(self, input_shape):
        return self.primary_caps.compute_output_shape(
            self.conv.compute_output_shape(input_shape)
        )


def test_a_layer_the_planner_cannot_cost_is_refused_by_name():
    backbone = CapsuleBackbone(_DenseEncoder(), num_classes=2)
    with pytest.raises(ValueError, match="'mixer' of type Dense in the encoder _Dense"):
        plan_capacity(backbone, batch_size=2)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"widths": (8, 16)}, r"3 residual blocks. Received: widths=\(8, 16\)"),
        ({"widths": (8, 0, 16)}, "Received: widths=0"),
        ({"image_shape": (8, 8, 3)}, "feature map would be 2x2"),
        ({"image_shape": (28, 28)}, "image_shape"),
    ],
)
def test_bad_arguments_name_what_was_received(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ResidualEncoder(**kwargs)
