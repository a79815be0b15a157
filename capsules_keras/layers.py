"""Capsule layers: thin, serializable Keras layers over `capsules_keras.ops`.

Shapes use named axes: `batch_size`, `num_capsules` (capsules in a layer),
`capsule_dim` (the length of each capsule vector).
"""

import keras
from keras import initializers, layers, ops

from capsules_keras._checks import check_positive_int, check_positive_number, check_rank
from capsules_keras.ops import (
    EPSILON,
    check_routing,
    compile_routing,
    conv2d_patches,
    dynamic_routing,
    get_squash,
    inverted_dot_product_routing,
    labels_to_one_hot,
    route_votes,
    safe_norm,
    self_attention_routing,
    squash,
    vote_layout,
)

register = keras.saving.register_keras_serializable(package="capsules_keras")


def legacy_scale_agreement(config):
    """A `DigitCaps` or `CapsNet` config with the `scale_agreement` it means.

    capsules_keras 0.1 routed inverted dot-product attention without the
    authors' `1 / sqrt(dim)` scale and saved no `scale_agreement`: such a
    config keeps routing unscaled. (Every other routing ignores the key.)
    """
    if "scale_agreement" in config:
        return config
    unscaled = config.get("routing") == "inverted_dot_product"
    return {**config, "scale_agreement": not unscaled}


def _check_axis(axis):
    if isinstance(axis, bool) or not isinstance(axis, int):
        raise ValueError(f"`axis` must be an integer. Received: axis={axis!r}")


@register
class Squash(layers.Layer):
    """Squashes vectors to a length in [0, 1), keeping their direction.

    `squash(s) = |s|^2 / (1 + |s|^2) * s / sqrt(|s|^2 + epsilon)`

    Args:
        axis: The capsule-dimension axis. Defaults to the last one.
        epsilon: Positive constant under the square root; keeps the value and
            the gradient finite at the zero vector.
        variant: `"sabour"` (above, the paper's) or `"exponential"`
            (Efficient-CapsNet's `(1 - exp(-|s|)) * s / |s|`, see
            `capsules_keras.ops.exponential_squash`).

    Input shape:
        Any tensor, e.g. `(batch_size, num_capsules, capsule_dim)`.

    Output shape:
        Same as the input.

    >>> tuple(Squash()(keras.ops.ones((2, 1152, 8))).shape)
    (2, 1152, 8)

    Reference: Sabour et al. (2017), equation 1.
    """

    def __init__(self, axis=-1, epsilon=EPSILON, variant="sabour", **kwargs):
        super().__init__(**kwargs)
        _check_axis(axis)
        check_positive_number("epsilon", epsilon)
        self.squash_fn = get_squash(variant)
        self.axis = axis
        self.epsilon = epsilon
        self.variant = variant
        self.supports_masking = True

    def call(self, inputs):
        return self.squash_fn(inputs, axis=self.axis, epsilon=self.epsilon)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        base_config = super().get_config()
        config = {"axis": self.axis, "epsilon": self.epsilon, "variant": self.variant}
        return {**base_config, **config}


@register
class PrimaryCaps(layers.Layer):
    """Convolutional capsules: a Conv2D whose channels are cut into capsules.

    `u = squash(reshape(conv2d(x), (batch_size, H' * W' * num_capsules,
    capsule_dim)))`

    Capsule `i` of the output is capsule type `i % num_capsules` at grid cell
    `i // num_capsules`, with cells numbered row by row (`row * W' + col`).
    There is no ReLU: the squash is the non-linearity.

    Args:
        num_capsules: Number of capsule types (channels groups) per grid cell.
            The paper uses 32.
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
        `(batch_size, H' * W' * num_capsules, capsule_dim)`, where `H'`, `W'`
        are the convolution's output height and width.

    >>> x = keras.ops.ones((2, 20, 20, 256))  # Conv2D(256, 9) of a 28x28 digit
    >>> tuple(PrimaryCaps(32, 8, kernel_size=9, strides=2)(x).shape)
    (2, 1152, 8)

    Reference: Sabour et al. (2017), section 4.
    """

    def __init__(
        self,
        num_capsules=32,
        capsule_dim=8,
        kernel_size=9,
        strides=2,
        padding="valid",
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        kernel_regularizer=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int("num_capsules", num_capsules)
        check_positive_int("capsule_dim", capsule_dim)
        self.num_capsules = num_capsules
        self.capsule_dim = capsule_dim
        # Conv2D validates kernel_size, strides and padding itself.
        self.conv = layers.Conv2D(
            filters=num_capsules * capsule_dim,
            kernel_size=kernel_size,
            strides=strides,
            padding=padding,
            kernel_initializer=kernel_initializer,
            bias_initializer=bias_initializer,
            kernel_regularizer=kernel_regularizer,
            dtype=self.dtype_policy,
            name="conv",
        )

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
        # Backend-specific for a measured reason: on the jax backend on CPU,
        # XLA's strided convolution is pathologically slow to differentiate
        # (the paper's 9x9/2 conv, 256 -> 256 channels, batch 100: 21 s per
        # forward+backward step, against 1.05 s for the same convolution
        # written as patches + one matmul; torch and tensorflow take 0.8 s
        # with their own convolution, and 1.2-2.2 s with patches).
        # The weights are the Conv2D's either way.
        self._conv_as_matmul = keras.backend.backend() == "jax" and all(
            device.startswith("cpu") for device in keras.distribution.list_devices()
        )

    def _convolve(self, inputs):
        if not self._conv_as_matmul:
            return self.conv(inputs)
        conv = self.conv
        x = conv2d_patches(inputs, conv.kernel, conv.strides, conv.padding)
        return ops.add(x, conv.bias)

    def call(self, inputs):
        height, width = self._grid_shape(inputs.shape)
        x = self._convolve(inputs)  # (batch_size, H', W', num_capsules * dim)
        # (batch_size, H' * W' * num_capsules, capsule_dim)
        u = ops.reshape(x, (-1, height * width * self.num_capsules, self.capsule_dim))
        return squash(u)

    def compute_output_shape(self, input_shape):
        height, width = self._grid_shape(input_shape)
        num_capsules = height * width * self.num_capsules
        return (input_shape[0], num_capsules, self.capsule_dim)

    def get_config(self):
        base_config = super().get_config()
        config = {
            "num_capsules": self.num_capsules,
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
class DigitCaps(layers.Layer):
    """A capsule layer with routing between its inputs and outputs.

    ```
    u_hat[b,i,j,m] = sum_n kernel[i,j,n,m] * u[b,i,n]
    v = dynamic_routing(u_hat, routing_iterations)     # routing="dynamic"
    ```

    Every child capsule `i` predicts every parent `j` through its own matrix
    `kernel[i, j]`; routing then decides how much of each prediction reaches
    each parent. `routing` picks the algorithm (`capsules_keras.ops`):

    - `"dynamic"` (default): routing by agreement, Sabour et al. (2017),
      `dynamic_routing`; 3 iterations.
    - `"self_attention"`: Mazzia et al. (2021), `self_attention_routing`:
      one pass, couplings from the agreement of each vote with all votes,
      plus learned priors (weight `priors`, `(in_capsules, num_capsules)`).
      The squash stays Sabour et al.'s unless `squash="exponential"`, the
      one Efficient-CapsNet uses (`EfficientCapsNet` passes it).
    - `"inverted_dot_product"`: Tsai et al. (2020),
      `inverted_dot_product_routing`: parents start from zero, children
      agree with the layer-normalised parent poses (gain and bias weights
      `pose_scale`, `pose_offset`), the agreement divided by
      `sqrt(capsule_dim)` as in the authors' code; 3 passes, the uniform
      one included.

    Every algorithm outputs squashed capsules (their lengths are class
    probabilities) and the same coupling coefficients with
    `return_coupling`.

    Args:
        num_capsules: Number of output (parent) capsules, e.g. 10 digits.
        capsule_dim: Dimension of each output capsule. The paper uses 16.
        routing_iterations: Number of routing iterations, at least 1; None
            takes the algorithm's default (3, the paper's, for dynamic
            routing; self-attention routing takes only 1).
        kernel_initializer: Initializer of `kernel`. The default is a normal
            distribution with standard deviation 0.05 (see the comment at
            `DEFAULT_KERNEL_INITIALIZER`).
        kernel_regularizer: Optional regularizer of `kernel`.
        kernel_constraint: Optional constraint on `kernel`.
        stop_gradient_votes: If True, gradients flow through the predictions
            only in the last routing iteration (cheaper; not the paper's
            procedure). Off by default.
        return_coupling: If True, the layer returns `(v, c)` where `c` are the
            coupling coefficients of the last routing iteration.
        routing: `"dynamic"`, `"self_attention"` or `"inverted_dot_product"`.
        squash: The non-linearity of the output capsules: `"sabour"` (the
            paper's) or `"exponential"` (Efficient-CapsNet's).
        scale_agreement: Inverted dot-product routing only: divide the
            agreements by `sqrt(capsule_dim)` before the softmax, as Tsai et
            al.'s code does (True, the default). False is the unscaled
            agreement of their paper, and of layers saved by capsules_keras
            0.1 (a config without this key loads with False).

    Input shape:
        `(batch_size, in_capsules, in_dim)`.

    Output shape:
        `(batch_size, num_capsules, capsule_dim)`; with `return_coupling`,
        also `(batch_size, in_capsules, num_capsules)`.

    The single weight, `kernel`, has shape
    `(in_capsules, num_capsules, in_dim, capsule_dim)` -- `W[i, j, n, m]` in
    the paper's indices, the layout of labml_nn's `Router.weight`.

    >>> layer = DigitCaps(10, 16, routing_iterations=3)
    >>> tuple(layer(keras.ops.ones((32, 100, 8))).shape)
    (32, 10, 16)

    Reference: Sabour et al. (2017), section 2 and Procedure 1.
    """

    # With 1152 children the parent pre-activation s_j sums ~1152/10 votes. A
    # standard deviation of 1 (labml_nn's `torch.randn`) makes |s_j| ~ 10 at
    # the start, so every parent is squashed to length ~1, the margin loss
    # saturates and training stalls once the routing softmax runs over the
    # right axis. 0.05 starts the lengths inside (0, 1), where the margin loss
    # has useful gradients. Measured on 5,000 MNIST digits (torch, batch 100,
    # test accuracy after epochs 1 / 3): std 0.01 -> 79.4% / 95.4%,
    # 0.05 -> 91.4% / 96.4%, 0.1 -> 91.9% / 96.1%.
    DEFAULT_KERNEL_INITIALIZER = {
        "class_name": "RandomNormal",
        "config": {"mean": 0.0, "stddev": 0.05, "seed": None},
    }

    def __init__(
        self,
        num_capsules=10,
        capsule_dim=16,
        routing_iterations=None,
        kernel_initializer=None,
        kernel_regularizer=None,
        kernel_constraint=None,
        stop_gradient_votes=False,
        return_coupling=False,
        routing="dynamic",
        squash="sabour",
        scale_agreement=True,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.squash_fn = get_squash(squash)
        self.squash = squash
        check_positive_int("num_capsules", num_capsules)
        check_positive_int("capsule_dim", capsule_dim)
        self.routing_iterations = check_routing(routing, routing_iterations)
        if stop_gradient_votes and routing != "dynamic":
            raise ValueError(
                "`stop_gradient_votes` applies to dynamic routing only. "
                f"Received: routing={routing!r}, stop_gradient_votes=True"
            )
        if not scale_agreement and routing != "inverted_dot_product":
            raise ValueError(
                "`scale_agreement` applies to inverted dot-product routing only. "
                f"Received: routing={routing!r}, scale_agreement={scale_agreement}"
            )
        self.scale_agreement = bool(scale_agreement)
        self.routing = routing
        self.num_capsules = num_capsules
        self.capsule_dim = capsule_dim
        self.kernel_initializer = initializers.get(
            kernel_initializer or self.DEFAULT_KERNEL_INITIALIZER
        )
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)
        self.kernel_constraint = keras.constraints.get(kernel_constraint)
        self.stop_gradient_votes = bool(stop_gradient_votes)
        self.return_coupling = bool(return_coupling)

    def _input_capsules(self, input_shape):
        """(in_capsules, in_dim) of an input shape; checks it."""
        check_rank("DigitCaps", input_shape, 3, "(batch_size, in_capsules, in_dim)")
        _, in_capsules, in_dim = input_shape
        if in_capsules is None or in_dim is None:
            raise ValueError(
                "DigitCaps needs a known number and dimension of input capsules. "
                f"Received: input_shape={tuple(input_shape)}"
            )
        if self.built and (in_capsules, in_dim) != tuple(self.kernel.shape[::2]):
            raise ValueError(
                f"DigitCaps was built for {self.kernel.shape[0]} input capsules of "
                f"dimension {self.kernel.shape[2]}. "
                f"Received: input_shape={tuple(input_shape)}"
            )
        return in_capsules, in_dim

    def build(self, input_shape):
        in_capsules, in_dim = self._input_capsules(input_shape)
        self.kernel = self.add_weight(
            name="kernel",
            shape=(in_capsules, self.num_capsules, in_dim, self.capsule_dim),
            initializer=self.kernel_initializer,
            regularizer=self.kernel_regularizer,
            constraint=self.kernel_constraint,
        )
        if self.routing == "self_attention":
            self.priors = self.add_weight(
                name="priors",
                shape=(in_capsules, self.num_capsules),
                initializer="zeros",
            )
        if self.routing == "inverted_dot_product":
            self.pose_scale = self.add_weight(
                name="pose_scale", shape=(self.capsule_dim,), initializer="ones"
            )
            self.pose_offset = self.add_weight(
                name="pose_offset", shape=(self.capsule_dim,), initializer="zeros"
            )

    def votes(self, inputs):
        """The predictions `u_hat` of every input capsule for every output one.

        Args:
            inputs: `(batch_size, in_capsules, in_dim)`.

        Returns:
            `u_hat` of shape `(batch_size, in_capsules, num_capsules,
            capsule_dim)`, ready for `capsules_keras.ops.dynamic_routing`.
        """
        self._input_capsules(inputs.shape)
        # Called outside `__call__`, Keras does not cast the float32 kernel to
        # the compute dtype of a mixed precision policy: do it here.
        kernel = ops.cast(self.kernel, self.compute_dtype)
        inputs = ops.cast(inputs, self.compute_dtype)
        # u_hat[b,i,j,m] = sum_n W[i,j,n,m] u[b,i,n]
        return ops.einsum("ijnm,bin->bijm", kernel, inputs)  # (b, i, j, m)

    def route(self, u_hat, routing_iterations=None, return_coupling=None):
        """Routes votes `(batch_size, in_capsules, num_capsules, capsule_dim)`.

        Args:
            u_hat: Votes, e.g. from `votes()`.
            routing_iterations: Iterations instead of the layer's own.
            return_coupling: Also return the couplings (default: the layer's
                `return_coupling`).

        Returns:
            `v`, or `(v, c)`, as the layer's call does.
        """
        iterations = check_routing(
            self.routing, routing_iterations or self.routing_iterations
        )
        if return_coupling is None:
            return_coupling = self.return_coupling
        if self.routing == "self_attention":
            return self_attention_routing(
                u_hat, self.priors, return_coupling, self.squash_fn
            )
        if self.routing == "inverted_dot_product":
            return inverted_dot_product_routing(
                u_hat,
                iterations,
                self.pose_scale,
                self.pose_offset,
                return_coupling,
                self.squash_fn,
                self.scale_agreement,
            )
        return dynamic_routing(
            u_hat, iterations, self.stop_gradient_votes, return_coupling, self.squash_fn
        )

    def call(self, inputs):
        self._input_capsules(inputs.shape)
        if self.routing != "dynamic":
            return self.route(self.votes(inputs))
        # The votes go straight into the memory layout that routes fastest on
        # this backend (see capsules_keras.ops.vote_layout); `votes()` gives
        # them in the paper's (b, i, j, m) order.
        layout = vote_layout()

        def route(kernel, inputs):
            return route_votes(
                layout.votes(kernel, inputs),
                layout,
                self.routing_iterations,
                self.stop_gradient_votes,
                self.return_coupling,
                self.squash_fn,
            )

        # Compiled on its own where the training step around it is not.
        # `.value`: the kernel as a tensor (cast to the compute dtype under
        # mixed precision), so that a compiled function can take it.
        return compile_routing(route)(self.kernel.value, inputs)

    def compute_output_shape(self, input_shape):
        in_capsules, _ = self._input_capsules(input_shape)
        batch_size = input_shape[0]
        v_shape = (batch_size, self.num_capsules, self.capsule_dim)
        if self.return_coupling:
            return v_shape, (batch_size, in_capsules, self.num_capsules)
        return v_shape

    def get_config(self):
        base_config = super().get_config()
        config = {
            "num_capsules": self.num_capsules,
            "capsule_dim": self.capsule_dim,
            "routing_iterations": self.routing_iterations,
            "kernel_initializer": initializers.serialize(self.kernel_initializer),
            "kernel_regularizer": keras.regularizers.serialize(self.kernel_regularizer),
            "kernel_constraint": keras.constraints.serialize(self.kernel_constraint),
            "stop_gradient_votes": self.stop_gradient_votes,
            "return_coupling": self.return_coupling,
            "routing": self.routing,
            "squash": self.squash,
            "scale_agreement": self.scale_agreement,
        }
        return {**base_config, **config}

    @classmethod
    def from_config(cls, config):
        return super().from_config(legacy_scale_agreement(config))


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
