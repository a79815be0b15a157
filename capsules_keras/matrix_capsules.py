"""Matrix capsules with EM routing (Hinton, Sabour & Frosst 2018).

A matrix capsule is a 4x4 pose matrix `M` and an activation `a` in (0, 1).
The layers here pass capsules on a grid as ONE tensor,
`(batch_size, height, width, capsule_types, 17)`: the 16 entries of the pose
matrix row by row, then the activation (`POSE_SIZE`, `CAPSULE_SIZE`).

Indices follow the paper and `DESIGN.md`: `i` = lower (child) capsule in
`Omega_L`, `j` = higher (parent) capsule in `Omega_{L+1}`, `h` = one of the
16 pose entries. A child votes for a parent through a learned 4x4
transformation matrix, `V_ij = M_i W_ij`; EM routing then fits one Gaussian
per parent to the votes of the children (`em_routing`).

Numerical choices (made once, in `em_routing`):

- The E-step runs in log space: `log R_ij = log a_j + log p_ij -
  logsumexp_k(log a_k + log p_ik)` with `log a_j = log_sigmoid(...)`, so the
  Gaussian densities never underflow to 0 (and `R` never becomes 0/0).
- `epsilon` is added to every variance and to every `sum_i R_ij`, so that
  `log sigma` and the means stay finite when the votes agree exactly or no
  child is active (e.g. all-zero inputs).
- The cost is standardised over the parents before the logistic (see
  `em_routing`), so the activations cannot all saturate together.
- Routing is computed in float32 for float16/bfloat16 votes.

Reference: Hinton, Sabour & Frosst (2018), "Matrix capsules with EM
routing", ICLR.
"""

import math

import keras
import numpy as np
from keras import initializers, layers, ops

from capsules_keras._checks import (
    check_image_shape,
    check_positive_int,
    check_positive_number,
)
from capsules_keras.inputs import (
    PreparedInputsModel,
    is_array,
    prepare_images,
    prepare_labels,
)
from capsules_keras.ops import _float32_if_reduced, labels_to_one_hot

register = keras.saving.register_keras_serializable(package="capsules_keras")

#: Entries of a 4x4 pose matrix, stored row by row.
POSE_SIZE = 16
#: A capsule's last axis: the pose, then the activation.
CAPSULE_SIZE = POSE_SIZE + 1
#: Added to the variances and to the assignment sums (see the module doc).
EM_EPSILON = 1e-4
_LOG_2PI = math.log(2.0 * math.pi)


def _check_betas(name, beta, num_parents):
    """`beta` as a `(num_parents,)` or scalar float tensor; checks its size."""
    beta = ops.convert_to_tensor(beta)
    if len(beta.shape) > 1 or (len(beta.shape) == 1 and beta.shape[0] != num_parents):
        raise ValueError(
            f"`{name}` must be a scalar or have shape ({num_parents},), one per "
            f"parent capsule. Received: {name}.shape={tuple(beta.shape)}"
        )
    return beta


def em_routing(
    votes,
    activations,
    beta_u,
    beta_a,
    iterations=3,
    inverse_temperature=1.0,
    epsilon=EM_EPSILON,
    return_assignments=False,
):
    """EM routing between capsules (Hinton et al. 2018, Procedure 1).

    ```
    R_ij = 1 / |Omega_{L+1}|
    for t = 1 .. iterations:
        lambda = inverse_temperature * t / iterations       # grows to the final value
        M-step (for every parent j):
            R_ij <- R_ij * a_i
            mu_j^h = sum_i R_ij V_ij^h / sum_i R_ij
            (sigma_j^h)^2 = sum_i R_ij (V_ij^h - mu_j^h)^2 / sum_i R_ij
            cost_j = sum_h (beta_u + log sigma_j^h) * sum_i R_ij
            a_j = logistic(lambda (beta_a - (cost_j - mean_k cost_k) / std_k cost_k))
        E-step (for every child i; not after the last M-step):
            p_ij = prod_h exp(-(V_ij^h - mu_j^h)^2 / (2 (sigma_j^h)^2))
                          / sqrt(2 pi (sigma_j^h)^2)
            R_ij = a_j p_ij / sum_k a_k p_ik
    return mu_j (the parent poses), a_j (the parent activations)
    ```

    Two choices of this implementation (the first departs from the paper,
    the second fills in a schedule it does not give):

    - The cost `cost_j = sum_h cost^h` is standardised over the parents
      `k` of the same child group (mean 0, standard deviation 1, with
      `epsilon` under the square root), as gyang274/capsulesEM does
      (`src/capsules/core.py`, commit c3f48e6; its `epsilon` is added to
      the standard deviation instead). IBM's matrix-capsules-with-em-routing
      (`em_routing.py`, commit 2da9cdf, where the standardisation is
      commented out) and yl-1993/Matrix-Capsules-EM-PyTorch
      (`model/capsules.py`, commit ca4cd7f) use the raw cost, as the paper
      does. The paper's raw cost grows with the number of children and with
      `-log sigma`, which training can drive up for every parent at once:
      all activations then saturate at 1 and the spread loss stops
      learning (an unstandardised version of this function did so within
      3 epochs of a small test fit). Standardised, a parent is active
      when its votes fit better than its siblings'; the scale is set by
      `inverse_temperature` and the offset by `beta_a`.
    - The inverse temperature `lambda` grows linearly over the iterations,
      from `inverse_temperature / iterations` to `inverse_temperature` in
      the last M-step (the one whose activations leave the layer), so early
      E-steps weigh the parents more evenly.

    Computed in log space (the E-step's normalisation is a log-sum-exp of
    `log a_j + log p_ij`), with `epsilon` added to the variances, to
    `sum_i R_ij` and to the variance of the cost, so any number of
    iterations gives finite values and gradients, also for all-zero votes
    or activations. float16/bfloat16 inputs are routed in float32.

    Args:
        votes: `V`, `(batch_size, in_capsules, out_capsules, 16)`.
        activations: `a_i` of the children, `(batch_size, in_capsules)`.
        beta_u, beta_a: Learned cost offsets, scalars or one per parent
            `(out_capsules,)`.
        iterations: EM iterations `>= 1`; the paper uses 3.
        inverse_temperature: `lambda` of the last M-step (positive).
        epsilon: Positive constant added to variances and assignment sums.
        return_assignments: Also return `R` `(batch_size, in_capsules,
            out_capsules)` (float32) of the last M-step, before it is
            weighted by `a_i`; each child's row sums to 1.

    Returns:
        `(poses, activations)`: `mu` `(batch_size, out_capsules, 16)` and
        `a_j` `(batch_size, out_capsules)` in the votes' dtype, and `R` if
        asked.

    >>> votes = keras.ops.zeros((2, 5, 3, 16))
    >>> mu, a = em_routing(votes, keras.ops.ones((2, 5)), 0.0, 0.0)
    >>> tuple(mu.shape), tuple(a.shape)
    ((2, 3, 16), (2, 3))

    Reference: Hinton, Sabour & Frosst (2018), section 2.1 and Procedure 1.
    """
    check_positive_int("iterations", iterations)
    check_positive_number("inverse_temperature", inverse_temperature)
    check_positive_number("epsilon", epsilon)
    votes = ops.convert_to_tensor(votes)
    activations = ops.convert_to_tensor(activations)
    if len(votes.shape) != 4 or votes.shape[-1] != POSE_SIZE:
        raise ValueError(
            "`votes` must have shape (batch_size, in_capsules, out_capsules, 16). "
            f"Received: votes.shape={tuple(votes.shape)}"
        )
    if len(activations.shape) != 2 or activations.shape[1] != votes.shape[1]:
        raise ValueError(
            "`activations` must have shape (batch_size, in_capsules) with the "
            f"votes' {votes.shape[1]} input capsules. "
            f"Received: activations.shape={tuple(activations.shape)}"
        )
    num_parents = votes.shape[2]
    beta_u = _check_betas("beta_u", beta_u, num_parents)
    beta_a = _check_betas("beta_a", beta_a, num_parents)
    v = _float32_if_reduced(votes)  # V_ij^h, (b, i, j, h)
    dtype = v.dtype
    a_in = ops.expand_dims(ops.cast(activations, dtype), -1)  # a_i, (b, i, 1)
    beta_u = ops.reshape(ops.cast(beta_u, dtype), (-1, 1))  # (j, 1) or (1, 1)
    beta_a = ops.cast(beta_a, dtype)
    # R_ij = 1 / |Omega_{L+1}|
    r = ops.full_like(v[..., 0], 1.0 / num_parents)  # (b, i, j)
    for t in range(1, iterations + 1):
        inverse_temp = inverse_temperature * t / iterations
        # --- M-step ---
        # R_ij <- R_ij * a_i
        r_active = r * a_in  # (b, i, j)
        r_sum = ops.sum(r_active, axis=1)  # sum_i R_ij, (b, j)
        weights = r_active / (ops.expand_dims(r_sum, 1) + epsilon)  # (b, i, j)
        # mu_j^h = sum_i R_ij V_ij^h / sum_i R_ij
        mu = ops.einsum("bij,bijh->bjh", weights, v)  # (b, j, h)
        deviation = v - ops.expand_dims(mu, 1)  # V_ij^h - mu_j^h, (b, i, j, h)
        # (sigma_j^h)^2 = sum_i R_ij (V_ij^h - mu_j^h)^2 / sum_i R_ij
        variance = ops.einsum("bij,bijh->bjh", weights, ops.square(deviation))
        variance = variance + epsilon  # (b, j, h)
        log_sigma = 0.5 * ops.log(variance)
        # cost_j = sum_h (beta_u + log sigma_j^h) sum_i R_ij
        cost = ops.sum(beta_u + log_sigma, axis=-1) * r_sum  # (b, j)
        # ... standardised over the parents k
        cost_mean = ops.mean(cost, axis=-1, keepdims=True)
        cost_var = ops.mean(ops.square(cost - cost_mean), axis=-1, keepdims=True)
        cost = (cost - cost_mean) / ops.sqrt(cost_var + epsilon)
        # a_j = logistic(lambda (beta_a - cost_j)), as its logit
        logits = inverse_temp * (beta_a - cost)  # (b, j)
        if t == iterations:
            break
        # --- E-step ---
        # log p_ij = sum_h [-(V_ij^h - mu_j^h)^2 / (2 sigma^2) - log sigma
        #                   - log(2 pi) / 2]
        log_p = ops.sum(
            -ops.square(deviation) / (2.0 * ops.expand_dims(variance, 1))
            - ops.expand_dims(log_sigma, 1),
            axis=-1,
        ) - (0.5 * POSE_SIZE * _LOG_2PI)  # (b, i, j)
        # R_ij = a_j p_ij / sum_k a_k p_ik, normalised in log space
        log_ap = ops.expand_dims(ops.log_sigmoid(logits), 1) + log_p  # (b, i, j)
        r = ops.exp(log_ap - ops.logsumexp(log_ap, axis=2, keepdims=True))
    poses = ops.cast(mu, votes.dtype)
    parent_activations = ops.cast(ops.sigmoid(logits), votes.dtype)
    if return_assignments:
        return poses, parent_activations, r
    return poses, parent_activations


def spread_loss(y_true, y_pred, margin=0.2):
    """Per-sample spread loss, summed over the wrong classes.

    `L = sum_{i != t} max(0, m - (a_t - a_i))^2`

    The activation `a_t` of the target class must exceed every other
    activation `a_i` by the margin `m`.

    Args:
        y_true: Integer labels `(batch_size,)` or one-hot
            `(batch_size, num_classes)`.
        y_pred: Class activations `(batch_size, num_classes)`.
        margin: `m`, a number or a scalar tensor / variable.

    Returns:
        Tensor of shape `(batch_size,)`.

    Reference: Hinton, Sabour & Frosst (2018), section 3, equation 3.
    """
    y_pred = ops.convert_to_tensor(y_pred)
    targets = labels_to_one_hot(
        ops.convert_to_tensor(y_true), y_pred.shape[-1], dtype=y_pred.dtype
    )
    a_t = ops.sum(targets * y_pred, axis=-1, keepdims=True)  # (b, 1)
    margin = ops.cast(margin, y_pred.dtype)
    # max(0, m - (a_t - a_i))^2, for the wrong classes i only
    losses = (1.0 - targets) * ops.square(ops.relu(margin - (a_t - y_pred)))
    return ops.sum(losses, axis=-1)


@register
class SpreadLoss(keras.losses.Loss):
    """The spread loss of matrix capsules as a Keras `Loss`.

    `loss = mean over the batch of sum_{i != t} max(0, m - (a_t - a_i))^2`

    The paper starts with a margin of 0.2 and raises it linearly to 0.9
    during training, which avoids dead capsules in the early layers. To
    change the margin while a compiled model trains, pass a non-trainable
    `keras.Variable` as `margin` that the MODEL tracks (an attribute of the
    model; the jax backend passes only the model's variables into its
    compiled step) and raise it with `SpreadMarginSchedule`.
    `MatrixCapsNet` does both: its `spread_margin` variable is this loss's
    margin. A plain number is a fixed margin.

    Args:
        margin: `m`: a number in (0, 1], or a scalar variable.
        reduction: Keras reduction over the batch; the mean by default.
        name: Name of the loss.
        dtype: dtype of the computation.

    >>> loss = SpreadLoss(margin=0.2)
    >>> round(float(loss(keras.ops.array([0]), keras.ops.array([[0.5, 0.4]]))), 4)
    0.01

    Reference: Hinton, Sabour & Frosst (2018), section 3.
    """

    def __init__(
        self,
        margin=0.2,
        reduction="sum_over_batch_size",
        name="spread_loss",
        dtype=None,
    ):
        super().__init__(name=name, reduction=reduction, dtype=dtype)
        if not isinstance(margin, keras.Variable):
            _check_margin("margin", margin)
        self.margin = margin

    def call(self, y_true, y_pred):
        return spread_loss(y_true, y_pred, self.margin)

    def get_config(self):
        margin = float(ops.convert_to_numpy(self.margin))
        return {**super().get_config(), "margin": margin}


def _check_margin(name, value):
    check_positive_number(name, value)
    if value > 1:
        raise ValueError(
            f"`{name}` must be in (0, 1]: activations lie in (0, 1). "
            f"Received: {name}={value!r}"
        )


@register
class SpreadMarginSchedule(keras.callbacks.Callback):
    """Raises the spread-loss margin linearly, once per epoch.

    `margin(epoch) = min(stop, start + step * epoch)`    (epochs from 0)

    Sets `model.spread_margin` (a `MatrixCapsNet`'s, or any model's
    non-trainable scalar variable of that name) at the start of every epoch.
    The defaults reach the paper's final 0.9 after 7 epochs.

    Args:
        start: The margin of the first epoch (the paper's 0.2).
        stop: The largest margin (the paper's 0.9).
        step: The increase per epoch.

    >>> SpreadMarginSchedule().margin(3)
    0.5

    Reference: Hinton, Sabour & Frosst (2018), section 3.
    """

    def __init__(self, start=0.2, stop=0.9, step=0.1):
        super().__init__()
        for name, value in (("start", start), ("stop", stop)):
            _check_margin(name, value)
        check_positive_number("step", step)
        if start > stop:
            raise ValueError(
                f"`start` must not exceed `stop`. Received: start={start}, stop={stop}"
            )
        self.start, self.stop, self.step = start, stop, step

    def margin(self, epoch):
        """The margin of epoch `epoch` (counted from 0)."""
        return round(min(self.stop, self.start + self.step * epoch), 10)

    def on_epoch_begin(self, epoch, logs=None):
        variable = getattr(self.model, "spread_margin", None)
        if not isinstance(variable, keras.Variable):
            raise ValueError(
                "SpreadMarginSchedule needs a model with a `spread_margin` "
                f"variable, such as MatrixCapsNet. Received: a model of type "
                f"{type(self.model).__name__}"
            )
        variable.assign(self.margin(epoch))

    def get_config(self):
        return {"start": self.start, "stop": self.stop, "step": self.step}


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
    """`V_ij = M_i W_ij`: `(n, i, 16)` poses, `(i, j, 4, 4)` W -> `(n, i, j, 16)`."""
    num_children, num_parents = kernel.shape[:2]
    matrices = ops.reshape(poses, (-1, num_children, 4, 4))  # M_i, (n, i, 4, 4)
    # V_ij[x, z] = sum_y M_i[x, y] W_ij[y, z]
    votes = ops.einsum("nixy,ijyz->nijxz", matrices, kernel)  # (n, i, j, 4, 4)
    return ops.reshape(votes, (-1, num_children, num_parents, POSE_SIZE))


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
        return em_routing(
            votes,
            activations,
            self.beta_u,
            self.beta_a,
            self.routing_iterations if iterations is None else iterations,
            self.inverse_temperature,
            self.epsilon,
            return_assignments=return_assignments,
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
        routing_iterations: EM iterations (3).
        inverse_temperature: `lambda` of the last EM iteration (see
            `em_routing`).
        epsilon: See `em_routing`.
        kernel_initializer: Initializer of `kernel`: N(0, 0.5^2) by default.
        kernel_regularizer: Optional regularizer of `kernel`.

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
        votes = _matrix_votes(poses, kernel)  # (b * out_h * out_w, i, j, 16)
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
        routing_iterations, inverse_temperature, epsilon, kernel_initializer,
            kernel_regularizer: As in `ConvMatrixCaps`.

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
        """What coordinate addition adds to the votes, `(H * W * in_types, 1, 16)`."""
        offsets = np.zeros((height, width, in_types, 1, 4, 4), "float32")
        coordinates = cell_coordinates(height, width)[:, :, None, None]
        offsets[..., 0, 3] = coordinates[..., 0]  # the row, into V[0, 3]
        offsets[..., 1, 3] = coordinates[..., 1]  # the column, into V[1, 3]
        return offsets.reshape(height * width * in_types, 1, POSE_SIZE)

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
        votes = _matrix_votes(poses, kernel)  # (b, i, j, 16)
        if self.coordinate_addition:
            offsets = self._coordinate_offsets(height, width, in_types)
            votes = votes + ops.cast(offsets, votes.dtype)
        parent_poses, parent_activations, assignments = self._route(
            votes, activations, routing_iterations, return_assignments=True
        )
        capsules = _join_capsules(parent_poses, parent_activations)
        return capsules, assignments  # (b, classes, 17), (b, i, classes)

    def compute_output_shape(self, input_shape):
        self._grid(input_shape)
        return (input_shape[0], self.num_classes, CAPSULE_SIZE)

    def get_config(self):
        config = {
            "num_classes": self.num_classes,
            "coordinate_addition": self.coordinate_addition,
        }
        return {**super().get_config(), **config}


@register
class MatrixCapsNet(PreparedInputsModel):
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

    Two departures from the paper, both measured (benchmarks/em/README.md):

    - Batch normalisation after the first convolution (momentum 0.9, so
      that its test-time statistics settle within the short runs of the
      quick preset). Without it, the primary poses start ~10x smaller
      than the coordinates that coordinate addition puts into the class
      votes, and the votes hardly depend on the image.
    - 2 EM iterations by default (`ROUTING_ITERATIONS`), not the paper's 3:
      with 3, training predicted one class for all 60 steps of a probe
      where 2 iterations reached 76% training accuracy; the third E-step makes
      the assignments nearly hard and little gradient passes through
      them. `routing_iterations=3` remains available.

    The loss is the model's own: the spread loss with the margin held in the
    non-trainable variable `spread_margin` (0.2 at first). Raise it during
    training with the `SpreadMarginSchedule` callback (0.2 + 0.1 per epoch
    up to 0.9, the paper's range) or by assigning to the variable. `fit`,
    `evaluate` and `predict` take images and labels as `CapsNet`'s do
    (uint8 or [0, 1] floats, `(n, 28, 28)` or with the channel axis;
    integer or one-hot labels), checked by `capsules_keras.inputs`.

    Outputs:
        - `model.predict(x)` and `model(x)`: the class capsules'
          activations, `(n, num_classes)`.
        - `model.class_capsules(x)`: poses and activations,
          `(n, num_classes, 17)`.

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

    #: EM iterations of every routed layer (see the class docstring).
    ROUTING_ITERATIONS = 2

    def __init__(
        self,
        image_shape=(28, 28, 1),
        num_classes=10,
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
        self.batch_norm = layers.BatchNormalization(momentum=0.9, name="batch_norm")
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

    def analyze(self, images, batch_size=128, routing_iterations=None):
        """What the class capsules see for a few images, as NumPy arrays.

        Args:
            images: `(n, *image_shape)` images (as `predict` takes them).
            batch_size: Images per forward pass.
            routing_iterations: Route the class capsules with this many EM
                iterations instead of the model's own (the convolutional
                capsule layers keep theirs); 1 gives uniform assignments.

        Returns:
            A dict with `activations` `(n, classes)` (the class scores),
            `predictions` `(n,)`, `assignments` `(n, children, classes)`,
            the class layer's `R` of its last M-step, and
            `child_activations` `(n, children)`, the activations `a_i` that
            weigh each child's votes. `children` are the cells of the last
            convolutional capsule layer in (row, col, type) order: child
            `i` sits in grid cell `i // capsule_types[-1]`, row by row.
        """
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
        result["predictions"] = result["activations"].argmax(-1)
        return result

    def call(self, images, training=None):
        # The class scores: the activations of the class capsules.
        capsules = self.class_capsules(images, training=training)
        return ops.cast(capsules[..., POSE_SIZE], "float32")

    def compute_loss(
        self, x=None, y=None, y_pred=None, sample_weight=None, training=True
    ):
        """The spread loss with the current `spread_margin` (+ regularizers)."""
        loss = self.spread_loss(y, y_pred, sample_weight)
        if self.losses:
            loss = loss + super().compute_loss(x, y, y_pred, sample_weight, training)
        return loss

    def compile(self, optimizer="adam", loss=None, metrics=None, **kwargs):
        """Like `keras.Model.compile`; the loss is the model's spread loss.

        Args:
            optimizer: Optimizer (the paper: Adam).
            loss: Must be None (see `compute_loss`).
            metrics: Metrics on the class activations; `["accuracy"]` if None.
            **kwargs: Passed to `keras.Model.compile`.
        """
        if loss is not None:
            raise ValueError(
                "MatrixCapsNet computes its own loss (the spread loss with the "
                f"margin `spread_margin`); do not pass one. Received: loss={loss!r}"
            )
        super().compile(optimizer=optimizer, metrics=metrics or ["accuracy"], **kwargs)

    def prepare(self, x, y=None):
        """Checked, converted images and labels (see `capsules_keras.inputs`)."""
        if is_array(x):
            x = prepare_images(x, self.image_shape)
            if is_array(y):
                y = prepare_labels(y, self.num_classes, len(x))
        return x, y

    def predict(self, x, *args, **kwargs):
        """Class scores (the class capsules' activations), `(n, num_classes)`."""
        return super().predict(self.prepare(x)[0], *args, **kwargs)

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
