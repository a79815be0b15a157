"""The one-label task: a capsule backbone, capsule lengths as scores, a decoder.

`CapsuleClassifier` scores the classes by the lengths of a backbone's class
capsules and reconstructs the image from the capsule of one class; its loss
is the margin loss plus the weighted reconstruction loss (Sabour et al.
2017, section 4). `CapsNet` and `EfficientCapsNet` are this task on their
encoders; `MultiDigitClassifier` is the task of several digits per image.
"""

import math

import keras
import numpy as np
from keras import layers

from capsules_keras._checks import check_positive_int, check_positive_number
from capsules_keras.inputs import image_batch, prepare_images
from capsules_keras.layers import Length, Mask, legacy_scale_agreement
from capsules_keras.losses import MarginLoss, ReconstructionLoss
from capsules_keras.models.backbone import CapsuleBackbone
from capsules_keras.models.base import CapsuleModel

#: The paper's weight of the per-image sum of squared reconstruction errors in
#: the loss (section 4.1): small, so that the margin loss leads.
RECONSTRUCTION_WEIGHT = 0.0005
#: The paper's decoder: the sizes of its two hidden ReLU layers (Figure 2).
DECODER_UNITS = (512, 1024)


@keras.saving.register_keras_serializable(package="capsules_keras")
class CapsuleClassifier(CapsuleModel):
    """One label per image, from the lengths of a backbone's class capsules.

    ```
    v, c    = backbone(images)                    # (b, classes, digit_dim)
    lengths = |v|                                 # (b, classes) class scores
    recon   = decoder(mask(v))                    # (b, *image_shape)
    loss    = margin(y, lengths) + reconstruction_weight * sum((images - recon)^2)
    ```

    The decoder sees the class capsules masked by the TRUE label while
    training and by the longest capsule otherwise; it runs inside
    `compute_loss`, where the labels are known, so `fit(x, y)` takes plain
    image and label arrays. `CapsNet` and `EfficientCapsNet` are this task
    with their encoders; any `CapsuleBackbone` composes the same way:

    >>> from capsules_keras.models import CapsuleBackbone, EfficientEncoder
    >>> backbone = CapsuleBackbone(EfficientEncoder((32, 32, 3)), num_classes=4)
    >>> model = CapsuleClassifier(backbone)
    >>> model.predict(np.zeros((2, 32, 32, 3)), verbose=0).shape
    (2, 4)

    Args:
        backbone: A `CapsuleBackbone`.
        reconstruction_weight: Weight of the per-image sum of squared
            reconstruction errors in the loss (0.0005 in the paper, i.e.
            0.392 x the mean squared error for 28x28 images). 0 leaves the
            decoder out of the loss.
        decoder_units: Hidden layer sizes of the decoder ((512, 1024)).
        **kwargs: Passed to `keras.Model` (e.g. `name`).
    """

    OWN_LOSS = "margin loss + weighted reconstruction loss"

    def __init__(
        self,
        backbone,
        *,
        reconstruction_weight=RECONSTRUCTION_WEIGHT,
        decoder_units=DECODER_UNITS,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if not isinstance(backbone, CapsuleBackbone):
            raise ValueError(
                "`backbone` must be a CapsuleBackbone. "
                f"Received: backbone of type {type(backbone).__name__}"
            )
        if reconstruction_weight != 0:
            check_positive_number("reconstruction_weight", reconstruction_weight)
        decoder_units = tuple(decoder_units)
        for units in decoder_units:
            check_positive_int("decoder_units", units)
        self.reconstruction_weight = reconstruction_weight
        self.decoder_units = decoder_units
        # The model tracks the backbone's parts itself, in the order of the
        # models before backbones existed: `model.conv`, `model.primary_caps`
        # and `model.digit_caps` stay what they were, `summary()` lists the
        # layers, and a `.keras` file saved then, which holds them at the
        # model's top level, finds them there (Keras tries a layer it cannot
        # load at one path again at the next). New files hold them under
        # `backbone/`, which Keras visits first; the backbone itself stays
        # untracked so that it is not listed twice.
        object.__setattr__(self, "backbone", backbone)
        self.conv = backbone.encoder.conv
        self.primary_caps = backbone.encoder.primary_caps
        self.digit_caps = backbone.digit_caps
        # Under mixed precision the outputs the losses see stay float32.
        self.length = Length(dtype="float32", name="length")
        self.mask = Mask(name="mask")
        image_shape = self.image_shape
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

    @property
    def image_shape(self):
        return self.backbone.image_shape

    @property
    def num_classes(self):
        return self.backbone.num_classes

    @property
    def routing(self):
        return self.backbone.routing

    @property
    def routing_iterations(self):
        return self.backbone.routing_iterations

    @property
    def digit_dim(self):
        return self.backbone.digit_dim

    @property
    def scale_agreement(self):
        return self.backbone.scale_agreement

    def count_encoder_params(self):
        """Trainable parameters of the classifier: the backbone, not the decoder.

        The decoder only regularises training; papers that count a capsule
        network without it (Efficient-CapsNet's 161,824) compare with this.
        """
        return sum(math.prod(w.shape) for w in self.backbone.trainable_weights)

    def build(self, input_shape):
        if self.built:
            return
        if not self.backbone.built:  # a backbone loaded from a config comes built
            self.backbone.build(input_shape)
        capsules_shape = (None, self.num_classes, self.digit_dim)
        self.length.build(capsules_shape)
        self.mask.build(capsules_shape)
        self.decoder.build((None, self.num_classes * self.digit_dim))
        self.built = True

    def call(self, images, training=None):
        images = image_batch(images, self.image_shape)
        capsules, _ = self.backbone(images, training=training)
        lengths = self.length(capsules)
        # The class scores are the capsules' lengths ("lengths", their name
        # before every model had "scores").
        return {"scores": lengths, "lengths": lengths, "capsules": capsules}

    def reconstruct(self, capsules, labels=None):
        """Decodes capsules masked by `labels`, or by the longest capsule.

        Args:
            capsules: Class capsules `(batch_size, num_classes, digit_dim)`.
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
            `in_capsules` are ordered as the encoder makes them (`PrimaryCaps`:
            grid cell `i // primary_capsules` row by row, type
            `i % primary_capsules`).
        """
        images = prepare_images(images, self.image_shape, name="images")
        if labels is not None:
            labels = self._prepare_labels(labels, len(images), "labels")

        def step(batch, batch_labels=None):
            capsules, coupling = self.backbone.route(batch, routing_iterations)
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
        config = self.get_config()
        if "backbone" in config:
            backbone = self.backbone.get_config()
            backbone = CapsuleBackbone.from_config(
                {**backbone, "routing_iterations": iterations}
            )
            config["backbone"] = keras.saving.serialize_keras_object(backbone)
        else:  # the flat arguments of a named model (`CapsNet`, ...)
            config["routing_iterations"] = iterations
        clone = self.__class__.from_config(config)
        clone.set_weights(self.get_weights())
        return clone

    def get_config(self):
        return {
            **super().get_config(),
            **self._backbone_config(),
            "reconstruction_weight": self.reconstruction_weight,
            "decoder_units": self.decoder_units,
        }

    def _backbone_config(self):
        """The backbone in `get_config`; a named model gives its own arguments."""
        return {"backbone": keras.saving.serialize_keras_object(self.backbone)}

    def _backbone_arguments(self):
        """The backbone's arguments that every named model's config holds."""
        backbone = self.backbone
        return {
            "image_shape": self.image_shape,
            "num_classes": backbone.num_classes,
            "routing": backbone.routing,
            "routing_iterations": backbone.routing_iterations,
            "digit_dim": backbone.digit_dim,
            "scale_agreement": backbone.scale_agreement,
        }

    @classmethod
    def from_config(cls, config):
        if isinstance(config.get("backbone"), dict):
            backbone = keras.saving.deserialize_keras_object(config["backbone"])
            config = {**config, "backbone": backbone}
        else:  # a named model's own arguments (`CapsNet`, ...)
            config = legacy_scale_agreement(config)
        return cls(**config)
