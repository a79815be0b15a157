"""Faster paths to `DigitCaps`'s routing, each tested equal to the reference.

`dynamic_routing` (routing/dynamic.py) is the paper's loop, and the
definition. `fast_dynamic_routing` computes the same values and gradients
from the layer's kernel and inputs, on the path that this backend runs
fastest; it is the one function here that picks a path:

- the votes are made straight into the memory layout that routes fastest
  on the backend (`vote_layout`), never transposed once made;
- where autodiff of the routing loop is slow, the votes' gradient is written
  out (`_route_with_gradient`);
- where the training step around it is not compiled, the routing is
  compiled on its own (`compile_routing`, which the matrix-capsule layers
  use too).

Every choice is backend-specific for a measured reason; the measurements,
machines and commands are on docs/design-decisions.md. tests/test_fast_routing.py
holds every path equal to `dynamic_routing` in values and gradients.
"""

from collections.abc import Callable
from typing import NamedTuple

import keras
from keras import ops

from capsules_keras.ops import EPSILON, float32_if_reduced, get_squash


def fast_dynamic_routing(
    kernel,
    inputs,
    iterations=3,
    stop_gradient_votes=False,
    return_coupling=False,
    squash="sabour",
):
    """`dynamic_routing` of the votes `einsum("ijnm,bin->bijm", kernel, inputs)`.

    Args:
        kernel: `W[i,j,n,m]`, shape `(in_capsules, out_capsules, in_dim,
            out_dim)`, as a tensor (a compiled function cannot take a Keras
            variable).
        inputs: The child capsules `u[b,i,n]`.
        iterations, stop_gradient_votes, return_coupling: As in
            `dynamic_routing`.
        squash: The squash's name in `capsules_keras.ops.SQUASHES`.

    Returns:
        `v`, or `(v, c)`, exactly as `dynamic_routing` returns them.
    """
    layout = vote_layout()

    def route(kernel, inputs):
        votes = layout.votes(kernel, inputs)
        return route_votes(
            votes, layout, iterations, stop_gradient_votes, return_coupling, squash
        )

    return compile_routing(route)(kernel, inputs)


class VoteLayout(NamedTuple):
    """How the votes are laid out in memory, and contracted, while routed.

    The maths is that of `dynamic_routing` in every layout; only the order of
    the axes and the way the two contractions are written change, because
    each backend's compiler turns them into very different kernels.
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
    # lists of k tensors shaped as the logits and as v: the votes' gradient
    # for `_route_with_gradient`; None where autodiff's is the faster.
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
    (b, j, i * m) copies them into their own order once, so that the
    routing's contractions over the children read them in order
    (docs/design-decisions.md, "Vote layouts").
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

    Backend-specific for a measured reason (docs/design-decisions.md,
    "Vote layouts"): XLA (jax, tensorflow) runs batched matrix products
    fastest; torch eager runs einsums over parent-major votes fastest (its
    softmax over a non-last axis is slow), with the votes' gradient written
    out; under torch.compile the elementwise layout fuses best.
    """
    if keras.backend.backend() != "torch":
        return _BATCHED_MATMUL
    import torch  # already imported by Keras' torch backend

    return _ELEMENTWISE if torch.compiler.is_compiling() else _EINSUM


def compile_routing(route):
    """`route(*tensors)` compiled on its own where the step around it is not.

    Backend-specific for a measured reason (docs/design-decisions.md,
    "Compiled routing"): routing is memory-bound and runs far faster
    compiled, but a CPU-only tensorflow trains the capsule models in a
    graph without XLA (XLA differentiates their strided convolutions
    slowly), so inside such a graph the routing alone runs XLA-compiled.
    Under an XLA-compiled step `route` stays part of the step's program
    (nested as a function of its own it was slower); eager calls stay eager,
    for debugging; jax compiles the whole step already; torch runs `route`
    as it is (torch.compile's cost per new shape is not won back by short
    runs).

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


def route_votes(
    votes, layout, iterations, stop_gradient_votes, return_coupling, squash="sabour"
):
    """`dynamic_routing` on votes already in `layout`, the squash by name.

    The votes' gradient is written out where the layout has an `outer_sum`
    and the squash a written derivative; autodiff takes it elsewhere.
    """
    squash_fn = get_squash(squash)
    if layout.outer_sum is None or squash not in _SQUASH_SCALES:
        routing_votes = ops.stop_gradient(votes) if stop_gradient_votes else votes
        couplings, _, outputs = _iterate(
            votes, routing_votes, layout, iterations, squash_fn
        )
        v, c = outputs[-1], couplings[-1]
    else:
        v, c = _route_with_gradient(
            votes, layout, iterations, stop_gradient_votes, return_coupling, squash
        )
    if not return_coupling:
        return v
    if c is None:  # a single iteration: the uniform coupling
        c = _uniform_coupling(votes, layout)
    # The coupling in this layout -> (b, i, j).
    inverse = [layout.permutation.index(axis) for axis in range(3)]
    return v, ops.transpose(c, inverse)


def _uniform_coupling(votes, layout):
    """c_ij = 1 / num_parents, shaped as the logits in `layout`."""
    num_parents = votes.shape[layout.permutation.index(2)]
    return ops.full_like(votes[..., 0], 1.0 / num_parents, dtype="float32")


def _iterate(votes, routing_votes, layout, iterations, squash_fn):
    """`dynamic_routing`'s loop in `layout`: per iteration, the coupling `c`
    (None for the first, uniform one), the parents' inputs `s` and their
    outputs `v`; `routing_votes` in all but the last iteration.

    The first coupling is uniform, so it skips the softmax and the weighted
    sum is a plain sum.
    """
    num_parents = votes.shape[layout.permutation.index(2)]
    couplings, inputs, outputs = [], [], []
    logits = None
    c = None
    for r in range(iterations):
        last = r == iterations - 1
        current = votes if last else routing_votes
        if logits is None:
            # s_j = sum_i u_hat_j|i / num_parents (c_ij = 1 / num_parents)
            s = ops.sum(current, axis=layout.child_axis) / num_parents  # (b, j, m)
        else:
            # c_ij = softmax_j(b_ij)
            c = ops.softmax(logits, axis=layout.parent_axis)
            # s_j = sum_i c_ij u_hat_j|i
            s = layout.weighted_sum(ops.cast(c, current.dtype), current)  # (b, j, m)
        v = squash_fn(s)  # (b, j, m)
        couplings.append(c)
        inputs.append(s)
        outputs.append(v)
        if not last:
            # b_ij <- b_ij + u_hat_j|i . v_j (float32, as in `dynamic_routing`)
            agreement = ops.cast(layout.agreement(v, current), "float32")
            logits = agreement if logits is None else logits + agreement
    return couplings, inputs, outputs


def _route_with_gradient(
    votes, layout, iterations, stop_gradient_votes, return_coupling, squash
):
    """`v` and `c` of `_iterate`'s last iteration, the votes' gradient
    written out; `c` is None unless `return_coupling` and `iterations > 1`.

    Autodiff takes the votes' gradient one operation at a time: every
    contraction with the votes (a weighted sum or an agreement per
    iteration) adds an outer product of the votes' size, and the sums of
    those are more passes over the votes. Routing is memory-bound, so the
    passes are its time. Backward through the iterations `t = r, ..., 1`:

    ```
    g_s_t = squash'(s_t) g_v_t                  g_v_r: the upstream gradient
    g_c_t = sum_m u_hat g_s_t                   (t > 1)
    g_a_{t-1} = sum_{t' >= t} softmax'(c_t') g_c_t'
    g_v_{t-1} = sum_i g_a_{t-1} u_hat
    g_u_hat[b,i,j,m] = sum_t c_t[b,i,j] g_s_t[b,j,m] + sum_{t<r} g_a_t[b,i,j] v_t[b,j,m]
    ```

    The last line is one batched product with `2r - 1` terms instead of
    `2r - 1` outer products and their sums. With `stop_gradient_votes` only
    the last iteration's term reaches the votes. A returned coupling `c_r`
    adds its upstream gradient to `g_c_r`.

    torch's custom gradient takes one output, so `v` and `c_r` leave packed
    side by side in float32 (`c` in this layout shares the leading `(b, j)`
    axes of `v`).
    """
    size = votes.shape[-1]
    packed = return_coupling and iterations > 1
    squash_fn = get_squash(squash)
    scale = _SQUASH_SCALES[squash]

    @ops.custom_gradient
    def forward(votes):
        couplings, inputs, outputs = _iterate(
            votes, votes, layout, iterations, squash_fn
        )

        def gradient(*args, upstream=None):
            if upstream is None:  # jax and tensorflow pass it by position
                (upstream,) = args
            rows, factors = [], []
            g_v = upstream[..., :size] if packed else upstream
            g_logits = None  # g_a_{t-1}: the gradient of the logits of t
            for t in reversed(range(iterations)):
                c = couplings[t]
                g_s = _squash_gradient(scale, inputs[t], g_v)
                rows.append(_uniform_coupling(votes, layout) if c is None else c)
                factors.append(g_s)
                if c is None or stop_gradient_votes:
                    break
                g_c = ops.cast(
                    layout.agreement(ops.cast(g_s, votes.dtype), votes), "float32"
                )
                if packed and t == iterations - 1:
                    g_c = g_c + ops.cast(upstream[..., size:], "float32")
                # The softmax over the parents, backward.
                g_c = c * (
                    g_c - ops.sum(c * g_c, axis=layout.parent_axis, keepdims=True)
                )
                g_logits = g_c if g_logits is None else g_logits + g_c
                # a_{t-1} = u_hat . v_{t-1}, backward.
                g_v = layout.weighted_sum(ops.cast(g_logits, votes.dtype), votes)
                rows.append(g_logits)
                factors.append(outputs[t - 1])
            dtype = votes.dtype
            return layout.outer_sum(
                [ops.cast(row, dtype) for row in rows],
                [ops.cast(factor, dtype) for factor in factors],
            )

        if not packed:
            return outputs[-1], gradient
        v = ops.cast(outputs[-1], "float32")
        return ops.concatenate([v, couplings[-1]], axis=-1), gradient

    if not packed:
        return forward(votes), None
    both = forward(votes)
    return ops.cast(both[..., :size], votes.dtype), both[..., size:]


def _squash_gradient(scale, s, g_v):
    """`g_s` of a squash `v = f(q) s`, `q = |s|^2`, over the last axis, float32.

    `g_s = f(q) g_v + 2 f'(q) (g_v . s) s`, with `scale(q) -> (f, f')`.
    """
    s, g_v = float32_if_reduced(s), float32_if_reduced(g_v)
    f, derivative = scale(ops.sum(ops.square(s), axis=-1, keepdims=True))
    g_length = 2.0 * derivative * ops.sum(g_v * s, axis=-1, keepdims=True)
    return f * g_v + g_length * s


def _sabour_scale(q):
    """`squash`'s scale f(q) = q / ((1 + q) sqrt(q + eps)) and df/dq."""
    inverse = 1.0 / ((1.0 + q) * ops.sqrt(q + EPSILON))
    f = q * inverse
    return f, inverse - f / (1.0 + q) - 0.5 * f / (q + EPSILON)


def _exponential_scale(q):
    """`exponential_squash`'s f(q) = (1 - exp(-n)) / n, n = sqrt(q + eps), and df/dq."""
    norm = ops.sqrt(q + EPSILON)
    decay = ops.exp(-norm)
    f = (1.0 - decay) / norm
    return f, (decay - f) / (2.0 * (q + EPSILON))


#: The squashes (by their name in `SQUASHES`) whose derivative is written out.
_SQUASH_SCALES = {"sabour": _sabour_scale, "exponential": _exponential_scale}
