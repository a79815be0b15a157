"""Models that size themselves: the strides CapsNet and Efficient-CapsNet choose.

`capsnet_strides` keeps the paper's network on every image up to 40 px and
the primary-capsule grid at most 12x12 beyond; `efficient_strides` keeps
Mazzia et al.'s network up to 40 px and the last feature map at most 15x15
beyond. Strides given are kept, strides that leave nothing raise, and a
config without strides (every file saved before) means the paper's. Most
sizes here are planned from shapes (`plan_capacity` of an unbuilt
backbone), so those tests allocate no weights.
"""

import json
import os
import sys

import numpy as np
import pytest
from conftest import REPO_ROOT

from capsules_keras.capacity import plan_capacity
from capsules_keras.models import (
    CapsNet,
    CapsNetEncoder,
    CapsuleBackbone,
    EfficientCapsNet,
    EfficientEncoder,
    capsnet_backbone,
)
from capsules_keras.models.capsnet import MAX_PRIMARY_GRID, capsnet_strides
from capsules_keras.models.efficient import MAX_FEATURE_MAP, efficient_strides

sys.path.insert(0, os.path.join(REPO_ROOT, "benchmarks"))

import self_sizing  # noqa: E402

#: Small widths: what is tested here is the strides, not the capacity.
TINY = {
    "conv_filters": 8,
    "primary_capsules": 2,
    "primary_dim": 4,
    "digit_dim": 4,
    "decoder_units": (8,),
}


def capsnet_grid(side, conv, primary, kernel=9):
    """The primary-capsule grid along one side, written out again."""
    return ((side - kernel) // conv + 1 - kernel) // primary + 1


def efficient_map(side, strides):
    for size, stride in zip((5, 3, 3, 3), strides, strict=True):
        side = (side - size) // stride + 1
    return side


@pytest.mark.parametrize(
    "image_shape, strides, primary_capsules",
    [
        # The paper's sizes keep the paper's strides (and networks).
        ((28, 28, 1), (1, 2), 1_152),  # MNIST: 6x6 x 32 types
        ((32, 32, 3), (1, 2), 2_048),
        ((36, 36, 1), (1, 2), 3_200),  # MultiMNIST: 10x10
        ((40, 40, 1), (1, 2), 4_608),  # affNIST's padded MNIST: 12x12
        # Larger images: the grid stays at most 12x12.
        ((64, 64, 3), (1, 4), 4_608),
        ((128, 128, 3), (2, 5), 3_872),
        ((224, 224, 3), (2, 9), 4_608),
        ((28, 224, 1), ((1, 2), (2, 9)), 6 * 12 * 32),  # each side its own
    ],
)
def test_capsnet_strides_and_sizes(image_shape, strides, primary_capsules):
    assert capsnet_strides(image_shape) == strides
    backbone = capsnet_backbone(image_shape, 10)
    encoder = backbone.encoder
    assert (encoder.conv_strides, encoder.primary_strides) == strides
    plan = plan_capacity(backbone, batch_size=1)
    assert plan.primary_capsules == primary_capsules
    assert plan.class_capsule_parameters == primary_capsules * 10 * 8 * 16


def test_capsnet_grid_stays_within_the_budget_at_every_size():
    for side in range(17, 700):
        conv, primary = capsnet_strides((side, side, 1))
        grid = capsnet_grid(side, conv, primary)
        assert 1 <= grid <= MAX_PRIMARY_GRID, side
        assert conv <= 9 and primary <= 9  # no pixel skipped
        if side <= 40:
            assert (conv, primary) == (1, 2), side


@pytest.mark.parametrize(
    "image_shape, strides, last_map",
    [
        ((28, 28, 1), (1, 1, 1, 2), 9),  # the paper's
        ((36, 36, 1), (1, 1, 1, 2), 13),  # MultiMNIST
        ((40, 40, 3), (1, 1, 1, 2), 15),
        ((64, 64, 3), (2, 1, 1, 2), 12),
        ((128, 128, 3), (2, 2, 1, 2), 13),
        ((224, 224, 3), (2, 2, 2, 2), 12),
    ],
)
def test_efficient_strides_and_sizes(image_shape, strides, last_map):
    assert efficient_strides(image_shape) == strides
    encoder = EfficientEncoder(image_shape)
    depthwise = encoder.primary_caps.layers[0]
    assert tuple(depthwise.kernel_size) == (last_map, last_map)
    assert [layer.strides for layer in encoder.conv.layers[::3]] == [
        (s, s) for s in strides
    ]
    plan = plan_capacity(CapsuleBackbone(encoder, 10), batch_size=1)
    assert plan.primary_capsules == 16  # whatever the size


def test_efficient_strides_per_axis():
    # Each side its own: 28 px keeps the paper's, 224 px strides conv1-conv3.
    strides = ((1, 2), (1, 2), (1, 2), 2)
    assert efficient_strides((28, 224, 1)) == strides
    encoder = EfficientEncoder((28, 224, 1))
    assert [layer.strides for layer in encoder.conv.layers[::3]] == [
        (1, 2),
        (1, 2),
        (1, 2),
        (2, 2),
    ]
    depthwise = encoder.primary_caps.layers[0]
    assert tuple(depthwise.kernel_size) == (9, efficient_map(224, (2, 2, 2, 2)))


def test_efficient_map_stays_within_the_budget_at_every_size():
    for side in range(11, 700):
        strides = efficient_strides((side, side, 1))
        assert 1 <= efficient_map(side, strides) <= MAX_FEATURE_MAP, side
        if side <= 40:
            assert strides == (1, 1, 1, 2), side


def test_the_papers_models_are_unchanged():
    # Planned from shapes: the paper's CapsNet, MultiMNIST's, Efficient-CapsNet.
    for backbone, parameters in [
        (capsnet_backbone(), 8_215_568),
        (capsnet_backbone((36, 36, 1)), 11_361_808),
        (CapsuleBackbone(EfficientEncoder(), routing="self_attention"), 1_573_744),
    ]:
        assert plan_capacity(backbone, batch_size=1).parameters == parameters
    encoder = capsnet_backbone().encoder
    assert encoder.conv.strides == (1, 1)
    assert encoder.primary_caps.conv.strides == (2, 2)
    # Configs hold what they held before the models sized themselves.
    assert "primary_strides" not in encoder.get_config()
    assert "conv_strides" not in EfficientEncoder().get_config()
    config = CapsNet(**TINY).get_config()
    assert "conv_strides" not in config and "primary_strides" not in config


def test_a_config_without_strides_means_the_papers():
    # A 64x64 CapsNet saved before the models sized themselves has no
    # strides in its config: it loads with the paper's, as it was built.
    old = CapsNet((64, 64, 1), 3, conv_strides=1, primary_strides=2, **TINY)
    config = json.loads(json.dumps(old.get_config()))
    assert "primary_strides" not in config
    revived = CapsNet.from_config(config)
    assert (revived.conv_strides, revived.primary_strides) == (1, 2)
    assert revived.count_params() == old.count_params()
    encoder = CapsNetEncoder.from_config(
        {"image_shape": (64, 64, 1), "conv_filters": 8, "primary_capsules": 2}
    )
    assert encoder.compute_output_shape((None, 64, 64, 1)) == (None, 24 * 24 * 2, 8)
    config = EfficientCapsNet((64, 64, 1), decoder_units=(8,)).get_config()
    assert config["conv_strides"] == (2, 1, 1, 2)  # chosen, so saved
    del config["conv_strides"]
    assert EfficientCapsNet.from_config(config).conv_strides == (1, 1, 1, 2)


def test_strides_given_are_kept():
    # The rule chooses only what is not given, and gives way.
    assert capsnet_strides((128, 128, 3), primary_strides=2) == (4, 2)
    assert capsnet_strides((128, 128, 3), conv_strides=1) == (1, 9)  # 13x13
    assert capsnet_strides((64, 64, 3), conv_strides=(1, 2)) == ((1, 2), (4, 2))
    # The paper's strides at any size: the sizes before the models sized
    # themselves (the 30.3M and 107.7M parameters).
    for image_shape, classes, parameters, primary_capsules in [
        ((64, 64, 3), 5, 30_329_600, 18_432),
        ((128, 128, 3), 4, 107_690_752, 100_352),
    ]:
        backbone = capsnet_backbone(
            image_shape, classes, conv_strides=1, primary_strides=2
        )
        plan = plan_capacity(backbone, batch_size=1)
        assert (plan.parameters, plan.primary_capsules) == (
            parameters,
            primary_capsules,
        )
    encoder = EfficientEncoder((64, 64, 3), conv_strides=[1, 1, 1, 2])
    assert encoder.conv_strides == (1, 1, 1, 2)
    assert encoder.primary_caps.layers[0].kernel_size == (27, 27)


@pytest.mark.parametrize(
    "build, received",
    [
        (
            lambda: capsnet_backbone((28, 28, 1), conv_strides=3),
            "image_shape=(28, 28, 1), kernel_size=9, conv_strides=3, "
            "primary_strides=None",
        ),
        (lambda: capsnet_backbone((16, 16, 1)), "image_shape=(16, 16, 1)"),
        (
            lambda: EfficientEncoder((28, 28, 1), conv_strides=(3, 3, 3, 3)),
            "image_shape=(28, 28, 1), conv_strides=(3, 3, 3, 3)",
        ),
    ],
)
def test_strides_that_leave_no_capsule_are_refused(build, received):
    with pytest.raises(ValueError, match="too small") as error:
        build()
    assert f"Received: {received}" in str(error.value)


@pytest.mark.parametrize("strides", [0, True, "2", (1, 2, 3), 2.0])
def test_bad_strides_are_refused(strides):
    with pytest.raises(ValueError, match="Received: primary_strides="):
        capsnet_backbone((64, 64, 1), primary_strides=strides)
    with pytest.raises(ValueError, match="Received: conv_strides="):
        EfficientEncoder((64, 64, 1), conv_strides=(strides, 1, 1, 2))
    with pytest.raises(ValueError, match="four strides"):
        EfficientEncoder((64, 64, 1), conv_strides=(1, 2))


@pytest.mark.parametrize(
    "build",
    [
        lambda: CapsNet((64, 64, 3), 3, **TINY),
        lambda: EfficientCapsNet((64, 64, 3), 3, digit_dim=4, decoder_units=(8,)),
    ],
    ids=["capsnet", "efficient"],
)
def test_a_self_sized_model_trains_at_64x64x3(build):
    model = build()
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, (4, 64, 64, 3)).astype("float32")
    y = np.arange(4) % 3
    model.compile(optimizer="adam")
    history = model.fit(x, y, batch_size=4, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    # Its config (with the strides chosen) builds the same weights again.
    clone = type(model).from_config(json.loads(json.dumps(model.get_config())))
    assert clone.get_config() == model.get_config()
    clone.set_weights(model.get_weights())


def test_accuracy_benchmark_tiny(mnist_path, tmp_path):
    out, table = tmp_path / "sizing.json", tmp_path / "sizing.md"
    flags = ["--data", mnist_path, "--image-size", "44", "--epochs", "1"]
    flags += ["--max-train-samples", "16", "--max-test-samples", "10"]
    flags += ["--conv-filters", "4", "--primary-capsules", "2"]
    flags += ["--out", str(out), "--markdown", str(table)]
    result = self_sizing.main(flags)
    self_sized, paper = result["results"]
    assert (self_sized["conv_strides"], self_sized["primary_strides"]) == (1, 3)
    assert (paper["conv_strides"], paper["primary_strides"]) == (1, 2)
    # 44 px: a 10x10 grid against 14x14.
    assert (self_sized["primary_capsules"], paper["primary_capsules"]) == (200, 392)
    for row in result["results"]:
        low, high = row["interval_95"]
        assert low <= row["test_accuracy"] <= high
    test = result["mcnemar"]
    assert test["self_sized_only"] + test["paper_only"] <= result["n_test"] == 10
    with open(out) as f:
        assert json.load(f)["results"] == result["results"]
    assert "| self-sized | (1, 3) | 200 |" in table.read_text()
    with pytest.raises(SystemExit, match="exists"):
        self_sizing.main(flags)  # an old result is never overwritten
