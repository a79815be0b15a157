"""What CapsNet and Efficient-CapsNet share: digit capsules, lengths, decoder, loss.

`VectorCapsNet` routes the capsules of an encoder (given by the subclass's
`_encoder`) to one `DigitCaps` capsule per class, scores the classes by the
capsules' lengths and reconstructs the image from the capsule of one class;
its loss is the margin loss plus the weighted reconstruction loss.
"""

import math

import keras
import numpy as np
from keras import layers

from capsules_keras._checks import (
    check_image_shape,
    check_positive_int,
    check_positive_number,
)
from capsules_keras.inputs import image_batch, prepare_images
from capsules_keras.layers import DigitCaps, Length, Mask, legacy_scale_agreement
from capsules_keras.losses import MarginLoss, ReconstructionLoss
from capsules_keras.models.base import CapsuleModel
from capsules_keras.routing import check_routing


class VectorCapsNet(CapsuleModel):
    """An encoder, digit capsules with routing, and a decoder (see `CapsNet`).

    Subclasses call `__init__` with the shared arguments (by keyword), set
    what their `_encoder()` reads, then call `_add_layers()`; their
    `get_config` adds their own arguments to the shared ones.
    """

    OWN_LOSS = "margin loss + weighted reconstruction loss"
    #: The capsule non-linearity (`capsules_keras.ops.SQUASHES`).
    SQUASH = "sabour"

    def __init__(
        self,
        *,
        image_shape,
        num_classes,
        routing_iterations,
        reconstruction_weight,
        digit_dim,
        decoder_units,
        routing,
        scale_agreement,
        **kwargs,
    ):
        super().__init__(**kwargs)
        image_shape = check_image_shape(image_shape)
        check_positive_int("num_classes", num_classes)
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
        self.digit_dim = digit_dim
        self.decoder_units = decoder_units

    def _encoder(self):
        """The layers before `DigitCaps`: `(features, primary_capsules)`."""
        raise NotImplementedError

    def _add_layers(self):
        """Creates the layers (the encoder's from `_encoder`) and builds them."""
        image_shape = self.image_shape
        self.conv, self.primary_caps = self._encoder()
        self.digit_caps = DigitCaps(
            self.num_classes,
            self.digit_dim,
            routing_iterations=self.routing_iterations,
            return_coupling=True,
            routing=self.routing,
            squash=self.SQUASH,
            scale_agreement=self.scale_agreement,
            name="digit_caps",
        )
        # Under mixed precision the outputs the losses see stay float32.
        self.length = Length(dtype="float32", name="length")
        self.mask = Mask(name="mask")
        self.decoder = keras.Sequential(
            [layers.Dense(units, activation="relu") for units in self.decoder_units]
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
            if self.reconstruction_weight
            else None
        )
        # Build now: the parameter count is known at once, and the jax backend
        # needs every variable (the decoder's too) before the first step.
        self.build((None, *image_shape))

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
        images = image_batch(images, self.image_shape)
        features = self.conv(images, training=training)
        capsules, _ = self.digit_caps(self._primary_capsules(features, training))
        lengths = self.length(capsules)
        # The class scores are the capsules' lengths ("lengths", their name
        # before every model had "scores").
        return {"scores": lengths, "lengths": lengths, "capsules": capsules}

    def _primary_capsules(self, features, training=None):
        """The primary capsules `(batch_size, in_capsules, dim)` of `features`."""
        return self.primary_caps(features, training=training)

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

    def _task_loss(self, x, y, y_pred, sample_weight, training):
        """Margin loss + `reconstruction_weight` x reconstruction loss.

        While training the decoder reconstructs from the capsule of the true
        label `y`; when evaluating, from the longest capsule.
        """
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

    def analyze(self, images, labels=None, *, batch_size=128, routing_iterations=None):
        """Everything inside the network for a few images, as NumPy arrays.

        Args:
            images: `(n, *image_shape)` images.
            labels: Optional labels; if given, reconstructions use the capsule
                of the label, otherwise the longest capsule.
            batch_size: Images per forward pass.
            routing_iterations: Route with this many iterations instead of the
                model's own (e.g. 2 shows the couplings after one update).

        Returns:
            A dict with `scores` and `lengths` (the same) `(n, classes)`,
            `predictions` `(n,)`,
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
            u = self._primary_capsules(self.conv(batch))
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
        result["scores"] = result["lengths"]
        result["predictions"] = self.predicted_classes(result["lengths"])
        return result

    def _reconstructions(self, capsules, labels):
        """What `analyze` shows as the reconstructions of a batch."""
        return self.reconstruct(capsules, labels)

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
            "digit_dim": self.digit_dim,
            "decoder_units": self.decoder_units,
            "routing": self.routing,
            "scale_agreement": self.scale_agreement,
        }
        return {**super().get_config(), **config}

    @classmethod
    def from_config(cls, config):
        return super().from_config(legacy_scale_agreement(config))
