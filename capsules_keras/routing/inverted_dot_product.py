"""Inverted dot-product attention routing, Tsai et al. (2020)."""

import math

from keras import ops

from capsules_keras._checks import check_positive_int
from capsules_keras.ops import layer_norm, squash
from capsules_keras.routing._common import agreement, check_votes, route_with


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
        scale: Optional LayerNorm gain `(out_dim,)`.
        offset: Optional LayerNorm bias `(out_dim,)`.
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
    u_hat = check_votes(u_hat)
    num_parents = u_hat.shape[2]
    divisor = math.sqrt(u_hat.shape[-1]) if scale_agreement else 1.0
    # p = 0 gives a = 0 and the uniform coupling c = 1 / num_parents.
    c = ops.full_like(u_hat[..., 0], 1.0 / num_parents, dtype="float32")
    s = route_with(u_hat, c)  # (b, j, m)
    for _ in range(iterations - 1):
        poses = layer_norm(s, scale, offset)
        # a_ij = u_hat_j|i . p_j / sqrt(out_dim); softmax over the parents j
        c = ops.softmax(agreement(u_hat, poses) / divisor, axis=2)
        s = route_with(u_hat, c)
    v = squash_fn(s)
    return (v, c) if return_coupling else v
