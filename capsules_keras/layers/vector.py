"""Vector capsule layers without routing: Squash, PrimaryCaps, Length, Mask.

Thin, serializable Keras layers over `capsules_keras.ops`. Shapes use named
axes: `batch_size`, `num_capsules` (capsules in a layer), `capsule_dim` (the
length of each capsule vector).
"""

import keras
from keras import InputSpec, initializers, layers, ops

from capsules_keras._checks import (
    check_axis,
    check_padding,
    check_positive_int,
    check_positive_int_or_pair,
    check_positive_number,
    check_rank,
    renamed_argument,
    warn_renamed,
)
from capsules_keras.ops import (
    EPSILON,
    conv2d_patches_compiled,
    get_squash,
    jax_on_cpu,
    labels_to_one_hot,
    safe_norm,
    squash,
)

register = keras.saving.register_keras_serializable(package="capsules_keras")


@register
class Squash(layers.Layer):
    """Squashes vectors to a length in [0, 1), keeping their direction.

    `squash(s) = |s|^2 / (1 + |s|^2) * s / sqrt(|s|^2 + epsilon)`

    Args:
        axis: The capsule-dimension axis. Defaults to the last one.
        epsilon: Positive constant under the square root; keeps the value and
            the gradient finite at the zero vector.
        squash: `"sabour"` (above, the paper's) or `"exponential"`
            (Efficient-CapsNet's `(1 - exp(-|s|)) * s / |s|`, see
            `capsules_keras.ops.exponential_squash`), as in
            `DigitCaps(squash=...)`. Its old name, `variant`, still works
            with a `DeprecationWarning`.

    Input shape:
        Any tensor, e.g. `(batch_size, num_capsules, capsule_dim)`.

    Output shape:
        Same as the input.

    >>> tuple(Squash()(keras.ops.ones((2, 1152, 8))).shape)
    (2, 1152, 8)

    Reference: Sabour et al. (2017), equation 1.
    """

    def __init__(self, axis=-1, epsilon=EPSILON, squash="sabour", **kwargs):
        squash = renamed_argument(kwargs, "variant", "squash", squash, "sabour")
        super().__init__(**kwargs)
        check_axis("axis", axis)
        check_positive_number("epsilon", epsilon)
        self.squash_fn = get_squash(squash)
        self.axis = axis
        self.epsilon = epsilon
        self.squash = squash
        self.supports_masking = True

    @property
    def variant(self):
        """Deprecated: the old name of `squash`."""
        warn_renamed("variant", "squash")
        return self.squash

    def call(self, inputs):
        return self.squash_fn(inputs, axis=self.axis, epsilon=self.epsilon)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        base_config = super().get_config()
        config = {"axis": self.axis, "epsilon": self.epsilon, "squash": self.squash}
        return {**base_config, **config}


@register
class PrimaryCaps(layers.Layer):
    """Convolutional capsules: a Conv2D whose channels are cut into capsules.

    `u = squash(reshape(conv2d(x), (batch_size, H' * W' * capsule_types,
    capsule_dim)))`

    Capsule `i` of the output is capsule type `i % capsule_types` at grid cell
    `i // capsule_types`, with cells numbered row by row (`row * W' + col`).
    There is no ReLU: the squash is the non-linearity.

    Args:
        capsule_types: Number of capsule types (channel groups) per grid
            cell, as in `PrimaryMatrixCaps`. The paper uses 32. Its old name,
            `num_capsules`, still works with a `DeprecationWarning`.
        capsule_dim: Dimension of each capsule. The paper uses 8.
        kernel_size: Convolution window, an int or a pair of ints.
        strides: Convolution strides, an int or a pair of ints.
        padding: `"valid"` or `"same"`.
        kernel_initializer: Initializer of the convolution kernel.
        bias_initializer: Initializer of the convolution bias.
        kernel_regularizer: Optional regularizer of the convolution kernel.

    Input shape:
        `(batch_size, height, width, channels)`, channels last, with known
        height and width.

    Output shape:
        `(batch_size, H' * W' * capsule_types, capsule_dim)`, where `H'`,
        `W'` are the convolution's output height and width.

    >>> x = keras.ops.ones((2, 20, 20, 256))  # Conv2D(256, 9) of a 28x28 digit
    >>> tuple(PrimaryCaps(32, 8, kernel_size=9, strides=2)(x).shape)
    (2, 1152, 8)

    Reference: Sabour et al. (2017), section 4.
    """

    def __init__(
        self,
        capsule_types=32,
        capsule_dim=8,
        kernel_size=9,
        strides=2,
        padding="valid",
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        kernel_regularizer=None,
        **kwargs,
    ):
        capsule_types = renamed_argument(
            kwargs, "num_capsules", "capsule_types", capsule_types, 32
        )
        super().__init__(**kwargs)
        check_positive_int("capsule_types", capsule_types)
        check_positive_int("capsule_dim", capsule_dim)
        self.capsule_types = capsule_types
        self.capsule_dim = capsule_dim
        # Checked here: Conv2D's own checks let bools, None and some strings in.
        check_positive_int_or_pair("kernel_size", kernel_size)
        check_positive_int_or_pair("strides", strides)
        check_padding(padding)
        self.conv = layers.Conv2D(
            filters=capsule_types * capsule_dim,
            kernel_size=kernel_size,
            strides=strides,
            padding=padding,
            kernel_initializer=kernel_initializer,
            bias_initializer=bias_initializer,
            kernel_regularizer=kernel_regularizer,
            dtype=self.dtype_policy,
            name="conv",
        )

    @property
    def num_capsules(self):
        """Deprecated: the old name of `capsule_types`."""
        warn_renamed("num_capsules", "capsule_types")
        return self.capsule_types

    def _grid_shape(self, input_shape):
        """(H', W') of the convolution output; checks the input."""
        check_rank(
            "PrimaryCaps", input_shape, 4, "(batch_size, height, width, channels)"
        )
        _, height, width, _ = self.conv.compute_output_shape(input_shape)
        if height is None or width is None:
            raise ValueError(
                "PrimaryCaps needs a known height and width to count its "
                f"capsules. Received: input_shape={tuple(input_shape)}"
            )
        return height, width

    def build(self, input_shape):
        self._grid_shape(input_shape)
        self.conv.build(input_shape)
        # As Conv2D's: Keras refuses, before `call`, another number of channels.
        self.input_spec = InputSpec(ndim=4, axes={-1: input_shape[-1]})
        # Backend-specific for a measured reason: on jax on CPU, XLA
        # differentiates the strided convolution far more slowly than the
        # same convolution written as patches and one matmul
        # (docs/design-decisions.md, "Primary capsules on jax").
        # The weights are the Conv2D's either way. The patches are one
        # compiled program (see `conv2d_patches_compiled`).
        self._conv_as_matmul = jax_on_cpu()

    def _convolve(self, inputs):
        if not self._conv_as_matmul:
            return self.conv(inputs)
        conv = self.conv
        kernel = ops.convert_to_tensor(conv.kernel)
        x = conv2d_patches_compiled()(inputs, kernel, conv.strides, conv.padding)
        return ops.add(x, conv.bias)

    def call(self, inputs):
        height, width = self._grid_shape(inputs.shape)
        x = self._convolve(inputs)  # (batch_size, H', W', capsule_types * dim)
        # (batch_size, H' * W' * capsule_types, capsule_dim)
        u = ops.reshape(x, (-1, height * width * self.capsule_types, self.capsule_dim))
        return squash(u)

    def compute_output_shape(self, input_shape):
        height, width = self._grid_shape(input_shape)
        num_capsules = height * width * self.capsule_types
        return (input_shape[0], num_capsules, self.capsule_dim)

    def get_config(self):
        base_config = super().get_config()
        config = {
            "capsule_types": self.capsule_types,
            "capsule_dim": self.capsule_dim,
            "kernel_size": self.conv.kernel_size,
            "strides": self.conv.strides,
            "padding": self.conv.padding,
            "kernel_initializer": initializers.serialize(self.conv.kernel_initializer),
            "bias_initializer": initializers.serialize(self.conv.bias_initializer),
            "kernel_regularizer": keras.regularizers.serialize(
                self.conv.kernel_regularizer
            ),
        }
        return {**base_config, **config}


@register
class Length(layers.Layer):
    """Length of each capsule: the probability that its entity is present.

    `length(v) = sqrt(sum_m v[..., m]^2 + epsilon)`

    Args:
        epsilon: Positive constant under the square root; keeps the gradient
            finite at the zero vector.

    Input shape:
        `(batch_size, num_capsules, capsule_dim)` (any rank >= 2).

    Output shape:
        `(batch_size, num_capsules)`.

    >>> tuple(Length()(keras.ops.ones((2, 10, 16))).shape)
    (2, 10)
    """

    def __init__(self, epsilon=EPSILON, **kwargs):
        super().__init__(**kwargs)
        check_positive_number("epsilon", epsilon)
        self.epsilon = epsilon

    def _check(self, input_shape):
        if len(input_shape) < 2:
            raise ValueError(
                "Length expects capsules of shape (batch_size, num_capsules, "
                f"capsule_dim). Received: input_shape={tuple(input_shape)}"
            )

    def call(self, inputs):
        self._check(inputs.shape)
        return safe_norm(inputs, axis=-1, epsilon=self.epsilon)

    def compute_output_shape(self, input_shape):
        self._check(input_shape)
        return tuple(input_shape[:-1])

    def get_config(self):
        return {**super().get_config(), "epsilon": self.epsilon}


@register
class Mask(layers.Layer):
    """Keeps one capsule per sample, zeroes the others, and flattens.

    `masked[b] = flatten(v[b] * onehot[b][:, None])`

    The kept capsule is the one named by `labels` when they are given (the
    paper trains the decoder this way) and otherwise the longest capsule (the
    paper's choice at test time).

    Call arguments:
        inputs: Capsules `v` of shape `(batch_size, num_capsules,
            capsule_dim)`, or a list `[v, labels]` where `labels` are integer
            classes `(batch_size,)` or one-hot `(batch_size, num_capsules)`.

    Output shape:
        `(batch_size, num_capsules * capsule_dim)`, ready for a dense decoder.

    >>> v = keras.ops.ones((4, 10, 16))
    >>> tuple(Mask()([v, keras.ops.array([0, 1, 2, 3])]).shape)
    (4, 160)
    """

    def _split(self, inputs):
        if isinstance(inputs, (list, tuple)):
            if len(inputs) != 2:
                raise ValueError(
                    "Mask expects capsules or a list [capsules, labels]. "
                    f"Received: a list of {len(inputs)} inputs"
                )
            capsules, labels = inputs
        else:
            capsules, labels = inputs, None
        check_rank("Mask", capsules.shape, 3, "(batch_size, num_capsules, capsule_dim)")
        return capsules, labels

    def call(self, inputs):
        capsules, labels = self._split(inputs)
        num_capsules, capsule_dim = capsules.shape[1:]
        if labels is None:
            # The longest capsule; squared lengths pick the same one.
            longest = ops.argmax(ops.sum(ops.square(capsules), axis=-1), axis=-1)
            labels = longest  # (batch_size,)
        mask = labels_to_one_hot(labels, num_capsules, dtype=capsules.dtype)
        masked = capsules * ops.expand_dims(mask, -1)  # (b, num_capsules, dim)
        # (batch_size, num_capsules * capsule_dim)
        return ops.reshape(masked, (-1, num_capsules * capsule_dim))

    def compute_output_shape(self, input_shape):
        if isinstance(input_shape, list) and isinstance(input_shape[0], (list, tuple)):
            input_shape = input_shape[0]
        check_rank("Mask", input_shape, 3, "(batch_size, num_capsules, capsule_dim)")
        batch_size, num_capsules, capsule_dim = input_shape
        return (batch_size, num_capsules * capsule_dim)
