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


def routing(u_hat, iterations, softmax_axis=2, squash_fn=squash):
    """Procedure 1. Returns (v, c) of the last iteration.

    `softmax_axis=2` is the paper's (over parents j); 1 is the common mistake
    (over children i), kept here so tests can show they differ. `squash_fn`:
    `squash` (the paper's) or `exponential_squash`.
    """
    u_hat = np.asarray(u_hat, dtype=np.float64)
    batch, in_caps, out_caps, out_dim = u_hat.shape
    logits = np.zeros((batch, in_caps, out_caps))
    for _ in range(iterations):
        c = softmax(logits, axis=softmax_axis)
        s = np.zeros((batch, out_caps, out_dim))
        for i in range(in_caps):
            s += c[:, i, :, None] * u_hat[:, i]  # s_j = sum_i c_ij u_hat_j|i
        v = squash_fn(s)
        for j in range(out_caps):
            # b_ij <- b_ij + u_hat_j|i . v_j
            logits[:, :, j] += np.sum(u_hat[:, :, j] * v[:, None, j], axis=-1)
    return v, c


def margin_loss(onehot, lengths, m_plus=0.9, m_minus=0.1, lambda_=0.5):
    """Equation 4, summed over classes: one value per sample."""
    present = onehot * np.maximum(0.0, m_plus - lengths) ** 2
    absent = lambda_ * (1 - onehot) * np.maximum(0.0, lengths - m_minus) ** 2
    return np.sum(present + absent, axis=-1)


def self_attention_routing(u_hat, priors=None, squash_fn=squash):
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
    return squash_fn(s), c


def conv2d(x, kernel, bias, strides, padding):
    """y[b,r,c,o] = bias[o] + sum_{dy,dx,n} x[b, r*sh + dy, c*sw + dx, n] W[dy,dx,n,o].

    Channels last. `padding="same"` pads as Keras does: `out = ceil(in / s)`,
    the odd row or column of padding at the bottom or right.
    """
    x = np.asarray(x, dtype=np.float64)
    kernel_h, kernel_w, _, filters = kernel.shape
    stride_h, stride_w = strides
    batch, height, width, _ = x.shape
    if padding == "same":
        out_h, out_w = -(-height // stride_h), -(-width // stride_w)
        pad_h = max((out_h - 1) * stride_h + kernel_h - height, 0)
        pad_w = max((out_w - 1) * stride_w + kernel_w - width, 0)
        x = np.pad(
            x,
            [(0, 0), (pad_h // 2, pad_h - pad_h // 2)]
            + [(pad_w // 2, pad_w - pad_w // 2), (0, 0)],
        )
    else:
        out_h = (height - kernel_h) // stride_h + 1
        out_w = (width - kernel_w) // stride_w + 1
    y = np.zeros((batch, out_h, out_w, filters))
    for b in range(batch):
        for r in range(out_h):
            for c in range(out_w):
                for dy in range(kernel_h):
                    for dx in range(kernel_w):
                        pixel = x[b, r * stride_h + dy, c * stride_w + dx]
                        y[b, r, c] += pixel @ kernel[dy, dx]
    return y + bias


def layer_norm(x, scale, offset, epsilon=1e-5):
    mean = np.mean(x, axis=-1, keepdims=True)
    variance = np.mean((x - mean) ** 2, axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + epsilon) * scale + offset


def batch_norm_with(x, mean, variance, scale, offset, axis, epsilon=1e-3):
    """`(x - mean) / sqrt(variance + epsilon) * scale + offset` along `axis`."""
    shape = [1] * x.ndim
    shape[axis] = -1

    def along(values):
        return np.reshape(values, shape)

    return (x - along(mean)) / np.sqrt(along(variance) + epsilon) * along(
        scale
    ) + along(offset)


def batch_norm(x, scale, offset, axis, epsilon=1e-3):
    """Training-mode batch normalisation over every axis but `axis`.

    Returns the output, the batch's mean and its biased variance.
    """
    axes = tuple(a for a in range(x.ndim) if a != axis % x.ndim)
    mean = np.mean(x, axis=axes)
    variance = np.mean((x - np.expand_dims(mean, axes)) ** 2, axis=axes)
    return (
        batch_norm_with(x, mean, variance, scale, offset, axis, epsilon),
        mean,
        variance,
    )


def inverted_dot_product_routing(
    u_hat, iterations, scale, offset, scaled=True, squash_fn=squash
):
    """Tsai et al. (2020), parents from zero, LayerNorm'd poses. Returns (v, c).

    `scaled`: the agreement divided by sqrt(out_dim), as in the authors' code.
    """
    u_hat = np.asarray(u_hat, dtype=np.float64)
    batch, in_caps, out_caps, out_dim = u_hat.shape
    divisor = np.sqrt(out_dim) if scaled else 1.0
    poses = np.zeros((batch, out_caps, out_dim))
    for _ in range(iterations):
        agreement = np.zeros((batch, in_caps, out_caps))
        for j in range(out_caps):
            agreement[:, :, j] = (
                np.sum(u_hat[:, :, j] * poses[:, None, j], axis=-1) / divisor
            )
        c = softmax(agreement, axis=2)
        s = np.zeros((batch, out_caps, out_dim))
        for i in range(in_caps):
            s += c[:, i, :, None] * u_hat[:, i]
        poses = layer_norm(s, scale, offset)
    return squash_fn(s), c


def exponential_squash(s, epsilon=EPSILON):
    """Mazzia et al. (2021): (1 - exp(-|s|)) * s / |s|."""
    norm = np.sqrt(np.sum(np.square(s), axis=-1, keepdims=True) + epsilon)
    return (1.0 - np.exp(-norm)) * s / norm


def em_routing(votes, activations, beta_u, beta_a, iterations, final_lambda, epsilon):
    """Hinton et al. (2018), Procedure 1, loop by loop. Returns (mu, a_out, R).

    The library's choices: lambda grows linearly to `final_lambda`, the cost
    is standardised over the parents, `epsilon` joins the variances, the
    sums of R and the cost's variance. The E-step uses the Gaussian
    densities themselves (no log space): fine in float64 for test sizes.
    """
    votes = np.asarray(votes, dtype=np.float64)
    a_in = np.asarray(activations, dtype=np.float64)
    batch, in_caps, out_caps, dim = votes.shape
    beta_u = np.broadcast_to(np.asarray(beta_u, np.float64), (out_caps,))
    beta_a = np.broadcast_to(np.asarray(beta_a, np.float64), (out_caps,))
    r = np.full((batch, in_caps, out_caps), 1.0 / out_caps)
    mu = np.zeros((batch, out_caps, dim))
    sigma_sq = np.zeros((batch, out_caps, dim))
    a_out = np.zeros((batch, out_caps))
    cost = np.zeros((batch, out_caps))
    for t in range(1, iterations + 1):
        lam = final_lambda * t / iterations
        for b in range(batch):
            for j in range(out_caps):  # M-step
                r_active = r[b, :, j] * a_in[b]  # R_ij <- R_ij * a_i
                total = r_active.sum()
                for h in range(dim):
                    mu[b, j, h] = (r_active * votes[b, :, j, h]).sum() / (
                        total + epsilon
                    )
                    deviation = (votes[b, :, j, h] - mu[b, j, h]) ** 2
                    sigma_sq[b, j, h] = (r_active * deviation).sum() / (
                        total + epsilon
                    ) + epsilon
                cost_h = (beta_u[j] + 0.5 * np.log(sigma_sq[b, j])) * total
                cost[b, j] = cost_h.sum()
            mean, variance = cost[b].mean(), cost[b].var()
            for j in range(out_caps):
                normalised = (cost[b, j] - mean) / np.sqrt(variance + epsilon)
                a_out[b, j] = 1.0 / (1.0 + np.exp(-lam * (beta_a[j] - normalised)))
        if t == iterations:
            break
        for b in range(batch):
            for i in range(in_caps):  # E-step
                p = np.array(
                    [
                        np.prod(
                            np.exp(
                                -((votes[b, i, j] - mu[b, j]) ** 2)
                                / (2 * sigma_sq[b, j])
                            )
                            / np.sqrt(2 * np.pi * sigma_sq[b, j])
                        )
                        for j in range(out_caps)
                    ]
                )
                r[b, i] = a_out[b] * p / np.sum(a_out[b] * p)
    return mu, a_out, r


def matrix_votes(poses, kernel):
    """V_ij = M_i W_ij for poses (..., i, 16) and W (i, j, 4, 4): (..., i, j, 16)."""
    poses = np.asarray(poses, np.float64)
    *lead, in_caps, _ = poses.shape
    out_caps = kernel.shape[1]
    votes = np.zeros((*lead, in_caps, out_caps, 16))
    for index in np.ndindex(*lead):
        for i in range(in_caps):
            for j in range(out_caps):
                matrix = poses[index][i].reshape(4, 4) @ kernel[i, j]
                votes[index][i, j] = matrix.reshape(16)
    return votes


def spread_loss(onehot, activations, margin):
    """Equation 3: sum over wrong classes of max(0, m - (a_t - a_i))^2."""
    a_t = np.sum(onehot * activations, axis=-1, keepdims=True)
    return np.sum((1 - onehot) * np.maximum(0.0, margin - (a_t - activations)) ** 2, -1)
