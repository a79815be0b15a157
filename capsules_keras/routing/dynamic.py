"""Routing by agreement, Sabour et al. (2017): `dynamic_routing`."""

from keras import ops

from capsules_keras._checks import check_positive_int
from capsules_keras.ops import squash, squash_backward
from capsules_keras.routing._votes import check_votes, vote_layout


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
    not change the output. Iterations count every pass, the first (uniform)
    one included, as in the paper (`r = 3`) and in its authors' code.

    Departures from the authors' code (Sarasra/models, commit 2bdd128,
    `research/capsules/models/layers/layers.py`, `capsule` and
    `_update_routing`; tests/authors_reference.py transcribes it):

    - No bias: their layer adds a learned `bias_j` to every `s_j` before
      the squash; the paper's Procedure 1 has none, and neither do we.
    - Their optional leaky routing (an extra "leak" logit per child,
      `leaky=False` by default there) is not implemented.
    - `squash` puts `epsilon` under the square root; theirs divides by the
      bare norm (NaN at the zero vector).

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
    u_hat = check_votes(u_hat)
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
    if layout.outer_sum is None or squash_backward(squash_fn) is None:
        # Differentiated op by op: where that is faster (see `vote_layout`),
        # or for a squash whose gradient is not written out.
        routing_votes = ops.stop_gradient(votes) if stop_gradient_votes else votes
        couplings, _, outputs = _iterate(
            votes, routing_votes, layout, iterations, squash_fn
        )
        v, c = outputs[-1], couplings[-1]
    else:
        v, c = _route_with_gradient(
            votes, layout, iterations, stop_gradient_votes, return_coupling, squash_fn
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
    """The routing loop: per iteration, the coupling `c` (None for the
    first, uniform one), the parents' inputs `s` and their outputs `v`.

    `routing_votes` (the votes, or the votes behind a stop-gradient) are used
    in all but the last iteration.
    """
    num_parents = votes.shape[layout.permutation.index(2)]
    couplings, inputs, outputs = [], [], []
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
        couplings.append(c)
        inputs.append(s)
        outputs.append(v)
        if not last:
            # b_ij <- b_ij + u_hat_j|i . v_j
            agreement = ops.cast(layout.agreement(v, current), "float32")
            logits = agreement if logits is None else logits + agreement
    return couplings, inputs, outputs


def _route_with_gradient(
    votes, layout, iterations, stop_gradient_votes, return_coupling, squash_fn
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
    squash_grad = squash_backward(squash_fn)

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
                g_s = squash_grad(inputs[t], g_v)
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
