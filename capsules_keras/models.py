"""The paper's CapsNet: encoder (conv, primary and digit capsules) + decoder."""

import math

import keras
import numpy as np
from keras import layers, ops

from capsules_keras._checks import (
    check_image_shape,
    check_positive_int,
    check_positive_number,
)
from capsules_keras.inputs import (
    PreparedInputsModel,
    is_array,
    prepare_image_sets,
    prepare_images,
    prepare_label_sets,
    prepare_labels,
)
from capsules_keras.layers import (
    DigitCaps,
    Length,
    Mask,
    PrimaryCaps,
    Squash,
    legacy_scale_agreement,
)
from capsules_keras.losses import MarginLoss, ReconstructionLoss
from capsules_keras.metrics import k_hot, multi_label_metrics, top_k_classes
from capsules_keras.ops import check_routing


@keras.saving.register_keras_serializable(package="capsules_keras")
class CapsNet(PreparedInputsModel):
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

    Outputs:
        - `model.predict(x)`: class probabilities (capsule lengths),
          `(n, num_classes)`.
        - `model(x)`: a dict with `"lengths"` and `"capsules"`
          `(batch_size, num_classes, digit_dim)`.
        - `model.analyze(x, y=None)`: NumPy dict with the lengths, predicted
          classes, digit capsules, reconstructions and coupling coefficients.
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
        super().__init__(**kwargs)
        image_shape = check_image_shape(image_shape)
        for name, value in (
            ("num_classes", num_classes),
            ("conv_filters", conv_filters),
            ("kernel_size", kernel_size),
        ):
            check_positive_int(name, value)
        if reconstruction_weight != 0:
            check_positive_number("reconstruction_weight", reconstruction_weight)
        decoder_units = tuple(decoder_units)
        for units in decoder_units:
            check_positive_int("decoder_units", units)
        self.image_shape = image_shape
        self.num_classes = num_classes
        self.routing_iterations = check_routing(routing, routing_iterations)
        self.routing = routing
        self.scale_agreement = scale_agreement
        self.reconstruction_weight = reconstruction_weight
        self.conv_filters = conv_filters
        self.kernel_size = kernel_size
        self.primary_capsules = primary_capsules
        self.primary_dim = primary_dim
        self.digit_dim = digit_dim
        self.decoder_units = decoder_units

        self.conv, self.primary_caps = self._encoder()
        self.digit_caps = DigitCaps(
            num_classes,
            digit_dim,
            routing_iterations=self.routing_iterations,
            return_coupling=True,
            routing=routing,
            squash=self.SQUASH,
            scale_agreement=scale_agreement,
            name="digit_caps",
        )
        # Under mixed precision the outputs the losses see stay float32.
        self.length = Length(dtype="float32", name="length")
        self.mask = Mask(name="mask")
        self.decoder = keras.Sequential(
            [layers.Dense(units, activation="relu") for units in decoder_units]
            + [
                layers.Dense(
                    math.prod(image_shape), activation="sigmoid", dtype="float32"
                ),
                layers.Reshape(image_shape, dtype="float32"),
            ],
            name="decoder",
        )
        self.margin_loss = MarginLoss()
        self.reconstruction_loss = ReconstructionLoss()
        # The two terms of the loss, logged by `fit` / `evaluate` next to it:
        # loss = margin_loss + reconstruction_weight * reconstruction_loss.
        self.margin_loss_mean = keras.metrics.Mean(name="margin_loss")
        self.reconstruction_loss_mean = (
            keras.metrics.Mean(name="reconstruction_loss")
            if reconstruction_weight
            else None
        )
        # Build now: the parameter count is known at once, and the jax backend
        # needs every variable (the decoder's too) before the first step.
        self.build((None, *image_shape))

    #: The capsule non-linearity (`capsules_keras.ops.SQUASHES`).
    SQUASH = "sabour"

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

    def count_encoder_params(self):
        """Trainable parameters of the classifier: everything but the decoder.

        The decoder only regularises training; papers that count a capsule
        network without it (Efficient-CapsNet's 161,824) compare with this.
        """
        encoder = (self.conv, self.primary_caps, self.digit_caps)
        return sum(
            math.prod(w.shape) for layer in encoder for w in layer.trainable_weights
        )

    def build(self, input_shape):
        if self.built:
            return
        self.conv.build(input_shape)
        conv_shape = self.conv.compute_output_shape(input_shape)
        self.primary_caps.build(conv_shape)
        primary_shape = self.primary_caps.compute_output_shape(conv_shape)
        self.digit_caps.build(primary_shape)
        capsules_shape = (None, self.num_classes, self.digit_dim)
        self.length.build(capsules_shape)
        self.mask.build(capsules_shape)
        self.decoder.build((None, self.num_classes * self.digit_dim))
        self.built = True

    def call(self, images, training=None):
        # `training` passed on explicitly: jax's trainer calls `call` itself,
        # with no outer `__call__` to hand it to sublayers (BatchNormalization
        # in Efficient-CapsNet's stack would stay in inference mode).
        features = self.conv(images, training=training)
        capsules, _ = self.digit_caps(self.primary_caps(features, training=training))
        return {"lengths": self.length(capsules), "capsules": capsules}

    def reconstruct(self, capsules, labels=None):
        """Decodes capsules masked by `labels`, or by the longest capsule.

        Args:
            capsules: Digit capsules `(batch_size, num_classes, digit_dim)`.
            labels: Optional integer or one-hot labels.

        Returns:
            Images of shape `(batch_size, *image_shape)`.
        """
        masked = self.mask(capsules if labels is None else [capsules, labels])
        return self.decoder(masked)

    def compute_loss(
        self, x=None, y=None, y_pred=None, sample_weight=None, training=True
    ):
        """Margin loss + `reconstruction_weight` x reconstruction loss.

        While training the decoder reconstructs from the capsule of the true
        label `y`; when evaluating, from the longest capsule.
        """
        loss = self._task_loss(x, y, y_pred, sample_weight, training)
        if self.losses:  # e.g. kernel regularizers, scaled for tf.distribute
            loss = loss + super().compute_loss(x, y, y_pred, sample_weight, training)
        return loss

    def _task_loss(self, x, y, y_pred, sample_weight, training):
        margin = self.margin_loss(y, y_pred["lengths"], sample_weight)
        if not self.reconstruction_weight:
            return self._logged_loss(margin)
        labels = y if training else None
        reconstructions = self.reconstruct(y_pred["capsules"], labels)
        return self._logged_loss(
            margin, self.reconstruction_loss(x, reconstructions, sample_weight)
        )

    def _logged_loss(self, margin, reconstruction=None):
        """The loss from its terms, each logged (`margin_loss`, ...)."""
        self.margin_loss_mean.update_state(margin)
        if reconstruction is None:
            return margin
        self.reconstruction_loss_mean.update_state(reconstruction)
        return margin + self.reconstruction_weight * reconstruction

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        """Metrics see the class probabilities (capsule lengths)."""
        return super().compute_metrics(x, y, y_pred["lengths"], sample_weight)

    def compile(self, optimizer="adam", loss=None, metrics=None, **kwargs):
        """Like `keras.Model.compile`; the loss is the model's own.

        Args:
            optimizer: Optimizer; the paper uses Adam with learning rate 1e-3.
            loss: Must be None: CapsNet's loss is the margin loss plus the
                weighted reconstruction loss (see `compute_loss`).
            metrics: Metrics on the capsule lengths; `["accuracy"]` if None.
            **kwargs: Passed to `keras.Model.compile` (e.g. `jit_compile`).
        """
        if loss is not None:
            raise ValueError(
                "CapsNet computes its own loss (margin loss + weighted "
                "reconstruction loss); do not pass one. "
                f"Received: loss={loss!r}"
            )
        if metrics is None:
            metrics = self._default_metrics()
        super().compile(optimizer=optimizer, metrics=metrics, **kwargs)

    def _default_metrics(self):
        return ["accuracy"]

    def prepare(self, x, y=None):
        """Checked, converted images and labels (see `capsules_keras.inputs`).

        Arrays and tensors come back as NumPy arrays: float32 images
        `(n, *image_shape)` in [0, 1], int32 labels or float32 one-hot rows.
        Anything else (datasets, generators, `None`) comes back unchanged.
        """
        if is_array(x):
            x = prepare_images(x, self.image_shape)
            y = self._prepare_targets(y, len(x))
        return x, y

    def _prepare_targets(self, y, num_images):
        return self._prepare_labels(y, num_images, "y") if is_array(y) else y

    def predict(self, x, batch_size=None, verbose="auto", steps=None, callbacks=None):
        """Class probabilities (the digit capsules' lengths), `(n, classes)`."""
        x, _ = self.prepare(x)
        outputs = super().predict(
            x, batch_size=batch_size, verbose=verbose, steps=steps, callbacks=callbacks
        )
        return outputs["lengths"]

    def analyze(self, images, labels=None, batch_size=128, routing_iterations=None):
        """Everything inside the network for a few images, as NumPy arrays.

        Args:
            images: `(n, *image_shape)` images.
            labels: Optional labels; if given, reconstructions use the capsule
                of the label, otherwise the longest capsule.
            batch_size: Images per forward pass.
            routing_iterations: Route with this many iterations instead of the
                model's own (e.g. 2 shows the couplings after one update).

        Returns:
            A dict with `lengths` `(n, classes)`, `predictions` `(n,)`,
            `capsules` `(n, classes, digit_dim)`, `reconstructions`
            `(n, *image_shape)` and `coupling` `(n, in_capsules, classes)`,
            the coupling coefficients of the last routing iteration.
            `in_capsules` are ordered as in `PrimaryCaps`: grid cell
            `i // primary_capsules` (row by row), type `i % primary_capsules`.
        """
        iterations = routing_iterations or self.routing_iterations
        images = prepare_images(images, self.image_shape, name="images")
        if labels is not None:
            labels = self._prepare_labels(labels, len(images), "labels")

        def step(batch, batch_labels=None):
            u = self.primary_caps(self.conv(batch))
            capsules, coupling = self.digit_caps.route(
                self.digit_caps.votes(u), iterations, return_coupling=True
            )
            return {
                "lengths": self.length(capsules),
                "capsules": capsules,
                "reconstructions": self._reconstructions(capsules, batch_labels),
                "coupling": coupling,
            }

        arrays = (images,) if labels is None else (images, labels)
        result = self._in_batches(step, batch_size, *arrays)
        result["predictions"] = self.predicted_classes(result["lengths"])
        return result

    def _reconstructions(self, capsules, labels):
        """What `analyze` shows as the reconstructions of a batch."""
        return self.reconstruct(capsules, labels)

    def _prepare_labels(self, labels, num_images, name):
        return prepare_labels(labels, self.num_classes, num_images, name)

    def predicted_classes(self, lengths):
        """The predicted class of each image: its longest capsule, `(n,)`."""
        return np.asarray(lengths).argmax(-1)

    def with_routing_iterations(self, iterations):
        """A copy of this model (same weights) that routes `iterations` times.

        E.g. `model.with_routing_iterations(1).predict(x)` tells how much the
        routing of a trained model adds over uniform couplings.
        """
        config = {**self.get_config(), "routing_iterations": iterations}
        clone = self.__class__.from_config(config)
        clone.set_weights(self.get_weights())
        return clone

    def get_config(self):
        config = {
            "image_shape": self.image_shape,
            "num_classes": self.num_classes,
            "routing_iterations": self.routing_iterations,
            "reconstruction_weight": self.reconstruction_weight,
            "conv_filters": self.conv_filters,
            "kernel_size": self.kernel_size,
            "primary_capsules": self.primary_capsules,
            "primary_dim": self.primary_dim,
            "digit_dim": self.digit_dim,
            "decoder_units": self.decoder_units,
            "routing": self.routing,
            "scale_agreement": self.scale_agreement,
        }
        return {**super().get_config(), **config}

    @classmethod
    def from_config(cls, config):
        return super().from_config(legacy_scale_agreement(config))


@keras.saving.register_keras_serializable(package="capsules_keras")
class MultiDigitCapsNet(CapsNet):
    """CapsNet for images holding several digits of different classes.

    Sabour et al. (2017), section 6 (MultiMNIST): the network is CapsNet's,
    with every shape derived from the larger image (36x36 for MultiMNIST); the
    task changes:

    ```
    lengths = |v|                                          # (b, 10)
    loss    = margin(T, lengths)                           # T_k = 1 for every digit
              + 0.0005 * sum_d sum((digit_d - decoder(mask(v, label_d)))^2)
    predict = the `digits_per_image` longest capsules
    ```

    Each digit is reconstructed from its own capsule (masked by its true
    label) and compared with that digit ALONE as it sits in the image, so the
    decoder learns to separate the overlapping digits. Evaluation masks by the
    true labels too; `analyze` without labels reconstructs from the longest
    capsules, as the paper's Figure 5 does.

    Targets `y` (see `capsules_keras.multi_mnist`): a dict with `"labels"`
    int `(n, digits_per_image)` (different classes per row) and `"digits"`
    `(n, digits_per_image, *image_shape)`; `evaluate` also accepts the labels
    alone (then the loss is the margin loss only). Metrics: `exact_match`
    (all digits among the longest capsules) and `at_least_1`.

    Args:
        image_shape: `(height, width, channels)`; MultiMNIST's is (36, 36, 1).
        num_classes: Number of classes.
        digits_per_image: How many digits each image holds (2).
        **kwargs: `CapsNet`'s arguments (`routing_iterations`,
            `conv_filters`, `primary_capsules`, ...).

    >>> MultiDigitCapsNet().count_params()
    11361808

    Reference: Sabour et al. (2017), section 6 and Figure 5.
    """

    def __init__(
        self, image_shape=(36, 36, 1), num_classes=10, digits_per_image=2, **kwargs
    ):
        check_positive_int("digits_per_image", digits_per_image)
        if digits_per_image >= num_classes:
            raise ValueError(
                "`digits_per_image` must be smaller than `num_classes` "
                f"({num_classes}). Received: digits_per_image={digits_per_image}"
            )
        super().__init__(image_shape=image_shape, num_classes=num_classes, **kwargs)
        self.digits_per_image = digits_per_image

    @staticmethod
    def _split_targets(y):
        if isinstance(y, dict):
            return y["labels"], y.get("digits")
        return y, None

    def _task_loss(self, x, y, y_pred, sample_weight, training):
        labels, digits = self._split_targets(y)
        targets = k_hot(labels, self.num_classes, y_pred["lengths"].dtype)
        margin = self.margin_loss(targets, y_pred["lengths"], sample_weight)
        if not self.reconstruction_weight or digits is None:
            return self._logged_loss(margin)
        # Each digit reconstructed from its own capsule, the errors summed.
        reconstruction = sum(
            self.reconstruction_loss(
                digits[:, d],
                self.reconstruct(y_pred["capsules"], labels[:, d]),
                sample_weight,
            )
            for d in range(self.digits_per_image)
        )
        return self._logged_loss(margin, reconstruction)

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        """Metrics see the labels and the capsule lengths."""
        return super().compute_metrics(x, self._split_targets(y)[0], y_pred)

    def _default_metrics(self):
        return multi_label_metrics(self.digits_per_image)

    def _prepare_labels(self, labels, num_images, name):
        return prepare_label_sets(
            labels, self.num_classes, self.digits_per_image, num_images, name
        )

    def _prepare_targets(self, y, num_images):
        if isinstance(y, dict):
            unknown = sorted(set(y) - {"labels", "digits"})
            if "labels" not in y or unknown:
                raise ValueError(
                    "A dict `y` holds 'labels' and optionally 'digits'. "
                    f"Received: keys {sorted(y)}"
                )
            prepared = {"labels": self._prepare_labels(y["labels"], num_images, "y")}
            if "digits" in y:
                prepared["digits"] = prepare_image_sets(
                    y["digits"],
                    self.image_shape,
                    self.digits_per_image,
                    num_images,
                    "y['digits']",
                )
            return prepared
        return super()._prepare_targets(y, num_images)

    def fit(self, x=None, y=None, *args, **kwargs):
        """`CapsNet.fit`; array targets need the digits unless the loss skips them."""
        if self.reconstruction_weight and is_array(x) and not isinstance(y, dict):
            raise ValueError(
                "MultiDigitCapsNet learns to reconstruct each digit alone: pass "
                "y={'labels': ..., 'digits': ...} (see "
                "capsules_keras.multi_mnist), or build it with "
                f"reconstruction_weight=0. Received: y of type {type(y).__name__}"
            )
        return super().fit(x, y, *args, **kwargs)

    def predicted_classes(self, lengths):
        """The `digits_per_image` longest capsules, longest first, `(n, k)`."""
        order = np.argsort(-np.asarray(lengths), axis=-1, kind="stable")
        return order[:, : self.digits_per_image]

    def _reconstructions(self, capsules, labels):
        """`(n, digits_per_image, *image_shape)`: each digit from its capsule."""
        if labels is None:
            labels = top_k_classes(self.length(capsules), self.digits_per_image)
        return ops.stack(
            [
                self.reconstruct(capsules, labels[:, d])
                for d in range(self.digits_per_image)
            ],
            axis=1,
        )

    def get_config(self):
        return {**super().get_config(), "digits_per_image": self.digits_per_image}


@keras.saving.register_keras_serializable(package="capsules_keras")
class EfficientCapsNet(CapsNet):
    """Efficient-CapsNet (Mazzia et al. 2021): a CapsNet of ~161k parameters.

    ```
    x = ReLU(BN(Conv2D(32, 5)(images)))                   # (b, 24, 24, 32)
    x = ReLU(BN(Conv2D(64, 3)(x)))                        # (b, 22, 22, 64)
    x = ReLU(BN(Conv2D(64, 3)(x)))                        # (b, 20, 20, 64)
    x = ReLU(BN(Conv2D(128, 3, strides=2)(x)))            # (b, 9, 9, 128)
    u = squash_e(reshape(DepthwiseConv2D(9)(x), 16, 8))   # (b, 16, 8)
    v = DigitCaps(10, 16, routing="self_attention",
                  squash="exponential")(u)                # (b, 10, 16)
    ```

    (shapes for 28x28 digits; the depthwise kernel covers the whole last
    feature map, whatever the image size.) `squash_e` is the exponential
    squash `(1 - exp(-|s|)) s / |s|`; the primary capsules come from one
    depthwise convolution, not from a convolution per capsule type; the
    class capsules from non-iterative self-attention routing. The decoder,
    the margin loss and the reconstruction weight (their 0.392 x the mean
    squared error = 0.0005 x the sum) are `CapsNet`'s, and so are `fit`,
    `predict`, `analyze` and saving.

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
        **kwargs: Passed to `keras.Model`.

    >>> EfficientCapsNet().count_encoder_params()
    161824

    Reference: Mazzia, Salvetti & Chiaberge (2021), "Efficient-CapsNet:
    capsule network with self-attention routing", Scientific Reports 11,
    section 3 and Figure 2.
    """

    SQUASH = "exponential"
    #: Channels of the convolution stack, and its last stride-2 layer's.
    CONVOLUTIONS = ((32, 5, 1), (64, 3, 1), (64, 3, 1), (128, 3, 2))

    def __init__(
        self,
        image_shape=(28, 28, 1),
        num_classes=10,
        routing="self_attention",
        routing_iterations=None,
        reconstruction_weight=0.0005,
        digit_dim=16,
        decoder_units=(512, 1024),
        **kwargs,
    ):
        channels = self.CONVOLUTIONS[-1][0]
        super().__init__(
            image_shape=image_shape,
            num_classes=num_classes,
            routing_iterations=routing_iterations,
            reconstruction_weight=reconstruction_weight,
            conv_filters=channels,
            kernel_size=self.CONVOLUTIONS[0][1],
            primary_capsules=channels // 8,
            primary_dim=8,
            digit_dim=digit_dim,
            decoder_units=decoder_units,
            routing=routing,
            **kwargs,
        )

    def _encoder(self):
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
                layers.BatchNormalization(name=f"bn{k}"),
                layers.ReLU(name=f"relu{k}"),
            ]
            height, width = (height - size) // stride + 1, (width - size) // stride + 1
        if min(height, width) < 1:
            raise ValueError(
                "Images are too small for Efficient-CapsNet's convolutions. "
                f"Received: image_shape={self.image_shape}"
            )
        primary_caps = keras.Sequential(
            [
                # One filter per channel over the whole last feature map.
                layers.DepthwiseConv2D((height, width), name="depthwise"),
                layers.Reshape((self.primary_capsules, self.primary_dim)),
                Squash(variant=self.SQUASH, name="squash"),
            ],
            name="primary_caps",
        )
        return keras.Sequential(stack, name="conv"), primary_caps

    def get_config(self):
        config = super().get_config()
        for key in ("conv_filters", "kernel_size", "primary_capsules", "primary_dim"):
            del config[key]  # fixed by the architecture
        return config


def baseline_cnn(
    image_shape=(28, 28, 1),
    num_classes=10,
    dropout_rate=0.5,
    multi_label=False,
    dense_units=1143,
):
    """A plain CNN with CapsNet's parameter budget, for side-by-side tests.

    ```
    Conv2D(128, 5, same, relu) -> MaxPool(2)    # (b, 14, 14, 128)
    Conv2D(128, 5, same, relu) -> MaxPool(2)    # (b, 7, 7, 128)
    Conv2D(128, 5, same, relu) -> Flatten       # (b, 6272)
    Dense(1143, relu) -> Dense(192, relu)       # (b, 192)
    Dropout(dropout_rate) -> Dense(10, softmax) # (b, 10) class probabilities
    ```

    Shaped like the paper's baseline (three 5x5 convolutions, two fully
    connected layers, dropout before the softmax), which has 256, 256 and 128
    channels, no pooling and 35.4M parameters. Here 2x2 max-pooling follows
    the first two convolutions and every convolution has 128 channels, which
    makes it about 3.5 times cheaper to run than CapsNet on 28x28 digits on
    a CPU (on MultiMNIST's 36x36 pairs it trained at about the speed of the
    narrower quick-preset CapsNet); the first fully connected layer (1143
    units; the paper's: 328) brings the total to 8,214,401 parameters for
    28x28x1 images, within 0.02% of CapsNet's 8,215,568.

    Args:
        image_shape: `(height, width, channels)` of the input images.
        num_classes: Number of classes.
        dropout_rate: Dropout before the last layer (0 disables it).
        dense_units: Units of the first fully connected layer, which holds
            most of the parameters; `cnn_units_for` finds the value that
            matches a parameter budget (1143 matches CapsNet at 28x28x1).
        multi_label: Sigmoid outputs (one independent probability per class,
            for images holding several objects, e.g. MultiMNIST's two-hot
            targets) instead of the softmax.

    Returns:
        An uncompiled functional `keras.Model` from images to class
        probabilities; compile it with e.g.
        `loss="sparse_categorical_crossentropy", metrics=["accuracy"]`
        (`multi_label=True`: `loss="binary_crossentropy"`,
        `metrics=[capsules_keras.metrics.MultiLabelAccuracy(2)]`).

    >>> baseline_cnn().count_params()
    8214401

    Reference: Sabour et al. (2017), section 5 (the baseline) and section 5.2
    (affNIST: a CNN "with a similar number of parameters").
    """
    check_positive_int("num_classes", num_classes)
    check_positive_int("dense_units", dense_units)
    if not 0 <= dropout_rate < 1:
        raise ValueError(
            f"`dropout_rate` must be in [0, 1). Received: dropout_rate={dropout_rate}"
        )
    images = keras.Input(tuple(image_shape), name="images")
    x = images
    for k in (1, 2, 3):
        conv = layers.Conv2D(128, 5, padding="same", activation="relu", name=f"conv{k}")
        x = conv(x)
        if k < 3:
            x = layers.MaxPooling2D(2, name=f"pool{k}")(x)
    x = layers.Flatten(name="flatten")(x)
    x = layers.Dense(dense_units, activation="relu", name="fc1")(x)
    x = layers.Dense(192, activation="relu", name="fc2")(x)
    x = layers.Dropout(dropout_rate, name="dropout")(x)
    activation = "sigmoid" if multi_label else "softmax"
    probabilities = layers.Dense(num_classes, activation=activation, name=activation)(x)
    return keras.Model(images, probabilities, name="baseline_cnn")


def cnn_units_for(image_shape, num_classes, parameters):
    """The `dense_units` that give `baseline_cnn` about `parameters` weights.

    Every other layer's size is fixed, and the parameter count grows by
    `flattened + 1 + 192` per unit of the first fully connected layer.

    >>> cnn_units_for((28, 28, 1), 10, CapsNet().count_params())
    1143
    """
    height, width, channels = image_shape
    flattened = (height // 2 // 2) * (width // 2 // 2) * 128
    convolutions = (25 * channels * 128 + 128) + 2 * (25 * 128 * 128 + 128)
    fixed = convolutions + 192 + (192 * num_classes + num_classes)
    return max(1, round((parameters - fixed) / (flattened + 1 + 192)))
