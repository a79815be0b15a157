"""How the votes are laid out and contracted while they are routed.

The routing maths is the same in every layout; only the order of the axes
and the way the contractions are written change, because each backend's
compiler turns them into very different kernels. Every backend-specific
choice here carries its measured reason (`vote_layout`, `compile_routing`).
"""

from collections.abc import Callable
from typing import NamedTuple

import keras
from keras import ops

from capsules_keras.ops import float32_if_reduced


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
    # g[b,i,j,m] = sum_k rows[k][b,i,j] factors[k][b,j,m] in this layout, from
    # lists of k tensors shaped as the logits and as v: the votes' gradient,
    # for routing's written-out gradient; None where autodiff's is faster
    # (see `vote_layout`).
    outer_sum: Callable = None


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


def _votes_parent_major(kernel, u):
    """u_hat as (b, j, i, m), stored in that order.

    torch's einsum returns the votes as a view of its child-major product,
    each child's votes a batch apart in memory; reshaping through
    (b, j, i * m) copies them into their own order once. On torch eager the
    routing's contractions over the children then read the votes in order:
    DigitCaps(10, 16) forward+backward at batch 128 took 186-196 ms against
    224-259 ms on the view (benchmarks/routing-written-gradient/).
    """
    in_caps, out_caps, _, out_dim = kernel.shape
    votes = ops.einsum("ijnm,bin->bjim", kernel, u)
    votes = ops.reshape(votes, (-1, out_caps, in_caps * out_dim))
    return ops.reshape(votes, (-1, out_caps, in_caps, out_dim))


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
    votes=_votes_parent_major,
    child_axis=2,
    parent_axis=1,
    weighted_sum=lambda c, votes: ops.einsum("bji,bjim->bjm", c, votes),
    agreement=lambda v, votes: ops.einsum("bjm,bjim->bji", v, votes),
    outer_sum=lambda rows, factors: ops.einsum(
        "bjik,bjkm->bjim", ops.stack(rows, -1), ops.stack(factors, 2)
    ),
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

    Only the einsum layout (torch eager) has an `outer_sum`, and so routes
    with the votes' gradient written out (`dynamic._route_with_gradient`):
    it took torch eager from 0.84 to 0.49 (366 -> 224 ms), but XLA fuses
    autodiff's passes itself, and written out it was slower there: jax
    176 -> 183 ms, tensorflow's graph 143 -> 155 ms and XLA 109 -> 122 ms
    (benchmarks/routing-written-gradient/).
    """
    if keras.backend.backend() != "torch":
        return _BATCHED_MATMUL
    import torch  # already imported by Keras' torch backend

    return _ELEMENTWISE if torch.compiler.is_compiling() else _EINSUM


def compile_routing(route):
    """`route(*tensors)` compiled on its own where the step around it is not.

    Backend-specific for a measured reason. Routing is memory-bound and runs
    far faster compiled, but the default training step of two backends
    leaves it uncompiled: on a CPU-only tensorflow, Keras'
    `jit_compile="auto"` is a graph without XLA (and so is the trainer's
    `--jit-compile auto` for the CapsNet: XLA differentiates the strided
    PrimaryCaps convolution about 25x slower than tensorflow's own kernels).
    Inside such a graph the routing runs here as one XLA-compiled function
    while the convolutions around it stay in the graph, on a 2-core CPU:

    - `DigitCaps(10, 16)` on 1152 capsules, forward+backward at batch 128:
      321 ms with it and 522 ms without it, 0.46x and 0.75x of labml_nn's
      time in the same run (benchmarks/README.md);
    - `MatrixCapsNet`'s training step (its three EM-routed layers) at batch
      32 with 2 EM iterations: 249 ms with it and 469 ms without it, where
      the whole step under XLA took 241 ms (benchmarks/em/README.md).

    Under an XLA-compiled step (`jit_compile=True`) `route` runs as it is,
    part of the step's program: nested there as a function of its own, it
    made `MatrixCapsNet`'s XLA step 7-14% slower. Eager calls stay eager,
    for debugging. jax compiles the whole step already. torch runs `route`
    as it is: `torch.compile` routes 2x faster but costs ~10 s per new shape
    or setting, which tiny runs (tests, a notebook cell) do not win back
    (benchmarks/README.md).

    Args:
        route: A function of tensors only (the weights passed as tensors,
            e.g. `variable.value`, not as variables).

    Returns:
        A function with the same arguments and results.
    """
    if keras.backend.backend() != "tensorflow":
        return route
    import tensorflow as tf  # already imported by Keras' tensorflow backend

    # tensorflow has no public test for "inside an XLA-compiled function";
    # this private one has served since tensorflow 1.x.
    from tensorflow.python.ops.control_flow_util import GraphOrParentsInXlaContext

    if tf.executing_eagerly() or GraphOrParentsInXlaContext(
        tf.compat.v1.get_default_graph()
    ):
        return route
    return tf.function(route, jit_compile=True)


def check_votes(u_hat):
    u_hat = ops.convert_to_tensor(u_hat)
    if len(u_hat.shape) != 4:
        raise ValueError(
            "`u_hat` must have rank 4: (batch_size, in_capsules, out_capsules, "
            f"out_dim). Received: u_hat.shape={tuple(u_hat.shape)}"
        )
    return u_hat


def route_with(u_hat, c):
    """s[b,j,m] = sum_i c[b,i,j] u_hat[b,i,j,m], in the votes' dtype."""
    return ops.einsum("bij,bijm->bjm", ops.cast(c, u_hat.dtype), u_hat)


def agreement(u_hat, poses):
    """a[b,i,j] = sum_m u_hat[b,i,j,m] poses[b,j,m], in float32."""
    return ops.einsum(
        "bijm,bjm->bij", float32_if_reduced(u_hat), float32_if_reduced(poses)
    )
