"""The paper's CapsNet: its encoder (a convolution, primary capsules), and the
one-label task on it."""

import keras
from keras import layers

from capsules_keras._checks import check_image_shape, check_positive_int
from capsules_keras.layers import PrimaryCaps
from capsules_keras.models.backbone import CapsuleBackbone
from capsules_keras.models.classifier import CapsuleClassifier


@keras.saving.register_keras_serializable(package="capsules_keras")
class CapsNetEncoder(layers.Layer):
    """CapsNet's encoder: a ReLU convolution, then convolutional primary capsules.

    ```
    conv = Conv2D(256, 9, relu)(images)             # (b, 20, 20, 256)
    u    = PrimaryCaps(32, 8, 9, strides=2)(conv)   # (b, 1152, 8)
    ```

    (shapes for 28x28 images.) Its capsules use the paper's squash.

    Args:
        image_shape: `(height, width, channels)` of the images.
        conv_filters: Filters of the first convolution (256).
        kernel_size: Kernel size of both convolutions (9).
        primary_capsules: Capsule types in `PrimaryCaps` (32).
        primary_dim: Dimension of the primary capsules (8).
        **kwargs: Passed to `keras.layers.Layer`.
    """

    #: The squash of its capsules (`capsules_keras.ops.SQUASHES`).
    squash = "sabour"

    def __init__(
        self,
        image_shape=(28, 28, 1),
        conv_filters=256,
        kernel_size=9,
        primary_capsules=32,
        primary_dim=8,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.image_shape = check_image_shape(image_shape)
        check_positive_int("conv_filters", conv_filters)
        check_positive_int("kernel_size", kernel_size)
        grid = (min(self.image_shape[:2]) - kernel_size + 1 - kernel_size) // 2 + 1
        if grid < 1:
            raise ValueError(
                f"Images are too small for two {kernel_size}x{kernel_size} "
                "convolutions (the second with stride 2). "
                f"Received: image_shape={self.image_shape}"
            )
        self.conv_filters = conv_filters
        self.kernel_size = kernel_size
        self.primary_capsules = primary_capsules
        self.primary_dim = primary_dim
        self.conv = layers.Conv2D(
            conv_filters, kernel_size, activation="relu", name="conv"
        )
        self.primary_caps = PrimaryCaps(
            primary_capsules, primary_dim, kernel_size, 2, name="primary_caps"
        )

    def build(self, input_shape):
        self.conv.build(input_shape)
        self.primary_caps.build(self.conv.compute_output_shape(input_shape))
        self.built = True

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
        }


def capsnet_backbone(
    image_shape=(28, 28, 1),
    num_classes=10,
    *,
    routing_iterations=None,
    conv_filters=256,
    kernel_size=9,
    primary_capsules=32,
    primary_dim=8,
    digit_dim=16,
    routing="dynamic",
    scale_agreement=True,
):
    """The paper's backbone: `CapsNetEncoder` routed to `num_classes` capsules.

    Takes `CapsNet`'s arguments of the encoder and the class capsules (see
    there); `CapsNet` and `MultiDigitCapsNet` build on it.
    """
    encoder = CapsNetEncoder(
        image_shape,
        conv_filters,
        kernel_size,
        primary_capsules,
        primary_dim,
        name="encoder",
    )
    return CapsuleBackbone(
        encoder,
        num_classes,
        digit_dim,
        routing,
        routing_iterations,
        scale_agreement,
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

    def _backbone_config(self):
        return {
            **self._backbone_arguments(),
            "conv_filters": self.conv_filters,
            "kernel_size": self.kernel_size,
            "primary_capsules": self.primary_capsules,
            "primary_dim": self.primary_dim,
        }


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
        **kwargs: Passed to `keras.Model` (e.g. `name`).

    >>> model = CapsNet()
    >>> model.count_params()
    8215568

    Reference: Sabour et al. (2017), section 4 and figures 1-2.
    """

    def __init__(
        self,
        image_shape=(28, 28, 1),
        num_classes=10,
        routing_iterations=None,
        reconstruction_weight=0.0005,
        conv_filters=256,
        kernel_size=9,
        primary_capsules=32,
        primary_dim=8,
        digit_dim=16,
        decoder_units=(512, 1024),
        routing="dynamic",
        scale_agreement=True,
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
        )
        super().__init__(
            backbone,
            reconstruction_weight=reconstruction_weight,
            decoder_units=decoder_units,
            **kwargs,
        )
