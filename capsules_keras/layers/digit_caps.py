"""`DigitCaps`: a capsule layer with routing between its inputs and outputs."""

import keras
from keras import InputSpec, initializers, layers, ops

from capsules_keras._checks import check_positive_int, check_rank
from capsules_keras.ops import get_squash
from capsules_keras.routing import (
    DEFAULT_ROUTING,
    ROUTINGS,
    check_routing,
    get_routing,
)


def _check_options(routing, **options):
    """Refuses a routing option (`name=(value, default)`) `routing` ignores."""
    for name, (value, default) in options.items():
        if value != default and name not in get_routing(routing).options:
            takers = [key for key, spec in ROUTINGS.items() if name in spec.options]
            raise ValueError(
                f"`{name}` applies to routing={' or '.join(map(repr, takers))} only. "
                f"Received: routing={routing!r}, {name}={value}"
            )


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


@keras.saving.register_keras_serializable(package="capsules_keras")
class DigitCaps(layers.Layer):
    """A capsule layer with routing between its inputs and outputs.

    ```
    u_hat[b,i,j,m] = sum_n kernel[i,j,n,m] * u[b,i,n]
    v = dynamic_routing(u_hat, routing_iterations)     # routing="dynamic"
    ```

    Every child capsule `i` predicts every parent `j` through its own matrix
    `kernel[i, j]`; routing then decides how much of each prediction reaches
    each parent. `routing` picks the algorithm (`capsules_keras.routing`):

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
    # has useful gradients (docs/design-decisions.md, "Class-capsule
    # initializer", compares it with 0.01 and 0.1).
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
        routing=DEFAULT_ROUTING,
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
        _check_options(
            routing,
            stop_gradient_votes=(stop_gradient_votes, False),
            scale_agreement=(scale_agreement, True),
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
        # Keras refuses, before `call`, inputs of another shape than these.
        self.input_spec = InputSpec(ndim=3, axes={1: in_capsules, 2: in_dim})
        self.kernel = self.add_weight(
            name="kernel",
            shape=(in_capsules, self.num_capsules, in_dim, self.capsule_dim),
            initializer=self.kernel_initializer,
            regularizer=self.kernel_regularizer,
            constraint=self.kernel_constraint,
        )
        # The routing's own weights, in the order its `Routing` lists them.
        for weight in get_routing(self.routing).weights:
            setattr(
                self,
                weight.name,
                self.add_weight(
                    name=weight.name,
                    shape=weight.shape(
                        in_capsules, self.num_capsules, self.capsule_dim
                    ),
                    initializer=weight.initializer,
                ),
            )

    def votes(self, inputs):
        """The predictions `u_hat` of every input capsule for every output one.

        Args:
            inputs: `(batch_size, in_capsules, in_dim)`.

        Returns:
            `u_hat` of shape `(batch_size, in_capsules, num_capsules,
            capsule_dim)`, ready for `capsules_keras.routing.dynamic_routing`.
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
        routing = get_routing(self.routing)
        return routing.function(
            u_hat,
            return_coupling=return_coupling,
            squash_fn=self.squash_fn,
            **self._routing_arguments(routing, iterations),
        )

    def _routing_arguments(self, routing, iterations):
        """The weights, options and iteration count `routing` is passed."""
        arguments = {w.argument: getattr(self, w.name) for w in routing.weights}
        arguments.update({name: getattr(self, name) for name in routing.options})
        if routing.iterations is not None:
            arguments["iterations"] = iterations
        return arguments

    def call(self, inputs):
        routing = get_routing(self.routing)
        if routing.fast is None:
            return self.route(self.votes(inputs))
        # The line above, faster: the votes made straight into the memory
        # layout that routes fastest on this backend (`routing._fast`, equal
        # in values and gradients). `.value`: the kernel as a tensor, cast to
        # the compute dtype under mixed precision.
        return routing.fast(
            self.kernel.value,
            inputs,
            return_coupling=self.return_coupling,
            squash=self.squash,
            **self._routing_arguments(routing, self.routing_iterations),
        )

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
