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
