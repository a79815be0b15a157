"""Efficient-CapsNet (Mazzia et al. 2021): its encoder (convolutions, depthwise
primary capsules), and the one-label task on it with self-attention routing."""

import keras
from keras import layers, ops

from capsules_keras._checks import check_image_shape, collapsed, per_axis
from capsules_keras.layers import BatchNormalization, Squash
from capsules_keras.models.backbone import CapsuleBackbone
from capsules_keras.models.classifier import (
    DECODER_UNITS,
    RECONSTRUCTION_WEIGHT,
    CapsuleClassifier,
)
from capsules_keras.models.encoder import CapsuleEncoder

#: The largest last feature map, a side, that the default strides give: a
#: 40x40 image's (15x15), so that Efficient-CapsNet, like CapsNet, keeps its
#: published network on every image up to 40 px (28 px: 9x9; MultiMNIST's
#: 36 px: 13x13).
MAX_FEATURE_MAP = 15
#: Mazzia et al.'s strides of the four convolutions.
PAPER_STRIDES = (1, 1, 1, 2)


def _last_map(side, strides):
    """Side of the last feature map, from an image side and the four strides."""
    sizes = [size for _, size, _ in EfficientEncoder.CONVOLUTIONS]
    for size, stride in zip(sizes, strides, strict=True):
        side = (side - size) // stride + 1
    return side


def efficient_strides(image_shape, conv_strides=None):
    """The strides of Efficient-CapsNet's four convolutions for `image_shape`.

    Along the height and along the width apart: the paper's (1, 1, 1, 2)
    while the last feature map has at most `MAX_FEATURE_MAP` (15) cells;
    otherwise the first three convolutions' strides grow by one in turn
    (conv1, conv2, conv3, conv1, ...; none beyond its kernel, which would
    skip pixels) until it does:

    ```
    strides = [1, 1, 1, 2]
    while last_map(side, strides) > 15 and strides[:3] != [5, 3, 3]:
        strides[turn % 3] = min(strides[turn % 3] + 1, its kernel size)
    ```

    (28 px: the paper's, 9x9; 64 px: (2, 1, 1, 2), 12x12; 128 px:
    (2, 2, 1, 2), 13x13; 224 px: (2, 2, 2, 2), 12x12; a side beyond
    1,484 px keeps (5, 3, 3, 2) and a larger map.) The primary capsules are
    16 whatever the size (the depthwise kernel covers the whole last map),
    so the class capsules never grow; what this bounds is the depthwise
    kernel (at most 15 x 15 x 128 weights) and the feature maps each image
    keeps for training, which at the paper's strides grow with the image's
    area. The sizes it gives: docs/guides/capacity.md, "Models that size
    themselves".

    Args:
        image_shape: `(height, width, channels)` of the images.
        conv_strides: Four strides, one per convolution (an int or a
            `(height, width)` pair each); None chooses them. Given, they
            are kept.

    Returns:
        A tuple of four strides, each an int, or a `(height, width)` pair
        where the two differ.

    >>> efficient_strides((28, 28, 1)), efficient_strides((128, 128, 3))
    ((1, 1, 1, 2), (2, 2, 1, 2))
    """
    if conv_strides is not None:
        if not isinstance(conv_strides, (tuple, list)) or len(conv_strides) != 4:
            raise ValueError(
                "`conv_strides` must hold four strides, one per convolution. "
                f"Received: conv_strides={conv_strides!r}"
            )
        pairs = [per_axis("conv_strides", stride) for stride in conv_strides]
        return tuple(collapsed(pair) for pair in pairs)
    kernels = [size for _, size, _ in EfficientEncoder.CONVOLUTIONS[:3]]
    chosen = []  # the four strides along the height, then along the width
    for side in image_shape[:2]:
        strides, turn = list(PAPER_STRIDES), 0
        while _last_map(side, strides) > MAX_FEATURE_MAP and strides[:3] != kernels:
            k = turn % 3
            strides[k] = min(strides[k] + 1, kernels[k])
            turn += 1
        chosen.append(strides)
    return tuple(collapsed(pair) for pair in zip(*chosen, strict=True))


@keras.saving.register_keras_serializable(package="capsules_keras")
class EfficientEncoder(CapsuleEncoder):
    """Efficient-CapsNet's encoder: four convolutions, then depthwise capsules.

    ```
    x = ReLU(BN(Conv2D(32, 5)(images)))                   # (b, 24, 24, 32)
    x = ReLU(BN(Conv2D(64, 3)(x)))                        # (b, 22, 22, 64)
    x = ReLU(BN(Conv2D(64, 3)(x)))                        # (b, 20, 20, 64)
    x = ReLU(BN(Conv2D(128, 3, strides=2)(x)))            # (b, 9, 9, 128)
    u = squash_e(reshape(DepthwiseConv2D(9)(x), 16, 8))   # (b, 16, 8)
    ```

    (shapes for 28x28 images; the depthwise kernel covers the whole last
    feature map, whatever the image size, so there are always 16 primary
    capsules.) `squash_e` is the exponential squash
    `(1 - exp(-|s|)) s / |s|`, which its class capsules use too.

    The strides size it for its images (`efficient_strides`): the paper's
    up to 40 px, larger beyond, so that the last feature map stays at most
    15x15 (at 128x128: strides (2, 2, 1, 2), maps 62, 30, 28 and 13 a side).
    Strides given are kept.

    Args:
        image_shape: `(height, width, channels)` of the images.
        conv_strides: The four convolutions' strides (an int or a `(height,
            width)` pair each); None (the default) chooses them with
            `efficient_strides`.
        **kwargs: Passed to `keras.layers.Layer`.
    """

    #: The squash of its capsules (`capsules_keras.ops.SQUASHES`).
    squash = "exponential"
    #: The primary capsules: 16 of 8 dimensions, the 128 channels of the
    #: depthwise convolution.
    PRIMARY_CAPSULES = (16, 8)
    #: Channels, kernel size and (paper's) stride of each convolution.
    CONVOLUTIONS = ((32, 5, 1), (64, 3, 1), (64, 3, 1), (128, 3, 2))

    def __init__(self, image_shape=(28, 28, 1), *, conv_strides=None, **kwargs):
        super().__init__(**kwargs)
        self.image_shape = check_image_shape(image_shape)
        self.conv_strides = efficient_strides(self.image_shape, conv_strides)
        pairs = [per_axis("conv_strides", s) for s in self.conv_strides]
        height = _last_map(self.image_shape[0], [h for h, _ in pairs])
        width = _last_map(self.image_shape[1], [w for _, w in pairs])
        if min(height, width) < 1:
            raise ValueError(
                "Images are too small for Efficient-CapsNet's convolutions "
                f"with these strides: the last feature map would be "
                f"{height}x{width}. Received: image_shape={self.image_shape}, "
                f"conv_strides={conv_strides}"
            )
        stack = []
        for k, ((filters, size, _), stride) in enumerate(
            zip(self.CONVOLUTIONS, self.conv_strides, strict=True), 1
        ):
            stack += [
                layers.Conv2D(
                    filters,
                    size,
                    strides=stride,
                    kernel_initializer="he_normal",
                    name=f"conv{k}",
                ),
                # Keras' own, fused on torch (docs/design-decisions.md,
                # "Fused batch normalisation on torch").
                BatchNormalization(name=f"bn{k}"),
                layers.ReLU(name=f"relu{k}"),
            ]
        self.conv = keras.Sequential(stack, name="conv")
        self.primary_caps = keras.Sequential(
            [
                # One filter per channel over the whole last feature map.
                layers.DepthwiseConv2D((height, width), name="depthwise"),
                layers.Reshape(self.PRIMARY_CAPSULES),
                Squash(squash=self.squash, name="squash"),
            ],
            name="primary_caps",
        )

    def call(self, images, training=None):
        return self.primary_capsules(self.conv(images, training=training))

    def primary_capsules(self, features):
        """The primary capsules `(batch, 16, 8)` of the last feature map."""
        # The depthwise kernel covers the whole map without padding: one dot
        # product per channel, y[b, c] = sum_hw x[b, h, w, c] k[h, w, c] + b[c],
        # computed as that contraction on every backend; the weights stay
        # the DepthwiseConv2D's, so saved files load as before. XLA on CPU
        # differentiates the depthwise convolution very slowly, and torch
        # eager and tensorflow's graph train at the same speed either way
        # (docs/design-decisions.md, "Efficient-CapsNet's primary capsules
        # as a contraction").
        depthwise, reshape, squash = self.primary_caps.layers
        x = ops.einsum("bhwc,hwc->bc", features, depthwise.kernel[..., 0])
        return squash(reshape(x + depthwise.bias))

    def compute_output_shape(self, input_shape):
        return (input_shape[0], *self.PRIMARY_CAPSULES)

    def get_config(self):
        return {
            **super().get_config(),
            "image_shape": self.image_shape,
            **paper_strides_left_out(self.conv_strides),
        }

    @classmethod
    def from_config(cls, config):
        return cls(**with_paper_strides(config))


def paper_strides_left_out(conv_strides):
    """The strides for a config: none where they are the paper's.

    So the configs of the paper's sizes are what they were before strides
    were chosen, and a config without strides (every file saved before)
    means the paper's (`with_paper_strides`).
    """
    return {} if conv_strides == PAPER_STRIDES else {"conv_strides": conv_strides}


def with_paper_strides(config):
    """A config whose missing strides are the paper's (see above)."""
    return {"conv_strides": PAPER_STRIDES, **config}


@keras.saving.register_keras_serializable(package="capsules_keras")
class EfficientCapsNet(CapsuleClassifier):
    """Efficient-CapsNet (Mazzia et al. 2021): a CapsNet of ~161k parameters.

    The one-label task (`CapsuleClassifier`) on `EfficientEncoder` with
    self-attention routing:

    ```
    u = EfficientEncoder()(images)                        # (b, 16, 8), see there
    v = DigitCaps(10, 16, routing="self_attention",
                  squash="exponential")(u)                # (b, 10, 16)
    ```

    (shapes for 28x28 digits.) The class capsules use the encoder's
    exponential squash `(1 - exp(-|s|)) s / |s|`; the primary capsules come
    from one depthwise convolution, not from a convolution per capsule type;
    the class capsules from non-iterative self-attention routing. The decoder,
    the margin loss and the reconstruction weight (their 0.392 x the mean
    squared error = 0.0005 x the sum) are `CapsNet`'s, and so are `fit`,
    `predict`, `analyze` and saving.

    One departure from the authors' code
    (`models/efficient_capsnet_graph_mnist.py` of
    github.com/EscVM/Efficient-CapsNet): each of their convolutions
    applies its ReLU first and batch normalisation after it
    (`BN(ReLU(Conv2D(x)))`); here batch normalisation comes first, as
    `EfficientEncoder` draws it. The parameters are the same, and one epoch in either
    order reached practically the same test accuracy (docs/differences.md).
    It stays, because every saved model and the pretrained preset were
    trained in this order.

    `count_encoder_params()` is 161,824 for 28x28x1 digits: the paper's
    count, which leaves out the decoder (1.41M parameters that only
    regularise training).

    It builds for any image of at least 11 px a side, and sizes itself
    beyond 40 px: its convolutions' strides grow so that the last feature
    map stays at most 15x15 (`efficient_strides`; the sizes this gives:
    docs/guides/capacity.md, "Models that size themselves").

    Args:
        image_shape: `(height, width, channels)`.
        num_classes: Number of classes.
        routing: The routing of the class capsules (the paper's
            `"self_attention"`; the others of `DigitCaps` for comparisons).
        routing_iterations: As in `CapsNet`.
        reconstruction_weight: As in `CapsNet`.
        digit_dim: Dimension of the class capsules (16).
        decoder_units: Hidden layer sizes of the decoder ((512, 1024)).
        scale_agreement: As in `CapsNet` (inverted dot-product routing only).
        conv_strides: The four convolutions' strides (an int or a `(height,
            width)` pair each); None (the default) sizes the model for its
            images (`efficient_strides`).
        **kwargs: Passed to `keras.Model`.

    Raises:
        ValueError: If the strides leave no feature map (below 1x1),
            naming the image shape and the strides received.

    >>> EfficientCapsNet().count_encoder_params()
    161824

    Reference: Mazzia, Salvetti & Chiaberge (2021), "Efficient-CapsNet:
    capsule network with self-attention routing", Scientific Reports 11,
    section 3 and Figure 2.
    """

    def __init__(
        self,
        image_shape=(28, 28, 1),
        num_classes=10,
        *,
        routing="self_attention",
        routing_iterations=None,
        reconstruction_weight=RECONSTRUCTION_WEIGHT,
        digit_dim=16,
        decoder_units=DECODER_UNITS,
        scale_agreement=True,
        conv_strides=None,
        **kwargs,
    ):
        backbone = CapsuleBackbone(
            EfficientEncoder(image_shape, conv_strides=conv_strides, name="encoder"),
            num_classes,
            digit_dim=digit_dim,
            routing=routing,
            routing_iterations=routing_iterations,
            scale_agreement=scale_agreement,
            name="backbone",
        )
        super().__init__(
            backbone,
            reconstruction_weight=reconstruction_weight,
            decoder_units=decoder_units,
            **kwargs,
        )

    @property
    def conv_strides(self):
        return self.backbone.encoder.conv_strides

    def _backbone_config(self):
        return {
            **self._backbone_arguments(),
            **paper_strides_left_out(self.conv_strides),
        }

    @classmethod
    def from_config(cls, config):
        return super().from_config(with_paper_strides(config))
