"""A small residual encoder: a ResNet-style trunk that shrinks the map before
the primary capsules, for photographs and other images larger or richer
than digits."""

import math

import keras
from keras import layers, ops

from capsules_keras._checks import check_image_shape, check_positive_int
from capsules_keras.layers import BatchNormalization, PrimaryCaps
from capsules_keras.models.capsnet import PRIMARY_CAPSULES
from capsules_keras.models.encoder import CapsuleEncoder, chain_shapes, opened

#: The largest feature map, a side, that the primary capsules see: the
#: trunk pools its stem's output until the map after its strided blocks is
#: at most this, so that the capsules stay as many as CapsNet's at 40 px
#: (a 12x12 map gives a 10x10 grid) whatever the image size.
MAX_FEATURE_MAP = 12
#: Channels of the three residual blocks; the second and third halve the map.
WIDTHS = (32, 64, 128)
#: The batch normalisations' momentum: their moving statistics follow the
#: batches' at 0.1 a step (PyTorch's default). Keras' 0.99 averages over
#: hundreds of steps, and a run on a small folder has no more than that:
#: its moving statistics still held the first weights' when it ended, and
#: the model scored far below its training accuracy on its training images.
MOMENTUM = 0.9


def _conv(filters, size, strides, name):
    # No bias: the batch normalisation after it has its own offset.
    return layers.Conv2D(
        filters,
        size,
        strides=strides,
        padding="same",
        use_bias=False,
        kernel_initializer="he_normal",
        name=name,
    )


@keras.saving.register_keras_serializable(package="capsules_keras")
class ResidualBlock(layers.Layer):
    """A basic residual block (He et al. 2016): two 3x3 convolutions and a
    shortcut.

    ```
    y = relu(bn(conv3x3(relu(bn(conv3x3(x, strides))))) + shortcut(x))
    shortcut(x) = x, or bn(conv1x1(avgpool(x, strides))) where the shape changes
    ```

    Args:
        filters: Channels of its output.
        strides: Strides of its first convolution (and the shortcut's
            pooling); 2 halves the map.
        **kwargs: Passed to `keras.layers.Layer`.
    """

    def __init__(self, filters, strides=1, **kwargs):
        super().__init__(**kwargs)
        check_positive_int("filters", filters)
        check_positive_int("strides", strides)
        self.filters = filters
        self.strides = strides

        self.conv1 = _conv(filters, 3, strides, "conv1")
        self.bn1 = BatchNormalization(momentum=MOMENTUM, name="bn1")
        self.relu1 = layers.ReLU(name="relu1")
        self.conv2 = _conv(filters, 3, 1, "conv2")
        self.bn2 = BatchNormalization(momentum=MOMENTUM, name="bn2")
        self.relu2 = layers.ReLU(name="relu2")
        self.shortcut = None  # set in build, where the input's channels are known

    def build(self, input_shape):
        if self.strides != 1 or input_shape[-1] != self.filters:
            # Averaged, then projected (ResNet-D, He et al. 2019): a strided
            # 1x1 convolution would read one pixel in four. (TensorFlow's
            # CPU kernels also crash training one.)
            self.shortcut = keras.Sequential(
                [
                    layers.AveragePooling2D(
                        self.strides, padding="same", name="average"
                    ),
                    _conv(self.filters, 1, 1, "project"),
                    BatchNormalization(momentum=MOMENTUM, name="project_bn"),
                ],
                name="shortcut",
            )
            self.shortcut.build(input_shape)
        shape = input_shape
        for layer in self._main_path():
            layer.build(shape)
            shape = layer.compute_output_shape(shape)
        self.relu2.build(shape)
        self.built = True

    def _main_path(self):
        return [self.conv1, self.bn1, self.relu1, self.conv2, self.bn2]

    def call(self, x, training=None):
        y = x
        for layer in self._main_path():
            y = layer(y, training=training)
        skip = x if self.shortcut is None else self.shortcut(x, training=training)
        return self.relu2(ops.add(y, skip))

    def compute_output_shape(self, input_shape):
        return self.conv1.compute_output_shape(input_shape)[:-1] + (self.filters,)

    def planned_layers(self, input_shape):
        """Its layers with their input shapes, for the capacity planner: the
        main path, the shortcut (from the block's input) and the last ReLU."""
        pairs = chain_shapes(self._main_path(), input_shape)
        if self.shortcut is not None:
            pairs += chain_shapes(opened(self.shortcut), input_shape)
        return pairs + [(self.relu2, self.compute_output_shape(input_shape))]

    def get_config(self):
        return {
            **super().get_config(),
            "filters": self.filters,
            "strides": self.strides,
        }


def stem_pools(image_shape):
    """How many 2x2 max-poolings the stem needs: the fewest that leave the map
    after the strided blocks at most `MAX_FEATURE_MAP` a side.

    >>> [stem_pools((side, side, 3)) for side in (28, 40, 64, 128, 224)]
    [0, 0, 1, 2, 3]
    """
    side = max(image_shape[:2])
    shrink = 2 ** (len(WIDTHS) - 1)  # the strided blocks: all but the first
    pools = 0
    while math.ceil(side / 2**pools / shrink) > MAX_FEATURE_MAP:
        pools += 1
    return pools


def residual_trunk(image_shape, widths=WIDTHS):
    """The residual network of `ResidualEncoder`, from images to features.

    ```
    x = relu(bn(conv3x3(images, widths[0])))      # the stem
    x = MaxPool(2)(x) x stem_pools(image_shape)   # none up to 48 px
    x = ResidualBlock(widths[0])(x)
    x = ResidualBlock(widths[1], strides=2)(x)
    x = ResidualBlock(widths[2], strides=2)(x)    # at most 12x12
    ```

    Returns:
        A `keras.Sequential` named "conv".
    """
    widths = tuple(widths)
    if len(widths) != len(WIDTHS):
        raise ValueError(
            f"`widths` must give the channels of {len(WIDTHS)} residual "
            f"blocks. Received: widths={widths}"
        )
    for width in widths:
        check_positive_int("widths", width)
    stem = [
        _conv(widths[0], 3, 1, "stem"),
        BatchNormalization(momentum=MOMENTUM, name="stem_bn"),
        layers.ReLU(name="stem_relu"),
    ]
    pools = [
        layers.MaxPooling2D(2, name=f"pool{k}")
        for k in range(1, stem_pools(image_shape) + 1)
    ]
    blocks = [
        ResidualBlock(width, strides=1 if k == 0 else 2, name=f"block{k + 1}")
        for k, width in enumerate(widths)
    ]
    return keras.Sequential([*stem, *pools, *blocks], name="conv")


@keras.saving.register_keras_serializable(package="capsules_keras")
class ResidualEncoder(CapsuleEncoder):
    """Primary capsules on a small residual network (ResNet-style).

    ```
    x = residual_trunk(image_shape)(images)   # (b, 10, 10, 128)
    u = PrimaryCaps(32, 8, 3, strides=1)(x)   # (b, 2048, 8)
    ```

    (shapes for 40x40 images; the trunk: a 3x3 stem and three residual
    blocks of 32, 64 and 128 channels, the last two halving the map.) The
    paper's encoder is one 9x9 convolution, enough for digits; on
    photographs capsule heads do well on a deeper trunk (Tsai et al. 2020
    put theirs on a ResNet). The map is shrunk
    before the primary capsules (`stem_pools`, the strided blocks), so
    their number stays near CapsNet's at 40 px for any image size: a grid
    of at most 10x10. Its capsules use the paper's squash.

    Args:
        image_shape: `(height, width, channels)` of the images.
        widths: Channels of the three residual blocks ((32, 64, 128)); the
            stem has the first block's.
        primary_capsules: Capsule types in `PrimaryCaps` (32).
        primary_dim: Dimension of the primary capsules (8).
        **kwargs: Passed to `keras.layers.Layer`.
    """

    squash = "sabour"

    def __init__(
        self,
        image_shape=(32, 32, 3),
        *,
        widths=WIDTHS,
        primary_capsules=PRIMARY_CAPSULES,
        primary_dim=8,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.image_shape = check_image_shape(image_shape)
        self.widths = tuple(widths)
        self.primary_capsules = primary_capsules
        self.primary_dim = primary_dim
        self.conv = residual_trunk(self.image_shape, widths)
        self.primary_caps = PrimaryCaps(
            primary_capsules, primary_dim, 3, strides=1, name="primary_caps"
        )
        height, width = self.conv.compute_output_shape((1, *self.image_shape))[1:3]
        if min(height, width) < 3:
            raise ValueError(
                "Images are too small for the residual encoder: its last "
                f"feature map would be {height}x{width}, below the primary "
                f"capsules' 3x3 kernel. Received: image_shape={self.image_shape}"
            )

    def call(self, images, training=None):
        return self.primary_caps(self.conv(images, training=training))

    def compute_output_shape(self, input_shape):
        features = self.conv.compute_output_shape(input_shape)
        return self.primary_caps.compute_output_shape(features)

    def planned_layers(self, input_shape):
        pairs = []
        shape = tuple(input_shape)
        for layer in [*self.conv.layers, self.primary_caps]:
            if isinstance(layer, ResidualBlock):
                pairs += layer.planned_layers(shape)
            else:
                pairs.append((layer, shape))
            shape = tuple(layer.compute_output_shape(shape))
        return pairs

    def get_config(self):
        return {
            **super().get_config(),
            "image_shape": self.image_shape,
            "widths": self.widths,
            "primary_capsules": self.primary_capsules,
            "primary_dim": self.primary_dim,
        }
