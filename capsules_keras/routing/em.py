"""EM routing between matrix capsules, Hinton, Sabour & Frosst (2018).

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
"""

import math

from keras import ops

from capsules_keras._checks import check_positive_int, check_positive_number
from capsules_keras.ops import float32_if_reduced

#: Entries of a 4x4 pose matrix, stored row by row.
POSE_SIZE = 16
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
      E-steps weigh the parents more evenly. IBM's code uses
      `0.01 (1 - 0.95^t)` (Hinton's answer on OpenReview); the paper gives
      no schedule.

    With both choices applied to IBM's code (tests/authors_reference.py
    transcribes its `em_routing`, `m_step` and `e_step`), the two agree
    within 1e-5; its other differences vanish under the standardisation
    (its cost factor `100 / (children / parents)`) or are epsilons (1e-9
    there, `epsilon` here). Iterations count M-steps, as the paper's
    Procedure 1 and IBM's `iter_routing` (3) do.

    Computed in log space (the E-step's normalisation is a log-sum-exp of
    `log a_j + log p_ij`), with `epsilon` added to the variances, to
    `sum_i R_ij` and to the variance of the cost, so any number of
    iterations gives finite values and gradients, also for all-zero votes
    or activations. float16/bfloat16 inputs are routed in float32.

    Args:
        votes: `V`, `(batch_size, in_capsules, out_capsules, 16)`.
        activations: `a_i` of the children, `(batch_size, in_capsules)`.
        beta_u: Learned offset of the cost, a scalar or one per parent
            `(out_capsules,)`.
        beta_a: Learned offset of the activation logit, a scalar or one per
            parent `(out_capsules,)`.
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

    >>> votes = ops.zeros((2, 5, 3, 16))
    >>> mu, a = em_routing(votes, ops.ones((2, 5)), 0.0, 0.0)
    >>> tuple(mu.shape), tuple(a.shape)
    ((2, 3, 16), (2, 3))

    Reference: Hinton, Sabour & Frosst (2018), section 2.1 and Procedure 1.
    """
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
    # The votes laid out parent-major for the loop (see `route_parent_major`).
    routed = route_parent_major(
        ops.transpose(votes, (0, 2, 1, 3)),
        activations,
        beta_u,
        beta_a,
        iterations,
        inverse_temperature,
        epsilon,
        return_assignments,
    )
    if return_assignments:
        poses, parent_activations, r = routed
        return poses, parent_activations, ops.transpose(r, (0, 2, 1))
    return routed


def route_parent_major(
    votes,
    activations,
    beta_u,
    beta_a,
    iterations,
    inverse_temperature,
    epsilon,
    return_assignments=False,
):
    """`em_routing` of votes `(batch_size, out_capsules, in_capsules, 16)`.

    The same computation, on the votes laid out parent by parent, so that
    the M-step's sums over the children `i` run along contiguous memory: no
    backend then copies the votes into another order for its weighted sums
    (docs/design-decisions.md, "EM routing over parent-major votes"). The
    matrix-capsule layers compute their votes in this order
    (`capsules_keras.layers.matrix`); `em_routing` checks the shapes of its
    votes and activations, then transposes the votes once; the other
    arguments are checked here.

    Returns:
        As `em_routing`, with `R` (if asked) as `(batch_size, out_capsules,
        in_capsules)`.
    """
    check_positive_int("iterations", iterations)
    check_positive_number("inverse_temperature", inverse_temperature)
    check_positive_number("epsilon", epsilon)
    votes = ops.convert_to_tensor(votes)
    num_parents = votes.shape[1]
    beta_u = _check_betas("beta_u", beta_u, num_parents)
    beta_a = _check_betas("beta_a", beta_a, num_parents)
    v = float32_if_reduced(votes)  # V_ij^h, (b, j, i, h)
    dtype = v.dtype
    a_in = ops.expand_dims(ops.cast(activations, dtype), 1)  # a_i, (b, 1, i)
    beta_u = ops.reshape(ops.cast(beta_u, dtype), (-1, 1))  # (j, 1) or (1, 1)
    beta_a = ops.cast(beta_a, dtype)
    # R_ij = 1 / |Omega_{L+1}|
    r = ops.full_like(v[..., 0], 1.0 / num_parents)  # (b, j, i)
    for t in range(1, iterations + 1):
        inverse_temp = inverse_temperature * t / iterations
        # --- M-step ---
        # R_ij <- R_ij * a_i
        r_active = r * a_in  # (b, j, i)
        r_sum = ops.sum(r_active, axis=2)  # sum_i R_ij, (b, j)
        weights = r_active / (ops.expand_dims(r_sum, 2) + epsilon)  # (b, j, i)
        # mu_j^h = sum_i R_ij V_ij^h / sum_i R_ij
        # (sigma_j^h)^2 = sum_i R_ij (V_ij^h - mu_j^h)^2 / sum_i R_ij (+ epsilon)
        # and, for the E-step, sum_h (V_ij^h - mu_j^h)^2 / (sigma_j^h)^2
        mu, variance, distances = _moments(v, weights, epsilon, t < iterations)
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
        #                   - log(2 pi) / 2], with the sums over h of the
        # terms that do not depend on i taken once per parent
        log_p = (
            -0.5 * distances
            - ops.expand_dims(ops.sum(log_sigma, axis=-1), 2)
            - 0.5 * POSE_SIZE * _LOG_2PI
        )  # (b, j, i)
        # R_ij = a_j p_ij / sum_k a_k p_ik, normalised in log space
        log_ap = ops.expand_dims(ops.log_sigmoid(logits), 2) + log_p  # (b, j, i)
        r = ops.exp(log_ap - ops.logsumexp(log_ap, axis=1, keepdims=True))
    poses = ops.cast(mu, votes.dtype)
    parent_activations = ops.cast(ops.sigmoid(logits), votes.dtype)
    if return_assignments:
        return poses, parent_activations, r
    return poses, parent_activations


def _moments(votes, weights, epsilon, with_distances):
    """One M-step's sums over the votes, with their gradient in one pass.

    For parent-major votes `V` `(b, j, i, h)` and weights
    `w_ij = R_ij / (sum_i R_ij + epsilon)` `(b, j, i)`:

    ```
    mu_j = sum_i w_ij V_ij
    var_j = sum_i w_ij (V_ij - mu_j)^2 + epsilon      (elementwise over h)
    q_ij = sum_h (V_ij^h - mu_j^h)^2 / var_j^h         (if `with_distances`)
    ```

    Returns `(mu, var, q)`, `q` `None` without distances. The forward pass
    is the same sequence of ops as the plain formulation. The gradient is
    written out instead of left to autodiff, which would take it op by op,
    in about eight passes over the votes' size per M-step. With upstream
    gradients `g_mu`, `g_var`, `g_q` and `u = 1 / var`, `D_ij = V_ij - mu_j`:

    ```
    G_j = g_var_j - u_j^2 sum_i g_q,ij D_ij^2              (var's total gradient)
    m_j = g_mu_j - 2 G_j mu_j (1 - sum_i w_ij)
               - 2 u_j sum_i g_q,ij D_ij                   (mu's total gradient)
    dV_ij = V_ij (2 w_ij G_j + 2 g_q,ij u_j) + w_ij (m_j - 2 G_j mu_j)
            - 2 g_q,ij u_j mu_j
    dw_ij = sum_h (G_j^h D_ij^h^2 + m_j^h V_ij^h)
    ```

    The votes' gradient is then one batched product with 2 terms, of
    `[w, g_q]` with the per-parent factors, and one multiply-add with `V`.
    `tests/test_matrix_capsules.py` compares it with finite differences of
    the NumPy reference. It makes the training step faster on torch eager
    and under tensorflow's XLA, and costs nothing measurable on jax and
    tensorflow's graph (docs/design-decisions.md, "Written M-step gradient
    of EM routing").
    """
    size = votes.shape[-1]

    @ops.custom_gradient
    def forward(v, w):
        mu = ops.einsum("bji,bjih->bjh", w, v)
        squared = ops.square(v - ops.expand_dims(mu, 2))  # D^2, shared
        variance = ops.einsum("bji,bjih->bjh", w, squared) + epsilon
        outputs = [mu, variance]
        if with_distances:
            inverse = 1.0 / variance
            outputs.append(ops.einsum("bjih,bjh->bji", squared, inverse))

        def gradient(*args, upstream=None):
            if upstream is None:  # jax and tensorflow pass it by position
                (upstream,) = args
            g_mu, g_var = upstream[..., :size], upstream[..., size : 2 * size]
            rows, factors = [w], []
            if with_distances:
                g_q = upstream[..., 2 * size :]
                g_var = g_var - ops.square(inverse) * ops.einsum(
                    "bji,bjih->bjh", g_q, squared
                )
                g_q_deviation = ops.einsum("bji,bjih->bjh", g_q, v) - mu * ops.sum(
                    g_q, axis=2, keepdims=True
                )
                g_mu = g_mu - 2.0 * inverse * g_q_deviation
                rows.append(g_q)
                factors.append(
                    ops.concatenate([2.0 * inverse, -2.0 * inverse * mu], -1)
                )
            outside = 1.0 - ops.sum(w, axis=2, keepdims=True)  # 1 - sum_i w_ij
            g_mu = g_mu - 2.0 * g_var * mu * outside
            factors.insert(
                0, ops.concatenate([2.0 * g_var, g_mu - 2.0 * g_var * mu], -1)
            )
            # (b, j, i, 2h): the factor of V, then the offset
            scale_offset = ops.einsum(
                "bjik,bjkc->bjic", ops.stack(rows, -1), ops.stack(factors, 2)
            )
            g_v = v * scale_offset[..., :size] + scale_offset[..., size:]
            g_w = ops.einsum("bjih,bjh->bji", squared, g_var) + ops.einsum(
                "bjih,bjh->bji", v, g_mu
            )
            return g_v, g_w

        return ops.concatenate(outputs, -1), gradient

    packed = forward(votes, weights)  # one output, as torch's custom_gradient needs
    distances = packed[..., 2 * size :] if with_distances else None
    return packed[..., :size], packed[..., size : 2 * size], distances
