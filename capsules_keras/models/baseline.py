"""The CNNs of the comparisons: CapsNet's parameter budget without capsules,
and the residual encoder's trunk with a pooled head instead of capsules."""

import keras
from keras import layers

from capsules_keras._checks import check_image_shape, check_positive_int
from capsules_keras.inputs import image_batch
from capsules_keras.models.residual import WIDTHS, residual_trunk


class ScaledImagesModel(keras.Model):
    """A functional model whose `call` scales a batch with `inputs.image_batch`
    first, as the capsule models' `call` does: a plain functional model
    would cast uint8 images to float32 in 0..255 and train on them without
    a word. Subclasses build their graph on `keras.Input(image_shape)`, set
    `image_shape` and give their arguments as their config."""

    def call(self, inputs, training=None, mask=None):
        images = image_batch(inputs, self.image_shape)
        return super().call(images, training=training, mask=mask)

    @classmethod
    def from_config(cls, config):
        # Its config holds its own arguments, not a functional graph.
        return cls(**config)


def _class_outputs(x, num_classes, multi_label):
    """The last layer: a softmax over the classes, or one sigmoid each."""
    activation = "sigmoid" if multi_label else "softmax"
    return layers.Dense(num_classes, activation=activation, name=activation)(x)


def baseline_cnn(
    image_shape=(28, 28, 1),
    num_classes=10,
    *,
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

    Images are taken as the capsule models take them: integer images
    (uint8, as image folders and `keras.datasets` give them) are divided by
    255, and `(batch, height, width)` gets its channel axis, however they are
    fed (arrays, `tf.data`, `keras.utils.PyDataset`, generators); float
    images are used as they are, in [0, 1].

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
        An uncompiled `BaselineCNN`, a functional `keras.Model` from images
        to class probabilities; compile it with e.g.
        `loss="sparse_categorical_crossentropy", metrics=["accuracy"]`
        (`multi_label=True`: `loss="binary_crossentropy"`,
        `metrics=[capsules_keras.metrics.MultiLabelAccuracy(2)]`).

    >>> baseline_cnn().count_params()
    8214401

    Reference: Sabour et al. (2017), section 5 (the baseline) and section 5.2
    (affNIST: a CNN "with a similar number of parameters").
    """
    return BaselineCNN(
        image_shape=image_shape,
        num_classes=num_classes,
        dropout_rate=dropout_rate,
        multi_label=multi_label,
        dense_units=dense_units,
    )


@keras.saving.register_keras_serializable(package="capsules_keras")
class BaselineCNN(ScaledImagesModel):
    """The functional model `baseline_cnn` builds (see it for the layers).

    Its `call` scales integer images as the capsule models do
    (`ScaledImagesModel`).
    """

    def __init__(
        self,
        image_shape=(28, 28, 1),
        num_classes=10,
        *,
        dropout_rate=0.5,
        multi_label=False,
        dense_units=1143,
        name="baseline_cnn",
        **kwargs,
    ):
        check_positive_int("num_classes", num_classes)
        check_positive_int("dense_units", dense_units)
        if not 0 <= dropout_rate < 1:
            raise ValueError(
                "`dropout_rate` must be in [0, 1). "
                f"Received: dropout_rate={dropout_rate}"
            )
        images = keras.Input(tuple(image_shape), name="images")
        x = images
        for k in (1, 2, 3):
            conv = layers.Conv2D(
                128, 5, padding="same", activation="relu", name=f"conv{k}"
            )
            x = conv(x)
            if k < 3:
                x = layers.MaxPooling2D(2, name=f"pool{k}")(x)
        x = layers.Flatten(name="flatten")(x)
        x = layers.Dense(dense_units, activation="relu", name="fc1")(x)
        x = layers.Dense(192, activation="relu", name="fc2")(x)
        x = layers.Dropout(dropout_rate, name="dropout")(x)
        probabilities = _class_outputs(x, num_classes, multi_label)
        super().__init__(images, probabilities, name=name, **kwargs)
        self.image_shape = tuple(image_shape)
        self.num_classes = num_classes
        self.dropout_rate = dropout_rate
        self.multi_label = multi_label
        self.dense_units = dense_units

    def get_config(self):
        return {
            "image_shape": self.image_shape,
            "num_classes": self.num_classes,
            "dropout_rate": self.dropout_rate,
            "multi_label": self.multi_label,
            "dense_units": self.dense_units,
            "name": self.name,
        }


@keras.saving.register_keras_serializable(package="capsules_keras")
class ResidualCNN(ScaledImagesModel):
    """The residual encoder's trunk with a pooled head: the CNN to hold
    capsules on `ResidualEncoder` against.

    ```
    x = residual_trunk(image_shape, widths)(images)   # (b, 10, 10, 128)
    x = GlobalAveragePooling2D()(x)                    # (b, 128)
    p = Dense(num_classes, softmax)(x)                 # class probabilities
    ```

    (shapes for 40x40 images.) The same layers up to the features as the
    capsule model's, so that a comparison of the two compares their heads:
    pooling and one dense layer (as ResNets end) against primary capsules,
    routing and class capsules. Integer images are scaled as the capsule
    models scale them.

    Args:
        image_shape: `(height, width, channels)` of the images.
        num_classes: Number of classes.
        widths: Channels of the trunk's three residual blocks.
        multi_label: Sigmoid outputs (one probability per class) instead
            of the softmax, as `baseline_cnn`'s.
        **kwargs: Passed to `keras.Model` (e.g. `name`).

    >>> ResidualCNN((40, 40, 3), 3).count_params()
    309091
    """

    def __init__(
        self,
        image_shape=(32, 32, 3),
        num_classes=10,
        *,
        widths=WIDTHS,
        multi_label=False,
        name="residual_cnn",
        **kwargs,
    ):
        image_shape = check_image_shape(image_shape)
        check_positive_int("num_classes", num_classes)
        images = keras.Input(image_shape, name="images")
        x = residual_trunk(image_shape, widths)(images)
        x = layers.GlobalAveragePooling2D(name="pool")(x)
        probabilities = _class_outputs(x, num_classes, multi_label)
        super().__init__(images, probabilities, name=name, **kwargs)
        self.image_shape = image_shape
        self.num_classes = num_classes
        self.widths = tuple(widths)
        self.multi_label = multi_label

    def get_config(self):
        return {
            "image_shape": self.image_shape,
            "num_classes": self.num_classes,
            "widths": self.widths,
            "multi_label": self.multi_label,
            "name": self.name,
        }


def cnn_units_for(image_shape, num_classes, parameters):
    """The `dense_units` that give `baseline_cnn` about `parameters` weights.

    Every other layer's size is fixed, and the parameter count grows by
    `flattened + 1 + 192` per unit of the first fully connected layer.

    >>> cnn_units_for((28, 28, 1), 10, 8_215_568)  # CapsNet().count_params()
    1143
    """
    height, width, channels = image_shape
    flattened = (height // 2 // 2) * (width // 2 // 2) * 128
    convolutions = (25 * channels * 128 + 128) + 2 * (25 * 128 * 128 + 128)
    fixed = convolutions + 192 + (192 * num_classes + num_classes)
    return max(1, round((parameters - fixed) / (flattened + 1 + 192)))
