"""Efficient-CapsNet (Mazzia et al. 2021): its encoder (convolutions, depthwise
primary capsules), and the one-label task on it with self-attention routing."""

import keras
from keras import layers, ops

from capsules_keras._checks import check_image_shape
from capsules_keras.layers import BatchNormalization, Squash
from capsules_keras.models.backbone import CapsuleBackbone
from capsules_keras.models.classifier import CapsuleClassifier


@keras.saving.register_keras_serializable(package="capsules_keras")
class EfficientEncoder(layers.Layer):
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

    Args:
        image_shape: `(height, width, channels)` of the images.
        **kwargs: Passed to `keras.layers.Layer`.
    """

    #: The squash of its capsules (`capsules_keras.ops.SQUASHES`).
    squash = "exponential"
    #: The primary capsules: 16 of 8 dimensions, the 128 channels of the
    #: depthwise convolution.
    PRIMARY_CAPSULES = (16, 8)
    #: Channels, kernel size and stride of each convolution.
    CONVOLUTIONS = ((32, 5, 1), (64, 3, 1), (64, 3, 1), (128, 3, 2))

    def __init__(self, image_shape=(28, 28, 1), **kwargs):
        super().__init__(**kwargs)
        self.image_shape = check_image_shape(image_shape)
        stack = []
        height, width = self.image_shape[:2]
        for k, (filters, size, stride) in enumerate(self.CONVOLUTIONS, 1):
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
            height, width = (height - size) // stride + 1, (width - size) // stride + 1
        if min(height, width) < 1:
            raise ValueError(
                "Images are too small for Efficient-CapsNet's convolutions. "
                f"Received: image_shape={self.image_shape}"
            )
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

    def build(self, input_shape):
        self.conv.build(input_shape)
        self.primary_caps.build(self.conv.compute_output_shape(input_shape))
        self.built = True

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
        return {**super().get_config(), "image_shape": self.image_shape}


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
        **kwargs: Passed to `keras.Model`.

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
        routing="self_attention",
        routing_iterations=None,
        reconstruction_weight=0.0005,
        digit_dim=16,
        decoder_units=(512, 1024),
        scale_agreement=True,
        **kwargs,
    ):
        backbone = CapsuleBackbone(
            EfficientEncoder(image_shape, name="encoder"),
            num_classes,
            digit_dim,
            routing,
            routing_iterations,
            scale_agreement,
            name="backbone",
        )
        super().__init__(
            backbone,
            reconstruction_weight=reconstruction_weight,
            decoder_units=decoder_units,
            **kwargs,
        )

    def _backbone_config(self):
        return self._backbone_arguments()
