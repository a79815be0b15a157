"""The paper's CapsNet: a convolution, primary capsules, digit capsules, a decoder."""

import keras
from keras import layers

from capsules_keras._checks import check_positive_int
from capsules_keras.layers import PrimaryCaps
from capsules_keras.models.vector import VectorCapsNet


@keras.saving.register_keras_serializable(package="capsules_keras")
class CapsNet(VectorCapsNet):
    """The CapsNet of Sabour et al. (2017), ready for `compile` and `fit`.

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
        super().__init__(
            image_shape=image_shape,
            num_classes=num_classes,
            routing_iterations=routing_iterations,
            reconstruction_weight=reconstruction_weight,
            digit_dim=digit_dim,
            decoder_units=decoder_units,
            routing=routing,
            scale_agreement=scale_agreement,
            **kwargs,
        )
        check_positive_int("conv_filters", conv_filters)
        check_positive_int("kernel_size", kernel_size)
        self.conv_filters = conv_filters
        self.kernel_size = kernel_size
        self.primary_capsules = primary_capsules
        self.primary_dim = primary_dim
        self._add_layers()

    def _encoder(self):
        """The layers before `DigitCaps`: `(features, primary_capsules)`."""
        size = self.kernel_size
        grid = (min(self.image_shape[:2]) - size + 1 - size) // 2 + 1
        if grid < 1:
            raise ValueError(
                f"Images are too small for two {size}x{size} convolutions (the "
                f"second with stride 2). Received: image_shape={self.image_shape}"
            )
        conv = layers.Conv2D(self.conv_filters, size, activation="relu", name="conv")
        primary_caps = PrimaryCaps(
            self.primary_capsules, self.primary_dim, size, 2, name="primary_caps"
        )
        return conv, primary_caps

    def get_config(self):
        config = {
            "conv_filters": self.conv_filters,
            "kernel_size": self.kernel_size,
            "primary_capsules": self.primary_capsules,
            "primary_dim": self.primary_dim,
        }
        return {**super().get_config(), **config}
