"""The routing layers of the papers' authors, their math transcribed to NumPy.

`numpy_reference.py` holds loop-by-loop references of our reading of the
papers; this module holds what the code that produced the papers' numbers
computes, read from the authors' public repositories and written out in
NumPy (the math, not their code), so that a test fails if ours drifts from
theirs. Each function names the repository, file and commit it follows and
takes the authors' weight layouts; float64 throughout.
"""

import numpy as np

#: torch.nn.LayerNorm's default epsilon (the authors' LayerNorm).
TORCH_LAYER_NORM_EPSILON = 1e-5
#: The `eps` of Efficient-CapsNet's Squash layer (written `10e-21` there).
EFFICIENT_CAPSNET_EPSILON = 1e-20


def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _layer_norm(x, weight, bias, epsilon=TORCH_LAYER_NORM_EPSILON):
    mean = x.mean(axis=-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(axis=-1, keepdims=True)  # biased, as torch
    return (x - mean) / np.sqrt(variance + epsilon) * weight + bias


def tsai_capsule_fc(inputs, w, num_routing, ln_weight, ln_bias):
    """Tsai et al. (2020): `CapsuleFC` with vector poses, routed `num_routing` times.

    yaohungt/Capsules-Inverted-Attention-Routing (the same code as
    apple/ml-capsules-inverted-attention-routing, commit
    53899ae5b75b576a693a1bd79a2173ac3f1cdf1d), `src/layers.py`,
    `CapsuleFC.forward` with `matrix_pose=False` and dropout 0 (`--dp`'s
    default), called as `src/capsule_model.py` calls it: one pass without
    parent values (uniform couplings), then `num_routing - 1` passes, each
    given the previous pass's output.

    Indices as theirs: b batch, n child, a child dim, m parent, d parent dim.

    Args:
        inputs: `(b, n, a)` child capsules.
        w: `(n, a, m, d)` weights (theirs; ours are `(n, m, a, d)`).
        num_routing: Passes, the uniform one included (their `--num_routing`).
        ln_weight, ln_bias: The LayerNorm's gain and bias `(d,)`.

    Returns:
        `(s, poses, c)`: the weighted vote sum of the last pass `(b, m, d)`,
        its LayerNorm -- the layer's output -- and the couplings `(b, n, m)`.
    """
    inputs = np.asarray(inputs, np.float64)
    w = np.asarray(w, np.float64)
    out_dim = w.shape[-1]
    scale = 1.0 / out_dim**0.5
    # The first pass: zero logits, a softmax over the parents -> uniform.
    c = _softmax(np.zeros((w.shape[0], w.shape[2])), axis=1)  # (n, m)
    c = np.broadcast_to(c, (inputs.shape[0], *c.shape))
    s = np.einsum("bnm,bna,namd->bmd", c, inputs, w)
    poses = _layer_norm(s, ln_weight, ln_bias)
    for _ in range(num_routing - 1):
        logits = np.einsum("bna,namd,bmd->bnm", inputs, w, poses) * scale
        c = _softmax(logits, axis=2)
        c = c / (c.sum(axis=2, keepdims=True) + 1e-10)
        s = np.einsum("bnm,bna,namd->bmd", c, inputs, w)
        poses = _layer_norm(s, ln_weight, ln_bias)
    return s, poses, c


def mazzia_fc_caps(inputs, w, b):
    """Mazzia et al. (2021): Efficient-CapsNet's `FCCaps` layer.

    EscVM/Efficient-CapsNet, commit 4b337f5bf79d70a56e4dec8b113fe54b44cfe963,
    `utils/layers.py`, `FCCaps.call`, with the `Squash` of the same file.

    Indices as theirs: k parent, j child, i child dim, z parent dim.

    Args:
        inputs: `(batch, j, i)` child capsules.
        w: `(k, j, i, z)` weights (theirs; ours are `(j, k, i, z)`).
        b: `(k, j, 1)` the learned log priors (ours: `(j, k)`).

    Returns:
        `(v, c)`: the parent capsules `(batch, k, z)` and the softmax
        couplings before the priors are added, `(batch, k, j)`.
    """
    inputs = np.asarray(inputs, np.float64)
    w = np.asarray(w, np.float64)
    u = np.einsum("bji,kjiz->bkjz", inputs, w)  # the votes
    # Each vote's agreement with the sum of all votes for its parent.
    agreement = np.einsum("bkjz,bklz->bkj", u, u) / np.sqrt(w.shape[-1])
    c = _softmax(agreement, axis=1)  # over the parents k
    s = np.sum(u * (c[..., None] + np.asarray(b, np.float64)), axis=2)  # (batch, k, z)
    n = np.linalg.norm(s, axis=-1, keepdims=True)
    eps = EFFICIENT_CAPSNET_EPSILON
    v = (1 - 1 / (np.exp(n) + eps)) * (s / (n + eps))
    return v, c


def sabour_capsule(inputs, w, biases, num_routing):
    """Sabour et al. (2017): the fully connected capsule layer of their code.

    Sarasra/models, commit 2bdd12830a8fa1225a5765fbf77998afa9c3f5c4,
    `research/capsules/models/layers/layers.py`: `capsule` (the votes) and
    `_update_routing` with `leaky=False` and `num_routing=3`, the defaults
    of `research/capsules/experiment.py`; `_squash` of the same file (no
    epsilon).

    Args:
        inputs: `(batch, input_dim, input_atoms)` child capsules.
        w: `(input_dim, input_atoms, output_dim * output_atoms)` (theirs;
            ours: `(input_dim, output_dim, input_atoms, output_atoms)`).
        biases: `(output_dim, output_atoms)`, added to every `s_j`.
        num_routing: Routing iterations.

    Returns:
        The parent capsules of the last iteration, `(batch, output_dim,
        output_atoms)`.
    """
    inputs = np.asarray(inputs, np.float64)
    w = np.asarray(w, np.float64)
    output_dim, output_atoms = biases.shape
    votes = np.einsum("bin,ino->bio", inputs, w)
    votes = votes.reshape(len(inputs), w.shape[0], output_dim, output_atoms)
    logits = np.zeros(votes.shape[:3])
    for _ in range(num_routing):
        route = _softmax(logits, axis=2)  # over the parents
        s = np.einsum("bij,bijm->bjm", route, votes) + biases
        norm = np.linalg.norm(s, axis=2, keepdims=True)
        activation = s / norm * (norm**2 / (1 + norm**2))
        logits = logits + np.einsum("bijm,bjm->bij", votes, activation)
    return activation


#: `epsilon` and `final_lambda` of IBM's `config.py` (commit 2da9cdf).
GRITZMAN_EPSILON = 1e-9
GRITZMAN_FINAL_LAMBDA = 0.01


def gritzman_lambdas(iterations, final_lambda=GRITZMAN_FINAL_LAMBDA):
    """Their inverse temperature per iteration: `final_lambda (1 - 0.95^(t+1))`."""
    return [final_lambda * (1 - 0.95 ** (t + 1)) for t in range(iterations)]


def gritzman_em_routing(
    votes, activations, beta_v, beta_a, lambdas, standardise_cost=False
):
    """EM routing as IBM's re-implementation computes it (Gritzman 2019).

    IBM/matrix-capsules-with-em-routing, commit
    2da9cdf9e1787f0b0984f7673f644d47b08f220c, `em_routing.py`: `em_routing`,
    `m_step` and `e_step` for a fully connected layer (every child routes to
    every parent, so `init_rr` is uniform and the softmax runs over all
    parents), epsilons from `config.py`.

    Args:
        votes: `(batch, i, j, 16)`.
        activations: `(batch, i)` of the children.
        beta_v, beta_a: `(j,)`, one per parent type (their `beta_v` is the
            paper's and our `beta_u`).
        lambdas: The inverse temperature of each iteration (theirs:
            `gritzman_lambdas`).
        standardise_cost: Standardise `cost_j` over the parents, as the lines
            commented out after `cost_j` in `m_step` do (ours does).

    Returns:
        `(mean_j (batch, j, 16), activations_j (batch, j))` of the last
        M-step.
    """
    votes = np.asarray(votes, np.float64)
    a_in = np.asarray(activations, np.float64)[:, :, None, None]
    beta_v = np.asarray(beta_v, np.float64)[:, None]  # (j, 1)
    beta_a = np.asarray(beta_a, np.float64)[:, None]
    eps = GRITZMAN_EPSILON
    children, parents = votes.shape[1:3]
    rr = np.full((*votes.shape[:3], 1), 1.0 / (parents + 1e-9))  # (b, i, j, 1)
    for it, inverse_temperature in enumerate(lambdas):
        # m_step
        rr_prime = rr * a_in
        rr_prime_sum = rr_prime.sum(axis=1, keepdims=True)  # (b, 1, j, 1)
        mean_j = (rr_prime * votes).sum(axis=1, keepdims=True) / (rr_prime_sum + eps)
        var_j = (rr_prime * (votes - mean_j) ** 2).sum(axis=1, keepdims=True)
        var_j = var_j / (rr_prime_sum + eps) + 1e-9
        layer_norm_factor = 100 / (children / parents)
        cost_j_h = (beta_v + 0.5 * np.log(var_j)) * rr_prime_sum * layer_norm_factor
        cost_j = cost_j_h.sum(axis=-1, keepdims=True)  # (b, 1, j, 1)
        if standardise_cost:
            mean = cost_j.mean(axis=2, keepdims=True)
            stdv = np.sqrt(((cost_j - mean) ** 2).mean(axis=2, keepdims=True))
            activations_j_cost = beta_a + (mean - cost_j) / stdv
        else:
            activations_j_cost = beta_a - cost_j
        activations_j = 1 / (1 + np.exp(-inverse_temperature * activations_j_cost))
        if it == len(lambdas) - 1:
            break
        # e_step
        o_p = -((votes - mean_j) ** 2 / (2 * var_j)).sum(axis=-1, keepdims=True)
        o_p = o_p - 0.5 * np.log(2 * np.pi * var_j).sum(axis=-1, keepdims=True)
        zz = np.log(activations_j + eps) + o_p  # (b, i, j, 1)
        rr = _softmax(zz, axis=2)  # over the parents
    return mean_j[:, 0], activations_j[:, 0, :, 0]
