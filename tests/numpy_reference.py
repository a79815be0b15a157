"""A NumPy reference of the paper's equations, written with explicit loops.

Deliberately independent of the library: no einsum, float64 throughout, each
line one equation of Sabour et al. (2017).
"""

import numpy as np

EPSILON = 1e-7


def squash(s, epsilon=EPSILON):
    """Equation 1 on the last axis: |s|^2 / (1 + |s|^2) * s / |s|."""
    squared_norm = np.sum(np.square(s), axis=-1, keepdims=True)
    return squared_norm / (1.0 + squared_norm) * s / np.sqrt(squared_norm + epsilon)


def softmax(x, axis):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def votes(kernel, u):
    """u_hat[b, i, j, :] = u[b, i, :] @ W[i, j] (equation 2, right part)."""
    batch, in_caps, _ = u.shape
    _, out_caps, _, out_dim = kernel.shape
    u_hat = np.zeros((batch, in_caps, out_caps, out_dim))
    for b in range(batch):
        for i in range(in_caps):
            for j in range(out_caps):
                u_hat[b, i, j] = u[b, i] @ kernel[i, j]
    return u_hat


def routing(u_hat, iterations, softmax_axis=2):
    """Procedure 1. Returns (v, c) of the last iteration.

    `softmax_axis=2` is the paper's (over parents j); 1 is the common mistake
    (over children i), kept here so tests can show they differ.
    """
    u_hat = np.asarray(u_hat, dtype=np.float64)
    batch, in_caps, out_caps, out_dim = u_hat.shape
    logits = np.zeros((batch, in_caps, out_caps))
    for _ in range(iterations):
        c = softmax(logits, axis=softmax_axis)
        s = np.zeros((batch, out_caps, out_dim))
        for i in range(in_caps):
            s += c[:, i, :, None] * u_hat[:, i]  # s_j = sum_i c_ij u_hat_j|i
        v = squash(s)
        for j in range(out_caps):
            # b_ij <- b_ij + u_hat_j|i . v_j
            logits[:, :, j] += np.sum(u_hat[:, :, j] * v[:, None, j], axis=-1)
    return v, c


def margin_loss(onehot, lengths, m_plus=0.9, m_minus=0.1, lambda_=0.5):
    """Equation 4, summed over classes: one value per sample."""
    present = onehot * np.maximum(0.0, m_plus - lengths) ** 2
    absent = lambda_ * (1 - onehot) * np.maximum(0.0, lengths - m_minus) ** 2
    return np.sum(present + absent, axis=-1)


def self_attention_routing(u_hat, priors=None):
    """Mazzia et al. (2021): one pass. Returns (v, c)."""
    u_hat = np.asarray(u_hat, dtype=np.float64)
    batch, in_caps, out_caps, out_dim = u_hat.shape
    attention = np.zeros((batch, in_caps, out_caps))
    for j in range(out_caps):
        for i in range(in_caps):
            for k in range(in_caps):
                # A_ikj = u_hat_j|i . u_hat_j|k / sqrt(d), summed over k
                attention[:, i, j] += np.sum(u_hat[:, i, j] * u_hat[:, k, j], axis=-1)
    attention /= np.sqrt(out_dim)
    c = softmax(attention, axis=2)
    weights = c if priors is None else c + np.asarray(priors)[None]
    s = np.zeros((batch, out_caps, out_dim))
    for i in range(in_caps):
        s += weights[:, i, :, None] * u_hat[:, i]  # s_j = sum_i (c_ij + B_ij) u_hat
    return squash(s), c


def layer_norm(x, scale, offset, epsilon=1e-5):
    mean = np.mean(x, axis=-1, keepdims=True)
    variance = np.mean((x - mean) ** 2, axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + epsilon) * scale + offset


def inverted_dot_product_routing(u_hat, iterations, scale, offset):
    """Tsai et al. (2020), parents from zero, LayerNorm'd poses. Returns (v, c)."""
    u_hat = np.asarray(u_hat, dtype=np.float64)
    batch, in_caps, out_caps, out_dim = u_hat.shape
    poses = np.zeros((batch, out_caps, out_dim))
    for _ in range(iterations):
        agreement = np.zeros((batch, in_caps, out_caps))
        for j in range(out_caps):
            agreement[:, :, j] = np.sum(u_hat[:, :, j] * poses[:, None, j], axis=-1)
        c = softmax(agreement, axis=2)
        s = np.zeros((batch, out_caps, out_dim))
        for i in range(in_caps):
            s += c[:, i, :, None] * u_hat[:, i]
        poses = layer_norm(s, scale, offset)
    return squash(s), c


def exponential_squash(s, epsilon=EPSILON):
    """Mazzia et al. (2021): (1 - exp(-|s|)) * s / |s|."""
    norm = np.sqrt(np.sum(np.square(s), axis=-1, keepdims=True) + epsilon)
    return (1.0 - np.exp(-norm)) * s / norm
