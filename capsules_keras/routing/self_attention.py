"""Self-attention routing, Mazzia et al. (2021), Efficient-CapsNet: one pass."""

import math

from keras import ops

from capsules_keras.ops import squash
from capsules_keras.routing._common import agreement, check_votes, route_with


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
    u_hat = check_votes(u_hat)
    if priors is not None and tuple(ops.shape(priors)) != tuple(u_hat.shape[1:3]):
        raise ValueError(
            "`priors` must have shape (in_capsules, out_capsules) = "
            f"{tuple(u_hat.shape[1:3])}. Received: priors.shape="
            f"{tuple(ops.shape(priors))}"
        )
    total = ops.sum(u_hat, axis=1)  # sum_k u_hat[b,k,j,:], (b, j, m)
    attention = agreement(u_hat, total) / math.sqrt(u_hat.shape[-1])
    c = ops.softmax(attention, axis=2)  # over the parents j
    weights = c if priors is None else c + ops.cast(priors, c.dtype)
    v = squash_fn(route_with(u_hat, weights))
    return (v, c) if return_coupling else v
