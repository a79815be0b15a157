"""A capsule backbone: an encoder's primary capsules routed to class capsules.

```
u    = encoder(images)            # (b, in_capsules, in_dim)  primary capsules
v, c = DigitCaps(num_classes)(u)  # (b, num_classes, digit_dim), coupling
```

The encoder is any `CapsuleEncoder`, a layer that turns images into
primary capsules and names the squash its capsules use (`CapsNetEncoder`,
`EfficientEncoder`, `ResidualEncoder`); the backbone adds the class
capsules and their routing. Tasks (`CapsuleClassifier`,
`MultiDigitClassifier`) put a head and a loss on a backbone, so every
encoder trains on every task.
"""

import keras

from capsules_keras.layers import DigitCaps, legacy_scale_agreement
from capsules_keras.models.encoder import CapsuleEncoder
from capsules_keras.routing import DEFAULT_ROUTING, check_routing


@keras.saving.register_keras_serializable(package="capsules_keras")
class CapsuleBackbone(keras.layers.Layer):
    """Primary capsules from an encoder, routed to one capsule per class.

    Args:
        encoder: A `CapsuleEncoder`, from images `(batch, *image_shape)`
            to primary capsules `(batch, in_capsules, in_dim)`; the class
            capsules use its squash.
        num_classes: Class capsules, one per class.
        digit_dim: Dimension of the class capsules (16).
        routing: The routing algorithm (`capsules_keras.routing.ROUTINGS`).
        routing_iterations: Routing iterations; None takes the algorithm's
            default (3 for dynamic routing).
        scale_agreement: Inverted dot-product routing only (see `DigitCaps`).
        **kwargs: Passed to `keras.layers.Layer`.

    Call: `backbone(images)` -> `(capsules, coupling)`, the class capsules
    `(batch, num_classes, digit_dim)` and the coupling coefficients of the
    last routing iteration.
    """

    def __init__(
        self,
        encoder,
        num_classes=10,
        *,
        digit_dim=16,
        routing=DEFAULT_ROUTING,
        routing_iterations=None,
        scale_agreement=True,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if not isinstance(encoder, CapsuleEncoder):
            raise ValueError(
                "`encoder` must be a CapsuleEncoder (capsules_keras.models."
                "encoder: it names its image_shape, squash, conv and "
                "primary_caps). Received: encoder of type "
                f"{type(encoder).__name__}"
            )
        self.encoder = encoder
        self.num_classes = num_classes
        self.digit_dim = digit_dim
        self.routing = routing
        self.routing_iterations = check_routing(routing, routing_iterations)
        self.scale_agreement = scale_agreement
        self.digit_caps = DigitCaps(
            num_classes,
            digit_dim,
            routing_iterations=self.routing_iterations,
            return_coupling=True,
            routing=routing,
            squash=encoder.squash,
            scale_agreement=scale_agreement,
            name="digit_caps",
        )

    @property
    def image_shape(self):
        return self.encoder.image_shape

    def build(self, input_shape):
        # A backbone or encoder loaded from a config comes built.
        if not self.encoder.built:
            self.encoder.build(input_shape)
        if not self.digit_caps.built:
            self.digit_caps.build(self.encoder.compute_output_shape(input_shape))
        self.built = True

    def call(self, images, training=None):
        # `training` passed on explicitly: jax's trainer calls the model's
        # `call` itself, with no outer `__call__` to hand it to sublayers.
        return self.digit_caps(self.encoder(images, training=training))

    def route(self, images, routing_iterations=None):
        """`call` with another number of routing iterations (for `analyze`)."""
        votes = self.digit_caps.votes(self.encoder(images))
        iterations = routing_iterations or self.routing_iterations
        return self.digit_caps.route(votes, iterations, return_coupling=True)

    def compute_output_shape(self, input_shape):
        batch = input_shape[0]
        in_capsules = self.encoder.compute_output_shape(input_shape)[1]
        return (
            (batch, self.num_classes, self.digit_dim),
            (batch, in_capsules, self.num_classes),
        )

    def get_config(self):
        return {
            **super().get_config(),
            "encoder": keras.saving.serialize_keras_object(self.encoder),
            "num_classes": self.num_classes,
            "digit_dim": self.digit_dim,
            "routing": self.routing,
            "routing_iterations": self.routing_iterations,
            "scale_agreement": self.scale_agreement,
        }

    @classmethod
    def from_config(cls, config):
        encoder = keras.saving.deserialize_keras_object(config["encoder"])
        return cls(**{**legacy_scale_agreement(config), "encoder": encoder})
