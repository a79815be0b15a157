"""The paper's CapsNet: its encoder (a convolution, primary capsules), and the
one-label task on it."""

import keras
from keras import layers

from capsules_keras._checks import (
    check_image_shape,
    check_positive_int,
    collapsed,
    per_axis,
)
from capsules_keras.layers import PrimaryCaps
from capsules_keras.models.backbone import CapsuleBackbone
from capsules_keras.models.classifier import (
    DECODER_UNITS,
    RECONSTRUCTION_WEIGHT,
    CapsuleClassifier,
)
from capsules_keras.models.encoder import CapsuleEncoder
from capsules_keras.routing import DEFAULT_ROUTING

#: The largest primary-capsule grid, a side, that the default strides give:
#: the paper's largest, 12x12 on its 40x40 images (section 5.2, affNIST), so
#: that every image size the paper used keeps the paper's network.
MAX_PRIMARY_GRID = 12
#: The paper's strides: the first convolution's, then the primary capsules'.
PAPER_STRIDES = (1, 2)
#: The paper's filters of the first convolution, and capsule types of the
#: primary capsules (section 4).
CONV_FILTERS = 256
PRIMARY_CAPSULES = 32


def _primary_grid(side, kernel_size, conv_stride, primary_stride):
    """Grid cells of PrimaryCaps along one side of the image."""
    features = (side - kernel_size) // conv_stride + 1
    return (features - kernel_size) // primary_stride + 1


def capsnet_strides(
    image_shape, kernel_size=9, conv_strides=None, primary_strides=None
):
    """The strides of CapsNet's two convolutions that size it for `image_shape`.

    Along the height and along the width apart, the first pair of strides
    whose primary-capsule grid has at most `MAX_PRIMARY_GRID` (12) cells:

    ```
    for conv_stride in 1, 2, ..., kernel_size:           # Conv2D's
        for primary_stride in 2, 3, ..., kernel_size:    # PrimaryCaps'
            features = (side - kernel_size) // conv_stride + 1
            grid = (features - kernel_size) // primary_stride + 1
            if grid <= 12: return conv_stride, primary_stride
    ```

    So the paper's strides (1, 2) wherever they are enough -- every side up
    to 40 px: 6x6 at 28 px, 8x8 at 32, 10x10 at 36, 12x12 at 40 -- then a
    larger primary stride, then a strided convolution as well (64 px: (1, 4),
    128 px: (2, 5), 224 px: (2, 9)). The primary stride grows first because
    in the paper it is the primary capsules that subsample, while the
    convolution sees every position; so the convolution keeps the paper's
    stride for as long as a primary stride up to the kernel's can do
    without it. No stride exceeds the kernel, which would skip pixels; a
    side too large even for two strides of `kernel_size` (beyond 1,052 px at
    the default kernel) gets those two and a grid above 12.

    The budget this keeps: at most 144 grid cells x `primary_capsules`
    types (4,608 primary capsules at the paper's 32), so the class-capsule
    kernel holds at most 4,608 x num_classes x 8 x 16 weights (589,824 a
    class, at the paper's capsule dimensions) and the votes 4,608 x
    num_classes x 16 numbers an image, whatever the image size. The sizes
    it gives and what it costs in accuracy: docs/guides/capacity.md,
    "Models that size themselves".

    Args:
        image_shape: `(height, width, channels)` of the images.
        kernel_size: Kernel size of both convolutions (9).
        conv_strides: The first convolution's strides, an int or a
            `(height, width)` pair; None chooses them. Given, they are kept.
        primary_strides: `PrimaryCaps`' strides, the same way.

    Returns:
        `(conv_strides, primary_strides)`, each an int, or a `(height,
        width)` pair where the two differ.

    >>> capsnet_strides((28, 28, 1)), capsnet_strides((128, 128, 3))
    ((1, 2), (2, 5))
    >>> capsnet_strides((128, 128, 3), primary_strides=2)  # kept; conv chosen
    (4, 2)
    """
    conv_given = per_axis("conv_strides", conv_strides)
    primary_given = per_axis("primary_strides", primary_strides)
    chosen = []  # (conv, primary) along the height, then along the width
    for side, conv, primary in zip(
        image_shape[:2], conv_given, primary_given, strict=True
    ):
        # In the order they are tried: a given stride is the only candidate.
        pairs = [
            (c, p)
            for c in ([conv] if conv else range(1, kernel_size + 1))
            for p in ([primary] if primary else range(2, kernel_size + 1))
        ]
        fitting = [
            pair
            for pair in pairs
            if _primary_grid(side, kernel_size, *pair) <= MAX_PRIMARY_GRID
        ]
        chosen.append(fitting[0] if fitting else pairs[-1])
    (conv_h, primary_h), (conv_w, primary_w) = chosen
    return collapsed((conv_h, conv_w)), collapsed((primary_h, primary_w))


@keras.saving.register_keras_serializable(package="capsules_keras")
class CapsNetEncoder(CapsuleEncoder):
    """CapsNet's encoder: a ReLU convolution, then convolutional primary capsules.

    ```
    conv = Conv2D(256, 9, relu)(images)             # (b, 20, 20, 256)
    u    = PrimaryCaps(32, 8, 9, strides=2)(conv)   # (b, 1152, 8)
    ```

    (shapes for 28x28 images.) Its capsules use the paper's squash.

    The strides size it for its images (`capsnet_strides`): the paper's
    (1, 2) up to 40 px, larger beyond, so that the primary-capsule grid
    stays at most 12x12 (at 128x128: `Conv2D(256, 9, strides=2)` gives
    60x60, `PrimaryCaps(32, 8, 9, strides=5)` an 11x11 grid, 3,872
    capsules). Strides given are kept.

    Args:
        image_shape: `(height, width, channels)` of the images.
        conv_filters: Filters of the first convolution (256).
        kernel_size: Kernel size of both convolutions (9).
        primary_capsules: Capsule types in `PrimaryCaps` (32).
        primary_dim: Dimension of the primary capsules (8).
        conv_strides: Strides of the first convolution, an int or a
            `(height, width)` pair; None (the default) chooses them with
            `capsnet_strides`.
        primary_strides: Strides of `PrimaryCaps`, the same way.
        **kwargs: Passed to `keras.layers.Layer`.
    """

    #: The squash of its capsules (`capsules_keras.ops.SQUASHES`).
    squash = "sabour"

    def __init__(
        self,
        image_shape=(28, 28, 1),
        *,
        conv_filters=CONV_FILTERS,
        kernel_size=9,
        primary_capsules=PRIMARY_CAPSULES,
        primary_dim=8,
        conv_strides=None,
        primary_strides=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.image_shape = check_image_shape(image_shape)
        check_positive_int("conv_filters", conv_filters)
        check_positive_int("kernel_size", kernel_size)
        self.conv_strides, self.primary_strides = capsnet_strides(
            self.image_shape, kernel_size, conv_strides, primary_strides
        )
        height, width = self.image_shape[:2]
        conv_h, conv_w = per_axis("conv_strides", self.conv_strides)
        primary_h, primary_w = per_axis("primary_strides", self.primary_strides)
        grid = (
            _primary_grid(height, kernel_size, conv_h, primary_h),
            _primary_grid(width, kernel_size, conv_w, primary_w),
        )
        if min(grid) < 1:
            raise ValueError(
                f"Images are too small for two {kernel_size}x{kernel_size} "
                f"convolutions with these strides: the primary-capsule grid "
                f"would be {grid[0]}x{grid[1]}. Received: "
                f"image_shape={self.image_shape}, kernel_size={kernel_size}, "
                f"conv_strides={conv_strides}, primary_strides={primary_strides}"
            )
        self.conv_filters = conv_filters
        self.kernel_size = kernel_size
        self.primary_capsules = primary_capsules
        self.primary_dim = primary_dim
        self.conv = layers.Conv2D(
            conv_filters,
            kernel_size,
            strides=self.conv_strides,
            activation="relu",
            name="conv",
        )
        self.primary_caps = PrimaryCaps(
            primary_capsules,
            primary_dim,
            kernel_size,
            self.primary_strides,
            name="primary_caps",
        )

    def call(self, images, training=None):
        return self.primary_caps(self.conv(images))

    def compute_output_shape(self, input_shape):
        features = self.conv.compute_output_shape(input_shape)
        return self.primary_caps.compute_output_shape(features)

    def get_config(self):
        return {
            **super().get_config(),
            "image_shape": self.image_shape,
            "conv_filters": self.conv_filters,
            "kernel_size": self.kernel_size,
            "primary_capsules": self.primary_capsules,
            "primary_dim": self.primary_dim,
            **paper_strides_left_out(self.conv_strides, self.primary_strides),
        }

    @classmethod
    def from_config(cls, config):
        return cls(**with_paper_strides(config))


def paper_strides_left_out(conv_strides, primary_strides):
    """The strides for a config: none where they are the paper's.

    So the configs of the paper's sizes are what they were before strides
    were chosen, and a config without strides (every file saved before)
    means the paper's (`with_paper_strides`).
    """
    if (conv_strides, primary_strides) == PAPER_STRIDES:
        return {}
    return {"conv_strides": conv_strides, "primary_strides": primary_strides}


def with_paper_strides(config):
    """A config whose missing strides are the paper's (see above)."""
    conv, primary = PAPER_STRIDES
    return {"conv_strides": conv, "primary_strides": primary, **config}


def capsnet_backbone(
    image_shape=(28, 28, 1),
    num_classes=10,
    *,
    routing_iterations=None,
    conv_filters=CONV_FILTERS,
    kernel_size=9,
    primary_capsules=PRIMARY_CAPSULES,
    primary_dim=8,
    digit_dim=16,
    routing=DEFAULT_ROUTING,
    scale_agreement=True,
    conv_strides=None,
    primary_strides=None,
):
    """The paper's backbone: `CapsNetEncoder` routed to `num_classes` capsules.

    Takes `CapsNet`'s arguments of the encoder and the class capsules (see
    there); `CapsNet` and `MultiDigitCapsNet` build on it.
    """
    encoder = CapsNetEncoder(
        image_shape,
        conv_filters=conv_filters,
        kernel_size=kernel_size,
        primary_capsules=primary_capsules,
        primary_dim=primary_dim,
        conv_strides=conv_strides,
        primary_strides=primary_strides,
        name="encoder",
    )
    return CapsuleBackbone(
        encoder,
        num_classes,
        digit_dim=digit_dim,
        routing=routing,
        routing_iterations=routing_iterations,
        scale_agreement=scale_agreement,
        name="backbone",
    )


class CapsNetArguments:
    """`capsnet_backbone`'s arguments as a model's attributes and config.

    What `CapsNet` and `MultiDigitCapsNet` share: `model.kernel_size` and
    the like read the backbone, and `get_config` holds the arguments (as the
    models saved before backbones existed do), not the backbone.
    """

    @property
    def conv_filters(self):
        return self.backbone.encoder.conv_filters

    @property
    def kernel_size(self):
        return self.backbone.encoder.kernel_size

    @property
    def primary_capsules(self):
        return self.backbone.encoder.primary_capsules

    @property
    def primary_dim(self):
        return self.backbone.encoder.primary_dim

    @property
    def conv_strides(self):
        return self.backbone.encoder.conv_strides

    @property
    def primary_strides(self):
        return self.backbone.encoder.primary_strides

    def _backbone_config(self):
        return {
            **self._backbone_arguments(),
            "conv_filters": self.conv_filters,
            "kernel_size": self.kernel_size,
            "primary_capsules": self.primary_capsules,
            "primary_dim": self.primary_dim,
            **paper_strides_left_out(self.conv_strides, self.primary_strides),
        }

    @classmethod
    def from_config(cls, config):
        return super().from_config(with_paper_strides(config))


@keras.saving.register_keras_serializable(package="capsules_keras")
class CapsNet(CapsNetArguments, CapsuleClassifier):
    """The CapsNet of Sabour et al. (2017), ready for `compile` and `fit`.

    The one-label task (`CapsuleClassifier`) on the paper's backbone
    (`capsnet_backbone`: `CapsNetEncoder` and `DigitCaps`):

    ```
    conv      = Conv2D(256, 9, relu)(images)              # (b, 20, 20, 256)
    u         = PrimaryCaps(32, 8, 9, strides=2)(conv)    # (b, 1152, 8)
    v         = DigitCaps(10, 16, routing_iterations)(u)  # (b, 10, 16)
    lengths   = |v|                                       # (b, 10) class scores
    recon     = decoder(mask(v))                          # (b, 28, 28, 1)
    loss      = margin(y, lengths) + 0.0005 * sum((images - recon)^2)
    ```

    (shapes for a 28x28x1 image; every shape is derived from `image_shape`.)

    It sizes itself for larger images: the strides of its two convolutions
    are the paper's (1, 2) up to 40 px, and beyond that the smallest that
    keep the primary-capsule grid at most 12x12 (`capsnet_strides`), so the
    class-capsule kernel and the votes stay within 4,608 primary capsules
    (with the paper's 32 capsule types) whatever the image size:

    ```
    CapsNet((64, 64, 3), 5)     # strides (1, 4): 12x12 grid, 4,608 capsules
    CapsNet((128, 128, 3), 4)   # strides (2, 5): 11x11 grid, 3,872 capsules
    ```

    Strides given (`conv_strides=`, `primary_strides=`) are kept, and only
    the others chosen (at 128x128, `primary_strides=2` gets
    `conv_strides=4`: an 11x11 grid); `conv_strides=1, primary_strides=2`
    is the paper's network at any size. The sizes this gives, and what it
    costs in accuracy: docs/guides/capacity.md, "Models that size
    themselves".

    The decoder (FC 512 ReLU -> 1024 ReLU -> H*W*C sigmoid) sees the digit
    capsules masked by the TRUE label while training and by the longest
    capsule otherwise. Because the labels are only known to the loss, the
    decoder runs inside `compute_loss`, so `fit(x_train, y_train)` works with
    plain image and integer (or one-hot) label arrays.

    Inputs as `keras.datasets` gives them work as they are: `fit`,
    `evaluate`, `predict` and `analyze` convert NumPy arrays and tensors
    before any computation -- uint8 images in 0..255 become float32 in
    [0, 1], `(n, height, width)` gets its channel axis -- and refuse with a
    `ValueError` what would train silently on wrong data: float images
    outside [0, 1], labels outside 0..num_classes-1 (1-based labels, say),
    one-hot rows of the wrong width, or a label count unlike the image
    count. A `tf.data.Dataset`, `keras.utils.PyDataset` or generator passes
    through unchecked; see `capsules_keras.inputs` for what it must yield.

    Outputs (the same contract as every capsule model, `CapsuleModel`):
        - `model.predict(x)`: the class scores, class probabilities (capsule
          lengths), `(n, num_classes)`.
        - `model(x)`: a dict with those `"scores"` (also as `"lengths"`) and
          the `"capsules"` `(batch_size, num_classes, digit_dim)`.
        - `model.analyze(x, y=None)`: NumPy dict with the scores (also as
          `lengths`), predicted classes, digit capsules, reconstructions and
          coupling coefficients.
        - `fit` and `evaluate` log the loss's two terms next to `loss`:
          `margin_loss` and `reconstruction_loss` (the unweighted per-image
          sum of squared errors; absent when `reconstruction_weight=0`), so
          `loss = margin_loss + reconstruction_weight * reconstruction_loss`.

    Args:
        image_shape: `(height, width, channels)` of the input images.
        num_classes: Number of classes, one digit capsule each.
        routing_iterations: Routing iterations in `DigitCaps`; None takes the
            routing algorithm's default (3 for dynamic routing, the paper's).
        reconstruction_weight: Weight of the per-image sum of squared
            reconstruction errors in the loss (0.0005 in the paper, i.e.
            0.392 x the mean squared error for 28x28 images). 0 disables the
            decoder's contribution to the loss.
        conv_filters: Filters of the first convolution (256).
        kernel_size: Kernel size of both convolutions (9).
        primary_capsules: Capsule types in `PrimaryCaps` (32).
        primary_dim: Dimension of the primary capsules (8).
        digit_dim: Dimension of the digit capsules (16).
        decoder_units: Hidden layer sizes of the decoder ((512, 1024)).
        routing: The routing algorithm of `DigitCaps`: `"dynamic"` (the
            paper's), `"self_attention"` or `"inverted_dot_product"`.
        scale_agreement: Inverted dot-product routing only: the authors'
            `1 / sqrt(digit_dim)` on the agreements (see `DigitCaps`); False
            for the unscaled agreement of models saved by capsules_keras 0.1.
        conv_strides: Strides of the first convolution, an int or a
            `(height, width)` pair; None (the default) sizes the model for
            its images (`capsnet_strides`).
        primary_strides: Strides of `PrimaryCaps`, the same way.
        **kwargs: Passed to `keras.Model` (e.g. `name`).

    Raises:
        ValueError: If the strides leave no primary capsule (a grid below
            1x1), naming the image shape and the strides received.

    >>> model = CapsNet()
    >>> model.count_params()
    8215568

    Reference: Sabour et al. (2017), section 4 and figures 1-2.
    """

    def __init__(
        self,
        image_shape=(28, 28, 1),
        num_classes=10,
        *,
        routing_iterations=None,
        reconstruction_weight=RECONSTRUCTION_WEIGHT,
        conv_filters=CONV_FILTERS,
        kernel_size=9,
        primary_capsules=PRIMARY_CAPSULES,
        primary_dim=8,
        digit_dim=16,
        decoder_units=DECODER_UNITS,
        routing=DEFAULT_ROUTING,
        scale_agreement=True,
        conv_strides=None,
        primary_strides=None,
        **kwargs,
    ):
        backbone = capsnet_backbone(
            image_shape,
            num_classes,
            routing_iterations=routing_iterations,
            conv_filters=conv_filters,
            kernel_size=kernel_size,
            primary_capsules=primary_capsules,
            primary_dim=primary_dim,
            digit_dim=digit_dim,
            routing=routing,
            scale_agreement=scale_agreement,
            conv_strides=conv_strides,
            primary_strides=primary_strides,
        )
        super().__init__(
            backbone,
            reconstruction_weight=reconstruction_weight,
            decoder_units=decoder_units,
            **kwargs,
        )
