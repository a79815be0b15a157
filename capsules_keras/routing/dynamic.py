"""Routing by agreement, Sabour et al. (2017): `dynamic_routing`.

This is the paper's Procedure 1, written to be read against it, and the
reference that every faster path is tested against. `DigitCaps` routes
through `capsules_keras.routing._fast`, which computes the same values and
gradients in the memory layout that runs fastest on each backend.
"""

from keras import ops

from capsules_keras._checks import check_positive_int
from capsules_keras.ops import squash
from capsules_keras.routing._common import check_votes


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

    >>> u_hat = ops.ones((2, 6, 3, 4))  # 6 children, 3 parents of 4 dims
    >>> v, c = dynamic_routing(u_hat, iterations=3, return_coupling=True)
    >>> tuple(v.shape), tuple(c.shape)
    ((2, 3, 4), (2, 6, 3))
    """
    check_positive_int("iterations", iterations)
    u_hat = check_votes(u_hat)  # (b, i, j, m)
    # The votes every iteration but the last routes: behind a stop-gradient
    # if asked, so that only the last iteration's sum backpropagates.
    routing_votes = ops.stop_gradient(u_hat) if stop_gradient_votes else u_hat
    # b_ij = 0. Kept in float32 even for float16/bfloat16 votes: the logits
    # accumulate agreements, and the softmax needs them accurate.
    logits = ops.zeros_like(u_hat[..., 0], dtype="float32")  # (b, i, j)
    for r in range(1, iterations + 1):
        votes = u_hat if r == iterations else routing_votes
        # c_ij = exp(b_ij) / sum_k exp(b_ik): the softmax over the PARENTS j.
        c = ops.softmax(logits, axis=2)  # (b, i, j)
        # s_j = sum_i c_ij u_hat_j|i
        s = ops.einsum("bij,bijm->bjm", ops.cast(c, votes.dtype), votes)  # (b, j, m)
        # v_j = squash(s_j)
        v = squash_fn(s)  # (b, j, m)
        if r < iterations:
            # b_ij <- b_ij + u_hat_j|i . v_j
            agreement = ops.einsum("bijm,bjm->bij", votes, v)  # (b, i, j)
            logits = logits + ops.cast(agreement, "float32")
    return (v, c) if return_coupling else v
