"""Capsule operations in pure `keras.ops`: squash, safe length, dynamic routing.

Indices follow Sabour et al. (2017) and `DESIGN.md`: `b` = batch, `i` = lower
(child) capsule, `j` = higher (parent) capsule, `n` = child dimension,
`m` = parent dimension.

Every function here runs unchanged on the torch, jax and tensorflow backends.
Reduced-precision inputs (float16, bfloat16) are handled by computing the
numerically delicate parts -- the squared norm in `squash` and the routing
softmax -- in float32 and casting back.
"""

import math
from collections.abc import Callable
from typing import NamedTuple

import keras
from keras import ops

from capsules_keras._checks import check_positive_int, check_positive_number

#: Added to squared norms inside the square root, so that the length and its
#: gradient stay finite at the zero vector (d sqrt(x)/dx is infinite at x = 0).
EPSILON = 1e-7

_REDUCED_PRECISION = ("float16", "bfloat16")


def _float32_if_reduced(x):
    """Upcasts float16/bfloat16 tensors to float32; leaves others unchanged."""
    if keras.backend.standardize_dtype(x.dtype) in _REDUCED_PRECISION:
        return ops.cast(x, "float32")
    return x


def safe_norm(x, axis=-1, keepdims=False, epsilon=EPSILON):
    """Euclidean length with `epsilon` inside the square root.

    `safe_norm(x) = sqrt(sum(x ** 2, axis) + epsilon)`

    Unlike `ops.norm`, its gradient is finite (zero) at the zero vector.
    Computed in float32 for float16/bfloat16 inputs and cast back.

    Args:
        x: Tensor.
        axis: Axis along which to take the length.
        keepdims: Keep the reduced axis with size 1.
        epsilon: Positive constant added under the square root.

    Returns:
        Tensor of lengths with `axis` reduced.
    """
    check_positive_number("epsilon", epsilon)
    x = ops.convert_to_tensor(x)
    squared = ops.sum(ops.square(_float32_if_reduced(x)), axis=axis, keepdims=keepdims)
    return ops.cast(ops.sqrt(squared + epsilon), x.dtype)


def squash(s, axis=-1, epsilon=EPSILON):
    """The capsule non-linearity: keeps the direction, maps the length to [0, 1).

    `squash(s) = |s|^2 / (1 + |s|^2) * s / sqrt(|s|^2 + epsilon)`

    Short vectors shrink to almost zero length, long ones to just below one.
    `epsilon` sits inside the square root, so the value and the gradient are
    finite at `s = 0` (where both are zero).

    Args:
        s: Tensor of capsule vectors.
        axis: The capsule-dimension axis.
        epsilon: Positive constant added under the square root.

    Returns:
        Tensor of the same shape and dtype as `s`.

    >>> v = squash(keras.ops.convert_to_tensor([[3.0, 4.0]]))  # |s| = 5
    >>> round(float(keras.ops.norm(v)), 5)  # 25 / 26
    0.96154

    Reference: Sabour et al. (2017), equation 1.
    """
    check_positive_number("epsilon", epsilon)
    s = ops.convert_to_tensor(s)
    s32 = _float32_if_reduced(s)
    squared_norm = ops.sum(ops.square(s32), axis=axis, keepdims=True)
    # One fused scale factor: |s|^2 / ((1 + |s|^2) * sqrt(|s|^2 + eps)).
    scale = squared_norm / ((1.0 + squared_norm) * ops.sqrt(squared_norm + epsilon))
    return ops.cast(scale * s32, s.dtype)


def exponential_squash(s, axis=-1, epsilon=EPSILON):
    """Efficient-CapsNet's squash: the length becomes `1 - exp(-|s|)`.

    `squash(s) = (1 - exp(-|s|)) * s / sqrt(|s|^2 + epsilon)`

    Unlike equation 1 of Sabour et al., which maps the length through
    `|s|^2 / (1 + |s|^2)`, it is not flat near zero: a short vector keeps a
    length close to its own, so small capsules still pass gradient.
    Finite (zero) value and gradient at `s = 0`.

    >>> v = exponential_squash(keras.ops.convert_to_tensor([[3.0, 4.0]]))
    >>> round(float(keras.ops.norm(v)), 5)  # 1 - exp(-5)
    0.99326

    Reference: Mazzia, Salvetti & Chiaberge (2021), equation 3.
    """
    check_positive_number("epsilon", epsilon)
    s = ops.convert_to_tensor(s)
    s32 = _float32_if_reduced(s)
    norm = ops.sqrt(ops.sum(ops.square(s32), axis=axis, keepdims=True) + epsilon)
    return ops.cast((1.0 - ops.exp(-norm)) / norm * s32, s.dtype)


#: The capsule non-linearities by name (`Squash(variant=...)`,
#: `DigitCaps(squash=...)`).
SQUASHES = {"sabour": squash, "exponential": exponential_squash}


def get_squash(variant):
    """The squash function named `variant` (see `SQUASHES`)."""
    if variant not in SQUASHES:
        raise ValueError(
            f"The squash variant must be one of {sorted(SQUASHES)}. "
            f"Received: {variant!r}"
        )
    return SQUASHES[variant]


class VoteLayout(NamedTuple):
    """How `dynamic_routing` lays the votes out in memory while it routes.

    The maths is the same in every layout; only the order of the axes and the
    way the two contractions are written change, because each backend's
    compiler turns them into very different kernels (see `vote_layout`).
    """

    # u_hat (b, i, j, m) -> votes in this layout; the logits and the coupling
    # coefficients drop the last axis of it.
    permutation: tuple
    # votes in this layout from W[i,j,n,m] and u[b,i,n], with no transpose of
    # the (large) result
    votes: Callable
    child_axis: int  # axis of i in the votes and logits
    parent_axis: int  # axis of j in the logits (the softmax axis)
    # s[b,j,m] = sum_i c[b,i,j] u_hat[b,i,j,m], from c and votes in this layout
    weighted_sum: Callable
    # a[b,i,j] = sum_m v[b,j,m] u_hat[b,i,j,m], returned in this layout
    agreement: Callable


def _votes_child_major(kernel, u):
    """u_hat as (i, b, j, m): one batched matmul over the children i."""
    in_caps, out_caps, in_dim, out_dim = kernel.shape
    # (i, n, j * m): the weight is small, transposing it is cheap.
    kernel = ops.reshape(
        ops.transpose(kernel, (0, 2, 1, 3)), (in_caps, in_dim, out_caps * out_dim)
    )
    # (i, b, n) @ (i, n, j * m) -> (i, b, j * m)
    votes = ops.matmul(ops.transpose(u, (1, 0, 2)), kernel)
    return ops.reshape(votes, (in_caps, -1, out_caps, out_dim))  # (i, b, j, m)


_BATCHED_MATMUL = VoteLayout(
    permutation=(0, 2, 1, 3),  # votes (b, j, i, m), logits (b, j, i)
    # (i, b, j, m) -> (b, j, i, m)
    votes=lambda kernel, u: ops.transpose(_votes_child_major(kernel, u), (1, 2, 0, 3)),
    child_axis=2,
    parent_axis=1,
    # s[b,j,:] = c[b,j,:] @ u_hat[b,j,:,:]: (b, j, 1, i) @ (b, j, i, m)
    weighted_sum=lambda c, votes: ops.squeeze(
        ops.matmul(ops.expand_dims(c, 2), votes), 2
    ),
    # a[b,j,:] = u_hat[b,j,:,:] @ v[b,j,:]: (b, j, i, m) @ (b, j, m, 1)
    agreement=lambda v, votes: ops.squeeze(
        ops.matmul(votes, ops.expand_dims(v, -1)), -1
    ),
)

_EINSUM = VoteLayout(
    permutation=(0, 2, 1, 3),  # votes (b, j, i, m), logits (b, j, i)
    votes=lambda kernel, u: ops.einsum("ijnm,bin->bjim", kernel, u),
    child_axis=2,
    parent_axis=1,
    weighted_sum=lambda c, votes: ops.einsum("bji,bjim->bjm", c, votes),
    agreement=lambda v, votes: ops.einsum("bjm,bjim->bji", v, votes),
)

_ELEMENTWISE = VoteLayout(
    permutation=(1, 0, 2, 3),  # votes (i, b, j, m), logits (i, b, j)
    votes=_votes_child_major,
    child_axis=0,
    parent_axis=2,
    # s = sum over i of c[i,b,j] * u_hat[i,b,j,m]
    weighted_sum=lambda c, votes: ops.sum(ops.expand_dims(c, -1) * votes, axis=0),
    # a = sum over m of u_hat[i,b,j,m] * v[b,j,m]
    agreement=lambda v, votes: ops.sum(votes * ops.expand_dims(v, 0), axis=-1),
)


def vote_layout():
    """The vote layout that routes fastest on the current backend.

    Backend-specific for a measured reason. DigitCaps(10, 16) on 1152 input
    capsules, forward+backward at batch 128, 2 CPU cores, as a fraction of
    labml_nn's Router time in the same process (benchmarks/README.md):

    - jax (XLA): batched matmul 0.44, einsum 0.95, elementwise 1.58;
    - tensorflow: batched matmul 0.38 (graph) / 0.26 (XLA), elementwise
      0.60 / 0.31, einsum 0.99 / 0.52;
    - torch eager: einsum with the logits as (b, j, i) 0.81 (the softmax over
      a non-last axis is 20x faster there), batched matmul 1.13, elementwise
      1.20; under torch.compile: elementwise 0.46, einsum 0.52, batched
      matmul 0.53.
    """
    if keras.backend.backend() != "torch":
        return _BATCHED_MATMUL
    import torch  # already imported by Keras' torch backend

    return _ELEMENTWISE if torch.compiler.is_compiling() else _EINSUM


def compile_routing(route):
    """`route(kernel, inputs)` compiled on its own where the step around it is not.

    Backend-specific for a measured reason. The routing layer is memory-bound
    and runs far faster compiled, but the default training step of two
    backends leaves it uncompiled: on a CPU-only tensorflow, Keras'
    `jit_compile="auto"` is a graph without XLA (and so is the trainer's
    `--jit-compile auto`: XLA differentiates the strided PrimaryCaps
    convolution about 25x slower than tensorflow's own kernels). Inside such
    a graph the routing runs here as one XLA-compiled function while the
    convolutions around it stay in the graph: DigitCaps(10, 16) on 1152
    capsules, forward+backward at batch 128, in a tensorflow graph, took
    321 ms with it and 522 ms without it on a 2-core CPU, 0.46x and 0.75x of
    labml_nn's time in the same run (benchmarks/README.md).
    Under an XLA-compiled step the function is inlined into it; eager calls
    stay eager, for debugging. jax compiles the whole step already. torch
    runs `route` as it is: `torch.compile` routes 2x faster but costs ~10 s
    per new shape or setting, which tiny runs (tests, a notebook cell) do not
    win back (benchmarks/README.md).

    Args:
        route: A function of the kernel and the input capsules (tensors).

    Returns:
        A function with the same arguments and results.
    """
    if keras.backend.backend() != "tensorflow":
        return route
    import tensorflow as tf  # already imported by Keras' tensorflow backend

    if tf.executing_eagerly():
        return route
    return tf.function(route, jit_compile=True)


def dynamic_routing(
    u_hat,
    iterations=3,
    stop_gradient_votes=False,
    return_coupling=False,
    squash_fn=squash,
):
    """Routing by agreement (Sabour et al. 2017, Procedure 1).

    ```
    b[b,i,j] = 0
    repeat `iterations` times:
        c[b,i,j] = softmax over j of b[b,i,:]    # each child's coefficients sum to 1
        s[b,j,m] = sum_i c[b,i,j] * u_hat[b,i,j,m]
        v[b,j,m] = squash(s[b,j,:])[m]
        b[b,i,j] += sum_m v[b,j,m] * u_hat[b,i,j,m]
    ```

    The routing logits `b` start at zero for every sample and are never
    learned. The logit update after the last iteration is skipped: it would
    not change the output.

    Args:
        u_hat: Predictions ("votes") of every child for every parent,
            shape `(batch_size, in_capsules, out_capsules, out_dim)`.
        iterations: Number of routing iterations `r >= 1`. The paper uses 3.
        stop_gradient_votes: If True, the votes in all but the last iteration
            are treated as constants by backpropagation, so gradients reach
            `u_hat` only through the final weighted sum. This is cheaper and
            some implementations find it trains more stably, but it is not the
            paper's procedure (which backpropagates through every iteration),
            so it is off by default.
        return_coupling: If True, also return the coupling coefficients `c`
            used in the last iteration.
        squash_fn: The non-linearity (`squash`, the paper's, or another of
            `SQUASHES`).

    Returns:
        Parent capsules `v`, shape `(batch_size, out_capsules, out_dim)`, and,
        if `return_coupling`, `c` of shape
        `(batch_size, in_capsules, out_capsules)` (float32 under mixed
        precision).
    """
    check_positive_int("iterations", iterations)
    u_hat = _check_votes(u_hat)
    layout = vote_layout()
    return route_votes(
        ops.transpose(u_hat, layout.permutation),
        layout,
        iterations,
        stop_gradient_votes,
        return_coupling,
        squash_fn,
    )


def route_votes(
    votes, layout, iterations, stop_gradient_votes, return_coupling, squash_fn=squash
):
    """`dynamic_routing` on votes already in `layout` (see `VoteLayout`).

    `DigitCaps` computes its votes straight into the layout that routes
    fastest on the backend, and calls this; the arguments are as in
    `dynamic_routing`, whose checks it skips.
    """
    num_parents = votes.shape[layout.permutation.index(2)]
    routing_votes = ops.stop_gradient(votes) if stop_gradient_votes else votes
    # The logits b_ij start at zero, so the first coupling is uniform,
    # c_ij = 1 / num_parents, and needs no softmax. Later logits accumulate
    # agreements; they stay float32 even for float16/bfloat16 votes, so the
    # softmax stays accurate.
    logits = None
    c = None
    for r in range(iterations):
        last = r == iterations - 1
        current = votes if last else routing_votes
        if logits is None:
            # s_j = sum_i u_hat_j|i / num_parents (c_ij = 1 / num_parents)
            s = ops.sum(current, axis=layout.child_axis) / num_parents  # (b, j, m)
        else:
            # c_ij = exp(b_ij) / sum_k exp(b_ik): softmax over the PARENT axis j.
            c = ops.softmax(logits, axis=layout.parent_axis)
            # s_j = sum_i c_ij u_hat_j|i
            s = layout.weighted_sum(ops.cast(c, current.dtype), current)  # (b, j, m)
        # v_j = squash(s_j)
        v = squash_fn(s)  # (b, j, m)
        if not last:
            # b_ij <- b_ij + u_hat_j|i . v_j
            agreement = ops.cast(layout.agreement(v, current), "float32")
            logits = agreement if logits is None else logits + agreement
    if not return_coupling:
        return v
    if c is None:  # a single iteration: the uniform coupling
        c = ops.full_like(votes[..., 0], 1.0 / num_parents, dtype="float32")
    # The coupling in this layout -> (b, i, j).
    inverse = [layout.permutation.index(axis) for axis in range(3)]
    return v, ops.transpose(c, inverse)


#: The routing algorithms of `DigitCaps(routing=...)`, with their default
#: number of iterations: Sabour et al.'s 3; self-attention routing is one
#: pass; 3 passes of inverted dot-product attention, the uniform one and two
#: refinements (Tsai et al.'s code counts passes the same way; its default is
#: 1 and its reported runs use 1 and 2: see `inverted_dot_product_routing`).
ROUTINGS = {"dynamic": 3, "self_attention": 1, "inverted_dot_product": 3}


def check_routing(routing, iterations=None):
    """The iteration count for `routing` (its default for None), checked."""
    if routing not in ROUTINGS:
        raise ValueError(
            f"`routing` must be one of {sorted(ROUTINGS)}. "
            f"Received: routing={routing!r}"
        )
    if iterations is None:
        return ROUTINGS[routing]
    check_positive_int("routing_iterations", iterations)
    if routing == "self_attention" and iterations != 1:
        raise ValueError(
            "Self-attention routing is one pass, not iterative: use "
            f"routing_iterations=1 (or None). Received: routing_iterations={iterations}"
        )
    return iterations


def _check_votes(u_hat):
    u_hat = ops.convert_to_tensor(u_hat)
    if len(u_hat.shape) != 4:
        raise ValueError(
            "`u_hat` must have rank 4: (batch_size, in_capsules, out_capsules, "
            f"out_dim). Received: u_hat.shape={tuple(u_hat.shape)}"
        )
    return u_hat


def _route_with(u_hat, c):
    """s[b,j,m] = sum_i c[b,i,j] u_hat[b,i,j,m], in the votes' dtype."""
    return ops.einsum("bij,bijm->bjm", ops.cast(c, u_hat.dtype), u_hat)


def _agreement(u_hat, poses):
    """a[b,i,j] = sum_m u_hat[b,i,j,m] poses[b,j,m], in float32."""
    return ops.einsum(
        "bijm,bjm->bij", _float32_if_reduced(u_hat), _float32_if_reduced(poses)
    )


def self_attention_routing(u_hat, priors=None, return_coupling=False, squash_fn=squash):
    """Self-attention routing (Mazzia et al. 2021, Efficient-CapsNet): one pass.

    ```
    A[b,i,j] = u_hat[b,i,j,:] . sum_k u_hat[b,k,j,:] / sqrt(out_dim)
    c[b,i,j] = softmax over j of A[b,i,:]      # each child's couplings sum to 1
    s[b,j,m] = sum_i (c[b,i,j] + B[i,j]) * u_hat[b,i,j,m]
    v[b,j,m] = squash(s[b,j,:])[m]
    ```

    `A` sums the self-attention matrix of the votes over its second child
    index: how much child `i`'s vote for parent `j` agrees with all votes
    for `j`, scaled as in dot-product attention. `B` are learned priors
    ("log priors" in the paper), added to the couplings as the paper's
    equation does.

    Args:
        u_hat: Votes `(batch_size, in_capsules, out_capsules, out_dim)`.
        priors: Optional `B` of shape `(in_capsules, out_capsules)`.
        return_coupling: Also return `c` (float32), `(batch_size,
            in_capsules, out_capsules)`.
        squash_fn: The non-linearity (Efficient-CapsNet uses
            `exponential_squash`).

    Returns:
        `v` `(batch_size, out_capsules, out_dim)`, and `c` if asked.

    Reference: Mazzia, Salvetti & Chiaberge (2021), "Efficient-CapsNet:
    capsule network with self-attention routing", section 3.2.
    """
    u_hat = _check_votes(u_hat)
    total = ops.sum(u_hat, axis=1)  # sum_k u_hat[b,k,j,:], (b, j, m)
    attention = _agreement(u_hat, total) / math.sqrt(u_hat.shape[-1])
    c = ops.softmax(attention, axis=2)  # over the parents j
    weights = c if priors is None else c + ops.cast(priors, c.dtype)
    v = squash_fn(_route_with(u_hat, weights))
    return (v, c) if return_coupling else v


def layer_norm(x, scale=None, offset=None, epsilon=1e-5):
    """Layer normalisation over the last axis (float32 inside).

    `(x - mean(x)) / sqrt(var(x) + epsilon) * scale + offset`
    """
    x = ops.convert_to_tensor(x)
    x32 = _float32_if_reduced(x)
    mean = ops.mean(x32, axis=-1, keepdims=True)
    variance = ops.mean(ops.square(x32 - mean), axis=-1, keepdims=True)
    y = (x32 - mean) / ops.sqrt(variance + epsilon)
    if scale is not None:
        y = y * ops.cast(scale, y.dtype)
    if offset is not None:
        y = y + ops.cast(offset, y.dtype)
    return ops.cast(y, x.dtype)


def inverted_dot_product_routing(
    u_hat,
    iterations=3,
    scale=None,
    offset=None,
    return_coupling=False,
    squash_fn=squash,
    scale_agreement=True,
):
    """Inverted dot-product attention routing (Tsai et al. 2020).

    ```
    p[b,j,m] = 0                                # the parents start from zero
    repeat `iterations` times:                  # the uniform pass included
        a[b,i,j] = sum_m u_hat[b,i,j,m] * p[b,j,m] / sqrt(out_dim)
        c[b,i,j] = softmax over j of a[b,i,:]   # uniform in the first pass
        s[b,j,m] = sum_i c[b,i,j] * u_hat[b,i,j,m]
        p[b,j,:] = LayerNorm(s[b,j,:]) * scale + offset
    v[b,j,:] = squash(s[b,j,:])
    ```

    The parents' layer-normalised poses `p` are what the children agree
    with; all parents update at once from the previous poses (the paper's
    concurrent routing, for one routed layer).

    The paper's Procedure 1 writes the agreement without a scale; the code
    that produced its numbers (`CapsuleFC.forward` in `src/layers.py` of
    yaohungt/Capsules-Inverted-Attention-Routing and its copy at
    apple/ml-capsules-inverted-attention-routing, commit 53899ae) divides it
    by `sqrt(out_dim)` before the softmax, as dot-product attention does
    (at `out_dim = 16`, logits 4x flatter). We follow the code:
    `scale_agreement=False` gives the paper's unscaled agreement, which
    capsules_keras 0.1 used (its saved `.keras` files keep it).

    Iterations count every pass, the uniform first one included, as the
    authors' `--num_routing` does (one uniform pass, then `num_routing - 1`
    refinements): their code's default is 1, the uniform pass alone; their
    README reports CIFAR-10 and CIFAR-100 runs with 1 and 2. Ours defaults to
    3 (`ROUTINGS`): the uniform pass and two refinements.

    Departures from the authors' code, each for a reason:

    - The output is the squashed `s` of the last pass, not `LayerNorm(s)`,
      so that a capsule's length stays a class probability for the margin
      loss; Tsai et al. classify the poses with a linear layer instead.
    - Vector votes `W_ij u_i` (Sabour et al.'s); their published configs
      multiply 4x4 pose matrices (`matrix_pose`).
    - One routed layer: their concurrent routing iterates several capsule
      layers together; here the layers below are not capsules.
    - No renormalisation of `c` after the softmax (their
      `c / (sum_j c + 1e-10)` changes it by at most 1e-10) and no dropout
      on the poses (their `--dp` defaults to 0).

    Args:
        u_hat: Votes `(batch_size, in_capsules, out_capsules, out_dim)`.
        iterations: Passes `>= 1`; 1 is uniform couplings.
        scale, offset: Optional LayerNorm gain and bias `(out_dim,)`.
        return_coupling: Also return `c` of the last pass (float32).
        squash_fn: The non-linearity of the output.
        scale_agreement: Divide the agreements by `sqrt(out_dim)` (the
            authors' code; the default). False: the paper's unscaled one.

    Returns:
        `v` `(batch_size, out_capsules, out_dim)`, and `c` if asked.

    Reference: Tsai, Srivastava, Goh & Salakhutdinov (2020), "Capsules with
    inverted dot-product attention routing", ICLR, Procedure 1.
    """
    check_positive_int("iterations", iterations)
    u_hat = _check_votes(u_hat)
    num_parents = u_hat.shape[2]
    divisor = math.sqrt(u_hat.shape[-1]) if scale_agreement else 1.0
    # p = 0 gives a = 0 and the uniform coupling c = 1 / num_parents.
    c = ops.full_like(u_hat[..., 0], 1.0 / num_parents, dtype="float32")
    s = _route_with(u_hat, c)  # (b, j, m)
    for _ in range(iterations - 1):
        poses = layer_norm(s, scale, offset)
        # a_ij = u_hat_j|i . p_j / sqrt(out_dim); softmax over the parents j
        c = ops.softmax(_agreement(u_hat, poses) / divisor, axis=2)
        s = _route_with(u_hat, c)
    v = squash_fn(s)
    return (v, c) if return_coupling else v


def conv2d_patches(x, kernel, strides=1, padding="valid"):
    """2-D convolution as one matrix product over extracted patches (im2col).

    `y[b, r, c, o] = sum_{dy, dx, n} x[b, r*s + dy, c*s + dx, n] * kernel[dy, dx, n, o]`

    Gives the same result as `keras.ops.conv` (channels last, no dilation).
    `PrimaryCaps` uses it where the backend's own convolution is slow: see
    the comment in `PrimaryCaps.build`.

    Args:
        x: Images `(batch_size, height, width, channels)`.
        kernel: `(kernel_height, kernel_width, channels, filters)`.
        strides: An int or a pair of ints.
        padding: `"valid"` or `"same"` (as in `keras.layers.Conv2D`).

    Returns:
        `(batch_size, out_height, out_width, filters)`.
    """
    kernel_h, kernel_w, channels, filters = kernel.shape
    stride_h, stride_w = (strides, strides) if isinstance(strides, int) else strides
    height, width = x.shape[1], x.shape[2]
    if padding == "same":
        out_h, out_w = -(-height // stride_h), -(-width // stride_w)
        pad_h = max((out_h - 1) * stride_h + kernel_h - height, 0)
        pad_w = max((out_w - 1) * stride_w + kernel_w - width, 0)
        x = ops.pad(
            x,
            [[0, 0], [pad_h // 2, pad_h - pad_h // 2], [pad_w // 2, pad_w - pad_w // 2]]
            + [[0, 0]],
        )
    elif padding == "valid":
        out_h = (height - kernel_h) // stride_h + 1
        out_w = (width - kernel_w) // stride_w + 1
    else:
        raise ValueError(
            f"`padding` must be 'valid' or 'same'. Received: padding={padding!r}"
        )
    span_h, span_w = (out_h - 1) * stride_h + 1, (out_w - 1) * stride_w + 1
    patches = ops.concatenate(
        [
            x[:, dy : dy + span_h : stride_h, dx : dx + span_w : stride_w, :]
            for dy in range(kernel_h)
            for dx in range(kernel_w)
        ],
        axis=-1,
    )  # (b, out_h, out_w, kernel_h * kernel_w * channels), (dy, dx, n) order
    flat_kernel = ops.reshape(kernel, (kernel_h * kernel_w * channels, filters))
    return ops.matmul(patches, flat_kernel)  # (b, out_h, out_w, filters)


def labels_to_one_hot(labels, num_classes, dtype="float32"):
    """Turns integer labels or one-hot rows into one-hot rows.

    Integer labels have shape `(batch_size,)` or `(batch_size, 1)`; one-hot
    (or any per-class weights) have shape `(batch_size, num_classes)` and are
    returned cast to `dtype`.

    Args:
        labels: Integer class indices or one-hot rows.
        num_classes: Number of classes (capsules).
        dtype: dtype of the result.

    Returns:
        Tensor of shape `(batch_size, num_classes)`.
    """
    shape = tuple(labels.shape)
    if len(shape) == 2 and shape[-1] == num_classes:
        return ops.cast(labels, dtype)
    if len(shape) == 2 and shape[-1] == 1:
        labels = ops.squeeze(labels, axis=-1)
    elif len(shape) != 1:
        raise ValueError(
            "Labels must be integers of shape (batch_size,) or one-hot of shape "
            f"(batch_size, {num_classes}). Received: labels.shape={shape}"
        )
    return ops.one_hot(ops.cast(labels, "int32"), num_classes, dtype=dtype)
