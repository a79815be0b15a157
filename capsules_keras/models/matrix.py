"""A small matrix-capsule network with EM routing (Hinton, Sabour & Frosst 2018)."""

import keras
import numpy as np
from keras import initializers, layers, ops

from capsules_keras._checks import check_image_shape, check_positive_int
from capsules_keras.inputs import image_batch, prepare_images
from capsules_keras.layers import (
    BatchNormalization,
    ClassMatrixCaps,
    ConvMatrixCaps,
    PrimaryMatrixCaps,
)
from capsules_keras.losses import SpreadLoss
from capsules_keras.models.base import CapsuleModel
from capsules_keras.routing.em import POSE_SIZE


@keras.saving.register_keras_serializable(package="capsules_keras")
class MatrixCapsNet(CapsuleModel):
    """A small matrix-capsule network with EM routing, for 28x28 digits.

    The paper's smallNORB network, narrower and for 28x28 images:

    ```
    x = ReLU(BatchNorm(Conv2D(A, 5, strides=2)(images)))  # (b, 12, 12, A)
    c = PrimaryMatrixCaps(B, 1)(x)                      # (b, 12, 12, B, 17)
    c = ConvMatrixCaps(C, kernel_size=3, strides=2)(c)  # (b, 5, 5, C, 17)
    c = ConvMatrixCaps(D, kernel_size=3, strides=1)(c)  # (b, 3, 3, D, 17)
    c = ClassMatrixCaps(10, coordinate_addition=True)(c)  # (b, 10, 17)
    scores = c[..., 16]                                 # (b, 10) activations
    loss = spread_loss(y, scores, margin)               # margin 0.2 -> 0.9
    ```

    (shapes for 28x28x1 images; every shape follows from `image_shape`.)
    The defaults A, B, C, D = 32, 8, 16, 16 (the paper's: 32 each) give
    63,324 trainable parameters for 28x28x1 digits (63,389 with the batch
    normalisation's moving statistics and the margin).

    Two departures from the paper, both measured (docs/design-decisions.md,
    "Matrix capsules: batch normalisation and two EM iterations"):

    - Batch normalisation after the first convolution (momentum 0.9, so
      that its test-time statistics settle within the short runs of the
      quick preset). Without it, the primary poses start far smaller
      than the coordinates that coordinate addition puts into the class
      votes, and the votes hardly depend on the image.
    - 2 EM iterations by default (`ROUTING_ITERATIONS`), not the paper's 3:
      with 3, a short training probe predicted one class for every digit
      where 2 iterations learned; the third E-step makes the assignments
      nearly hard and little gradient passes through them.
      `routing_iterations=3` remains available.

    The loss is the model's own: the spread loss with the margin held in the
    non-trainable variable `spread_margin` (0.2 at first). Raise it during
    training with the `SpreadMarginSchedule` callback (0.2 + 0.1 per epoch
    up to 0.9, the paper's range) or by assigning to the variable. `fit`,
    `evaluate` and `predict` take images and labels as `CapsNet`'s do
    (uint8 or [0, 1] floats, `(n, 28, 28)` or with the channel axis;
    integer or one-hot labels), checked by `capsules_keras.inputs`.

    Outputs (the same contract as every capsule model, `CapsuleModel`):
        - `model.predict(x)`: the class scores, the class capsules'
          activations, `(n, num_classes)`.
        - `model(x)`: a dict with those `"scores"` and the class
          `"capsules"`, poses and activations, `(batch_size, num_classes, 17)`.
        - `model.analyze(x)`: NumPy dict with the scores (also as
          `activations`), predicted classes, the class layer's assignments
          and the children's activations.

    Args:
        image_shape: `(height, width, channels)` of the input images.
        num_classes: Number of classes.
        conv_filters: A, channels of the first convolution.
        capsule_types: (B, C, D): the capsule types of the primary and of
            the two convolutional capsule layers.
        routing_iterations: EM iterations in every routed layer (2).
        inverse_temperature: `lambda` of the last EM iteration.
        coordinate_addition: Coordinate addition in the class capsules.
        **kwargs: Passed to `keras.Model` (e.g. `name`).

    >>> MatrixCapsNet().count_params()
    63389

    Reference: Hinton, Sabour & Frosst (2018), section 3 and Figure 1.
    """

    OWN_LOSS = "the spread loss with the margin `spread_margin`"
    #: EM iterations of every routed layer (see the class docstring).
    ROUTING_ITERATIONS = 2

    def __init__(
        self,
        image_shape=(28, 28, 1),
        num_classes=10,
        *,
        conv_filters=32,
        capsule_types=(8, 16, 16),
        routing_iterations=ROUTING_ITERATIONS,
        inverse_temperature=1.0,
        coordinate_addition=True,
        **kwargs,
    ):
        super().__init__(**kwargs)
        image_shape = check_image_shape(image_shape)
        capsule_types = tuple(capsule_types)
        if len(capsule_types) != 3:
            raise ValueError(
                "`capsule_types` must hold three numbers (primary, first and "
                f"second convolutional capsules). Received: capsule_types="
                f"{capsule_types}"
            )
        for value in capsule_types:
            check_positive_int("capsule_types", value)
        check_positive_int("num_classes", num_classes)
        check_positive_int("conv_filters", conv_filters)
        # 5x5/2, then 3x3/2 and 3x3/1 windows of capsules.
        grid = ((min(image_shape[:2]) - 5) // 2 + 1 - 3) // 2 + 1 - 2
        if min(image_shape[:2]) < 5 or grid < 1:
            raise ValueError(
                "Images are too small for MatrixCapsNet's 5x5/2 convolution and "
                f"its 3x3/2 and 3x3/1 capsule layers. Received: image_shape="
                f"{image_shape}"
            )
        self.image_shape = image_shape
        self.num_classes = num_classes
        self.conv_filters = conv_filters
        self.capsule_types = capsule_types
        self.routing_iterations = routing_iterations
        self.inverse_temperature = inverse_temperature
        self.coordinate_addition = bool(coordinate_addition)
        routing = {
            "routing_iterations": routing_iterations,
            "inverse_temperature": inverse_temperature,
        }
        primary, first, second = capsule_types
        self.conv = layers.Conv2D(conv_filters, 5, strides=2, name="conv")
        self.batch_norm = BatchNormalization(momentum=0.9, name="batch_norm")
        self.relu = layers.ReLU(name="relu")
        self.primary_caps = PrimaryMatrixCaps(primary, name="primary_caps")
        self.conv_caps_1 = ConvMatrixCaps(first, 3, 2, name="conv_caps_1", **routing)
        self.conv_caps_2 = ConvMatrixCaps(second, 3, 1, name="conv_caps_2", **routing)
        self.class_caps = ClassMatrixCaps(
            num_classes,
            coordinate_addition=coordinate_addition,
            name="class_caps",
            **routing,
        )
        # The spread-loss margin: a variable of the model, so the compiled
        # train step reads its current value on every backend.
        self.spread_margin = self.add_weight(
            name="spread_margin",
            shape=(),
            initializer=initializers.Constant(0.2),
            trainable=False,
        )
        self.spread_loss = SpreadLoss(margin=self.spread_margin)
        self.build((None, *image_shape))

    def build(self, input_shape):
        if self.built:
            return
        shape = input_shape
        for layer in (self.conv, self.batch_norm, self.relu, *self._capsule_layers()):
            layer.build(shape)
            shape = layer.compute_output_shape(shape)
        self.built = True

    def _capsule_layers(self):
        return (self.primary_caps, self.conv_caps_1, self.conv_caps_2, self.class_caps)

    def _class_inputs(self, images, training=False):
        """The capsules the class layer routes, `(batch_size, H, W, D, 17)`."""
        x = self.relu(self.batch_norm(self.conv(images), training=training))
        for layer in self._capsule_layers()[:-1]:
            x = layer(x)
        return x

    def class_capsules(self, images, training=False):
        """Class capsules `(batch_size, num_classes, 17)` of prepared images."""
        return self.class_caps(self._class_inputs(images, training))

    def analyze(self, images, labels=None, *, batch_size=128, routing_iterations=None):
        """What the class capsules see for a few images, as NumPy arrays.

        Args:
            images: `(n, *image_shape)` images (as `predict` takes them).
            labels: None: the model has no decoder that labels would steer
                (the argument keeps `analyze` the same across the models).
            batch_size: Images per forward pass.
            routing_iterations: Route the class capsules with this many EM
                iterations instead of the model's own (the convolutional
                capsule layers keep theirs); 1 gives uniform assignments.

        Returns:
            A dict with `scores` and `activations` (the same) `(n, classes)`,
            `predictions` `(n,)`, `assignments` `(n, children, classes)`,
            the class layer's `R` of its last M-step, and
            `child_activations` `(n, children)`, the activations `a_i` that
            weigh each child's votes. `children` are the cells of the last
            convolutional capsule layer in (row, col, type) order: child
            `i` sits in grid cell `i // capsule_types[-1]`, row by row.
        """
        if labels is not None:
            raise ValueError(
                "MatrixCapsNet.analyze takes no labels: the model has no "
                "decoder to show them to. Received: labels of shape "
                f"{np.shape(labels)}"
            )
        images = prepare_images(images, self.image_shape, name="images")

        def step(batch):
            x = self._class_inputs(batch)
            capsules, assignments = self.class_caps.route(x, routing_iterations)
            return {
                "activations": capsules[..., POSE_SIZE],
                "assignments": assignments,
                "child_activations": ops.reshape(x[..., POSE_SIZE], (len(x), -1)),
            }

        result = self._in_batches(step, batch_size, images)
        result["scores"] = result["activations"]
        result["predictions"] = result["activations"].argmax(-1)
        return result

    def call(self, images, training=None):
        images = image_batch(images, self.image_shape)
        capsules = self.class_capsules(images, training=training)
        # The class scores: the activations of the class capsules.
        scores = ops.cast(capsules[..., POSE_SIZE], "float32")
        return {"scores": scores, "capsules": capsules}

    def _task_loss(self, x, y, y_pred, sample_weight, training):
        """The spread loss with the current `spread_margin`."""
        return self.spread_loss(y, y_pred["scores"], sample_weight)

    def get_config(self):
        config = {
            "image_shape": self.image_shape,
            "num_classes": self.num_classes,
            "conv_filters": self.conv_filters,
            "capsule_types": self.capsule_types,
            "routing_iterations": self.routing_iterations,
            "inverse_temperature": self.inverse_temperature,
            "coordinate_addition": self.coordinate_addition,
        }
        return {**super().get_config(), **config}
