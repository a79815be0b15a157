"""Matrix capsule layers with EM routing (Hinton, Sabour & Frosst 2018).

A matrix capsule is a 4x4 pose matrix `M` and an activation `a` in (0, 1).
The layers here pass capsules on a grid as ONE tensor,
`(batch_size, height, width, capsule_types, 17)`: the 16 entries of the pose
matrix row by row, then the activation (`POSE_SIZE`, `CAPSULE_SIZE`).

Indices follow the paper: `i` = lower (child) capsule in
`Omega_L`, `j` = higher (parent) capsule in `Omega_{L+1}`, `h` = one of the
16 pose entries. A child votes for a parent through a learned 4x4
transformation matrix, `V_ij = M_i W_ij`; EM routing
(`capsules_keras.routing.em_routing`) then fits one Gaussian per parent to
the votes of the children.

Reference: Hinton, Sabour & Frosst (2018), "Matrix capsules with EM
routing", ICLR.
"""

import keras
import numpy as np
from keras import initializers, layers, ops

from capsules_keras._checks import check_positive_int, check_positive_number
from capsules_keras.routing._fast import compile_routing
from capsules_keras.routing.em import EM_EPSILON, POSE_SIZE, route_parent_major

register = keras.saving.register_keras_serializable(package="capsules_keras")

#: A capsule's last axis: the pose, then the activation.
CAPSULE_SIZE = POSE_SIZE + 1


def _check_capsule_grid(name, shape):
    """(height, width, types) of `(batch_size, height, width, types, 17)`."""
    shape = tuple(shape)
    if len(shape) != 5 or shape[-1] != CAPSULE_SIZE or None in shape[1:]:
        raise ValueError(
            f"{name} expects matrix capsules of shape (batch_size, height, width, "
            f"capsule_types, {CAPSULE_SIZE}) with known sizes (16 pose entries, "
            f"then the activation). Received: input_shape={shape}"
        )
    return shape[1:4]


def _split_capsules(capsules):
    """Poses `(..., 16)` and activations `(...)` of `(..., 17)` capsules."""
    return capsules[..., :POSE_SIZE], capsules[..., POSE_SIZE]


def _join_capsules(poses, activations):
    """`(..., 17)` capsules of poses `(..., 16)` and activations `(...)`."""
    activations = ops.cast(activations, poses.dtype)
    return ops.concatenate([poses, ops.expand_dims(activations, -1)], axis=-1)


def _matrix_votes(poses, kernel):
    """`V_ij = M_i W_ij`: `(n, i, 16)` poses, `(i, j, 4, 4)` W -> `(n, j, i, 16)`.

    Parent-major, the order `route_parent_major` routes them in.
    """
    num_children, num_parents = kernel.shape[:2]
    matrices = ops.reshape(poses, (-1, num_children, 4, 4))  # M_i, (n, i, 4, 4)
    # V_ij[x, z] = sum_y M_i[x, y] W_ij[y, z], (n, j, i, 4, 4)
    if keras.backend.backend() == "torch":
        # torch's einsum runs this product faster than the matrix product
        # below (docs/design-decisions.md, "Matrix-capsule votes").
        votes = ops.einsum("nixy,ijyz->njixz", matrices, kernel)
        return ops.reshape(votes, (-1, num_parents, num_children, POSE_SIZE))
    # One matrix product per child i, of its (n x, y) rows of M with its
    # (y, j z) columns of W, then transposed to parent-major. Written out,
    # this product and its gradient are laid out once each by XLA, where
    # an einsum's were transposed several times, and tensorflow's graph runs
    # it faster too (docs/design-decisions.md, "Matrix-capsule votes").
    rows = ops.reshape(ops.transpose(matrices, (1, 0, 2, 3)), (num_children, -1, 4))
    columns = ops.reshape(
        ops.transpose(kernel, (0, 2, 1, 3)), (num_children, 4, num_parents * 4)
    )
    products = ops.reshape(
        ops.matmul(rows, columns), (num_children, -1, 4, num_parents, 4)
    )  # (i, n, x, j, z)
    votes = ops.transpose(products, (1, 3, 0, 2, 4))
    return ops.reshape(votes, (-1, num_parents, num_children, POSE_SIZE))


class _EMRoutingLayer(layers.Layer):
    """What the routed matrix-capsule layers share: W, beta_u, beta_a, routing."""

    #: Votes should keep about the scale of the poses: each vote entry sums 4
    #: products M[x, y] W[y, z], so W ~ N(0, 0.5^2) keeps their variance.
    DEFAULT_KERNEL_INITIALIZER = {
        "class_name": "RandomNormal",
        "config": {"mean": 0.0, "stddev": 0.5, "seed": None},
    }

    def __init__(
        self,
        routing_iterations=3,
        inverse_temperature=1.0,
        epsilon=EM_EPSILON,
        kernel_initializer=None,
        kernel_regularizer=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int("routing_iterations", routing_iterations)
        check_positive_number("inverse_temperature", inverse_temperature)
        check_positive_number("epsilon", epsilon)
        self.routing_iterations = routing_iterations
        self.inverse_temperature = inverse_temperature
        self.epsilon = epsilon
        self.kernel_initializer = initializers.get(
            kernel_initializer or self.DEFAULT_KERNEL_INITIALIZER
        )
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)

    def _add_routing_weights(self, kernel_shape, num_parents):
        # W_ij: one 4x4 transformation matrix per (child, parent) type pair.
        self.kernel = self.add_weight(
            name="kernel",
            shape=(*kernel_shape, 4, 4),
            initializer=self.kernel_initializer,
            regularizer=self.kernel_regularizer,
        )
        self.beta_u = self.add_weight(
            name="beta_u", shape=(num_parents,), initializer="zeros"
        )
        self.beta_a = self.add_weight(
            name="beta_a", shape=(num_parents,), initializer="zeros"
        )

    def _route(self, votes, activations, iterations=None, return_assignments=False):
        """EM routing of parent-major votes `(n, j, i, 16)` (`_matrix_votes`)."""
        iterations = self.routing_iterations if iterations is None else iterations

        def route(votes, activations, beta_u, beta_a):
            return route_parent_major(
                votes,
                activations,
                beta_u,
                beta_a,
                iterations,
                self.inverse_temperature,
                self.epsilon,
                return_assignments=return_assignments,
            )

        # Compiled on its own where the training step around it is not.
        return compile_routing(route)(
            votes, activations, self.beta_u.value, self.beta_a.value
        )

    def get_config(self):
        config = {
            "routing_iterations": self.routing_iterations,
            "inverse_temperature": self.inverse_temperature,
            "epsilon": self.epsilon,
            "kernel_initializer": initializers.serialize(self.kernel_initializer),
            "kernel_regularizer": keras.regularizers.serialize(self.kernel_regularizer),
        }
        return {**super().get_config(), **config}


@register
class PrimaryMatrixCaps(layers.Layer):
    """Matrix capsules from a feature map: two convolutions per capsule type.

    ```
    M = reshape(conv2d(x, W_pose), (..., capsule_types, 16))   # 4x4 poses
    a = sigmoid(conv2d(x, W_activation))                       # (..., capsule_types)
    capsules = concatenate([M, a[..., None]], axis=-1)
    ```

    Args:
        capsule_types: Capsule types per grid cell (the paper's B = 32).
        kernel_size: Convolution window (the paper's 1x1).
        strides: Convolution strides.
        padding: `"valid"` or `"same"`.
        kernel_initializer: Initializer of both convolution kernels.
        kernel_regularizer: Optional regularizer of both kernels.

    Input shape:
        `(batch_size, height, width, channels)`, channels last.

    Output shape:
        `(batch_size, H', W', capsule_types, 17)`: 16 pose entries (row by
        row), then the activation.

    >>> x = keras.ops.ones((2, 12, 12, 32))
    >>> tuple(PrimaryMatrixCaps(8)(x).shape)
    (2, 12, 12, 8, 17)

    Reference: Hinton, Sabour & Frosst (2018), section 3 and Figure 1.
    """

    def __init__(
        self,
        capsule_types=32,
        kernel_size=1,
        strides=1,
        padding="valid",
        kernel_initializer="glorot_uniform",
        kernel_regularizer=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int("capsule_types", capsule_types)
        self.capsule_types = capsule_types
        conv = {
            "kernel_size": kernel_size,
            "strides": strides,
            "padding": padding,
            "kernel_initializer": kernel_initializer,
            "kernel_regularizer": kernel_regularizer,
            "dtype": self.dtype_policy,
        }
        self.pose_conv = layers.Conv2D(capsule_types * POSE_SIZE, name="pose", **conv)
        self.activation_conv = layers.Conv2D(capsule_types, name="activation", **conv)

    def _check(self, input_shape):
        if len(input_shape) != 4 or None in tuple(input_shape)[1:]:
            raise ValueError(
                "PrimaryMatrixCaps expects feature maps of shape (batch_size, "
                "height, width, channels) with known sizes. "
                f"Received: input_shape={tuple(input_shape)}"
            )

    def build(self, input_shape):
        self._check(input_shape)
        self.pose_conv.build(input_shape)
        self.activation_conv.build(input_shape)

    def call(self, inputs):
        self._check(inputs.shape)
        poses = self.pose_conv(inputs)  # (b, H', W', types * 16)
        _, height, width, _ = poses.shape
        # (b, H', W', types, 16)
        poses = ops.reshape(poses, (-1, height, width, self.capsule_types, POSE_SIZE))
        activations = ops.sigmoid(self.activation_conv(inputs))  # (b, H', W', types)
        return _join_capsules(poses, activations)

    def compute_output_shape(self, input_shape):
        self._check(input_shape)
        batch_size, height, width, _ = self.activation_conv.compute_output_shape(
            input_shape
        )
        return (batch_size, height, width, self.capsule_types, CAPSULE_SIZE)

    def get_config(self):
        conv = self.pose_conv
        config = {
            "capsule_types": self.capsule_types,
            "kernel_size": conv.kernel_size,
            "strides": conv.strides,
            "padding": conv.padding,
            "kernel_initializer": initializers.serialize(conv.kernel_initializer),
            "kernel_regularizer": keras.regularizers.serialize(conv.kernel_regularizer),
        }
        return {**super().get_config(), **config}


@register
class ConvMatrixCaps(_EMRoutingLayer):
    """A convolutional matrix-capsule layer with EM routing.

    ```
    for every output cell (r, c):
        children i = the K x K x B capsules at cells (r*s + dy, c*s + dx)
        V_ij = M_i W[dy, dx, type(i), j]                  # the same W at every cell
        M_j, a_j = em_routing(V, a_i, beta_u, beta_a)    # j = 1 .. capsule_types
    ```

    Routing runs in each K x K window on its own ("valid" padding): a child
    in several overlapping windows is routed in each of them separately, the
    usual simplification of the paper's procedure (where each child's
    assignments sum to 1 over all the parents it reaches).

    Args:
        capsule_types: Output capsule types per cell (the paper's C, D = 32).
        kernel_size: `K`, an int (the paper's 3).
        strides: `s`, an int (the paper's 2, then 1).
        **kwargs: The routing's settings, `routing_iterations` (EM
            iterations, 3), `inverse_temperature` (`lambda` of the last EM
            iteration, see `em_routing`) and `epsilon` (see `em_routing`);
            `kernel_initializer` (N(0, 0.5^2) by default) and
            `kernel_regularizer` of `kernel`; and `keras.layers.Layer`'s.

    Input shape:
        `(batch_size, height, width, in_types, 17)`.

    Output shape:
        `(batch_size, (height - K) // s + 1, (width - K) // s + 1,
        capsule_types, 17)`.

    Weights: `kernel` `(K, K, in_types, capsule_types, 4, 4)`, and `beta_u`,
    `beta_a` `(capsule_types,)`.

    >>> x = keras.ops.ones((2, 12, 12, 8, 17))
    >>> tuple(ConvMatrixCaps(16, kernel_size=3, strides=2)(x).shape)
    (2, 5, 5, 16, 17)

    Reference: Hinton, Sabour & Frosst (2018), section 3 and Figure 1.
    """

    def __init__(self, capsule_types=32, kernel_size=3, strides=1, **kwargs):
        super().__init__(**kwargs)
        for name, value in (
            ("capsule_types", capsule_types),
            ("kernel_size", kernel_size),
            ("strides", strides),
        ):
            check_positive_int(name, value)
        self.capsule_types = capsule_types
        self.kernel_size = kernel_size
        self.strides = strides

    def _output_grid(self, input_shape):
        height, width, in_types = _check_capsule_grid("ConvMatrixCaps", input_shape)
        if min(height, width) < self.kernel_size:
            raise ValueError(
                f"ConvMatrixCaps' {self.kernel_size}x{self.kernel_size} window "
                f"does not fit in the input grid. Received: input_shape="
                f"{tuple(input_shape)}"
            )
        if self.built and in_types != self.kernel.shape[2]:
            raise ValueError(
                f"ConvMatrixCaps was built for {self.kernel.shape[2]} input "
                f"capsule types. Received: input_shape={tuple(input_shape)}"
            )
        size, stride = self.kernel_size, self.strides
        return (height - size) // stride + 1, (width - size) // stride + 1, in_types

    def build(self, input_shape):
        _, _, in_types = self._output_grid(input_shape)
        size = self.kernel_size
        self._add_routing_weights(
            (size, size, in_types, self.capsule_types), self.capsule_types
        )

    def call(self, inputs):
        out_h, out_w, in_types = self._output_grid(inputs.shape)
        size, stride = self.kernel_size, self.strides
        span_h, span_w = (out_h - 1) * stride + 1, (out_w - 1) * stride + 1
        # The K x K windows, (dy, dx) in row-major order:
        # (b, out_h, out_w, K * K, in_types, 17)
        windows = ops.stack(
            [
                inputs[:, dy : dy + span_h : stride, dx : dx + span_w : stride]
                for dy in range(size)
                for dx in range(size)
            ],
            axis=3,
        )
        num_children = size * size * in_types
        # (b * out_h * out_w, K * K * in_types, 17): children i in (dy, dx, type) order
        children = ops.reshape(windows, (-1, num_children, CAPSULE_SIZE))
        poses, activations = _split_capsules(children)
        kernel = ops.reshape(
            ops.cast(self.kernel, poses.dtype),
            (num_children, self.capsule_types, 4, 4),
        )  # W_ij, (i, j, 4, 4)
        votes = _matrix_votes(poses, kernel)  # (b * out_h * out_w, j, i, 16)
        parent_poses, parent_activations = self._route(votes, activations)
        capsules = _join_capsules(parent_poses, parent_activations)  # (n, j, 17)
        # (b, out_h, out_w, capsule_types, 17)
        return ops.reshape(
            capsules, (-1, out_h, out_w, self.capsule_types, CAPSULE_SIZE)
        )

    def compute_output_shape(self, input_shape):
        out_h, out_w, _ = self._output_grid(input_shape)
        return (input_shape[0], out_h, out_w, self.capsule_types, CAPSULE_SIZE)

    def get_config(self):
        config = {
            "capsule_types": self.capsule_types,
            "kernel_size": self.kernel_size,
            "strides": self.strides,
        }
        return {**super().get_config(), **config}


def cell_coordinates(height, width):
    """The scaled centre `((row + 0.5) / height, (col + 0.5) / width)` of each cell.

    Returns:
        A float32 NumPy array `(height, width, 2)`.
    """
    rows = (np.arange(height, dtype="float32") + 0.5) / height
    cols = (np.arange(width, dtype="float32") + 0.5) / width
    return np.stack(np.meshgrid(rows, cols, indexing="ij"), axis=-1)


@register
class ClassMatrixCaps(_EMRoutingLayer):
    """Class capsules: every child votes through a W shared across positions.

    ```
    V_ij = M_i W[type(i), j]                       # the same W at every cell
    V_ij[0, 3] += (row(i) + 0.5) / height          # coordinate addition
    V_ij[1, 3] += (col(i) + 0.5) / width
    M_j, a_j = em_routing(V, a_i, beta_u, beta_a)  # j = 1 .. num_classes
    ```

    With coordinate addition, the scaled position of the child's cell is
    added to the first two elements of the right-most column of its vote
    (the translation part of a pose), as the paper does, so the class
    poses keep where their parts are. The scaled coordinate is the centre
    of the cell in the input grid, in (0, 1).

    Args:
        num_classes: Output capsules, one per class.
        coordinate_addition: Add the cell coordinates to the votes (True).
        **kwargs: As in `ConvMatrixCaps` (the routing's settings, the
            kernel's initializer and regularizer, `keras.layers.Layer`'s).

    Input shape:
        `(batch_size, height, width, in_types, 17)`.

    Output shape:
        `(batch_size, num_classes, 17)`; the class score is the activation,
        `[..., 16]`.

    Weights: `kernel` `(in_types, num_classes, 4, 4)`, and `beta_u`,
    `beta_a` `(num_classes,)`.

    >>> x = keras.ops.ones((2, 3, 3, 16, 17))
    >>> tuple(ClassMatrixCaps(10)(x).shape)
    (2, 10, 17)

    Reference: Hinton, Sabour & Frosst (2018), section 3 ("Coordinate
    Addition").
    """

    def __init__(self, num_classes=10, coordinate_addition=True, **kwargs):
        super().__init__(**kwargs)
        check_positive_int("num_classes", num_classes)
        self.num_classes = num_classes
        self.coordinate_addition = bool(coordinate_addition)

    def _grid(self, input_shape):
        height, width, in_types = _check_capsule_grid("ClassMatrixCaps", input_shape)
        if self.built and in_types != self.kernel.shape[0]:
            raise ValueError(
                f"ClassMatrixCaps was built for {self.kernel.shape[0]} input "
                f"capsule types. Received: input_shape={tuple(input_shape)}"
            )
        return height, width, in_types

    def build(self, input_shape):
        _, _, in_types = self._grid(input_shape)
        self._add_routing_weights((in_types, self.num_classes), self.num_classes)

    def _coordinate_offsets(self, height, width, in_types):
        """What coordinate addition adds to the votes, `(1, H * W * in_types, 16)`."""
        offsets = np.zeros((height, width, in_types, 1, 4, 4), "float32")
        coordinates = cell_coordinates(height, width)[:, :, None, None]
        offsets[..., 0, 3] = coordinates[..., 0]  # the row, into V[0, 3]
        offsets[..., 1, 3] = coordinates[..., 1]  # the column, into V[1, 3]
        return offsets.reshape(1, height * width * in_types, POSE_SIZE)

    def call(self, inputs):
        return self.route(inputs)[0]

    def route(self, inputs, routing_iterations=None):
        """The class capsules and the assignments `R` that routed them.

        Args:
            inputs: Capsules `(batch_size, height, width, in_types, 17)`.
            routing_iterations: Route with this many EM iterations instead
                of the layer's own.

        Returns:
            `(capsules, assignments)`: `(batch_size, num_classes, 17)` as
            `call` gives them, and `R` `(batch_size, height * width *
            in_types, num_classes)` (float32) of the last M-step, each
            child's row summing to 1 (uniform after one iteration);
            children in (row, col, type) order.
        """
        height, width, in_types = self._grid(inputs.shape)
        num_children = height * width * in_types
        # (b, H * W * in_types, 17): children in (row, col, type) order
        children = ops.reshape(inputs, (-1, num_children, CAPSULE_SIZE))
        poses, activations = _split_capsules(children)
        kernel = ops.cast(self.kernel, poses.dtype)
        kernel = ops.tile(kernel, (height * width, 1, 1, 1))  # W_ij, (i, j, 4, 4)
        votes = _matrix_votes(poses, kernel)  # (b, j, i, 16)
        if self.coordinate_addition:
            offsets = self._coordinate_offsets(height, width, in_types)
            votes = votes + ops.cast(offsets, votes.dtype)
        parent_poses, parent_activations, assignments = self._route(
            votes, activations, routing_iterations, return_assignments=True
        )
        capsules = _join_capsules(parent_poses, parent_activations)
        # (b, classes, 17), (b, i, classes)
        return capsules, ops.transpose(assignments, (0, 2, 1))

    def compute_output_shape(self, input_shape):
        self._grid(input_shape)
        return (input_shape[0], self.num_classes, CAPSULE_SIZE)

    def get_config(self):
        config = {
            "num_classes": self.num_classes,
            "coordinate_addition": self.coordinate_addition,
        }
        return {**super().get_config(), **config}
