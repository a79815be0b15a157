"""Capsule operations in pure `keras.ops`: squash, safe length, layer norm, patches.

Indices follow Sabour et al. (2017): `b` = batch, `i` = lower
(child) capsule, `j` = higher (parent) capsule, `n` = child dimension,
`m` = parent dimension.

Every function here runs unchanged on the torch, jax and tensorflow backends.
Reduced-precision inputs (float16, bfloat16) are handled by computing the
numerically delicate parts (the squared norm in `squash`, the statistics of
`layer_norm`) in float32 and casting back. The routing algorithms that use
these are in `capsules_keras.routing`.
"""

import functools

import keras
from keras import ops

from capsules_keras._checks import check_axis, check_positive_number

#: Added to squared norms inside the square root, so that the length and its
#: gradient stay finite at the zero vector (d sqrt(x)/dx is infinite at x = 0).
EPSILON = 1e-7

_REDUCED_PRECISION = ("float16", "bfloat16")


def float32_if_reduced(x):
    """Upcasts float16/bfloat16 tensors to float32; leaves others unchanged."""
    if keras.backend.standardize_dtype(x.dtype) in _REDUCED_PRECISION:
        return ops.cast(x, "float32")
    return x


def safe_norm(x, axis=-1, keepdims=False, epsilon=EPSILON):
    """Euclidean length with `epsilon` inside the square root.

    `safe_norm(x) = sqrt(sum(x ** 2, axis) + epsilon)`

    Unlike `ops.norm`, its gradient is finite (zero) at the zero vector.
    Computed in float32 for float16/bfloat16 inputs and cast back.

    Args:
        x: Tensor.
        axis: Axis along which to take the length.
        keepdims: Keep the reduced axis with size 1.
        epsilon: Positive constant added under the square root.

    Returns:
        Tensor of lengths with `axis` reduced.
    """
    check_positive_number("epsilon", epsilon)
    x = ops.convert_to_tensor(x)
    check_axis("axis", axis, len(x.shape))
    squared = ops.sum(ops.square(float32_if_reduced(x)), axis=axis, keepdims=keepdims)
    return ops.cast(ops.sqrt(squared + epsilon), x.dtype)


def squash(s, axis=-1, epsilon=EPSILON):
    """The capsule non-linearity: keeps the direction, maps the length to [0, 1).

    `squash(s) = |s|^2 / (1 + |s|^2) * s / sqrt(|s|^2 + epsilon)`

    Short vectors shrink to almost zero length, long ones to just below one.
    `epsilon` sits inside the square root, so the value and the gradient are
    finite at `s = 0` (where both are zero).

    Args:
        s: Tensor of capsule vectors.
        axis: The capsule-dimension axis.
        epsilon: Positive constant added under the square root.

    Returns:
        Tensor of the same shape and dtype as `s`.

    >>> v = squash(keras.ops.convert_to_tensor([[3.0, 4.0]]))  # |s| = 5
    >>> round(float(keras.ops.norm(v)), 5)  # 25 / 26
    0.96154

    Reference: Sabour et al. (2017), equation 1.
    """
    check_positive_number("epsilon", epsilon)
    s = ops.convert_to_tensor(s)
    check_axis("axis", axis, len(s.shape))
    s32 = float32_if_reduced(s)
    squared_norm = ops.sum(ops.square(s32), axis=axis, keepdims=True)
    # One fused scale factor: |s|^2 / ((1 + |s|^2) * sqrt(|s|^2 + eps)).
    scale = squared_norm / ((1.0 + squared_norm) * ops.sqrt(squared_norm + epsilon))
    return ops.cast(scale * s32, s.dtype)


def exponential_squash(s, axis=-1, epsilon=EPSILON):
    """Efficient-CapsNet's squash: the length becomes `1 - exp(-|s|)`.

    `squash(s) = (1 - exp(-|s|)) * s / sqrt(|s|^2 + epsilon)`

    Unlike equation 1 of Sabour et al., which maps the length through
    `|s|^2 / (1 + |s|^2)`, it is not flat near zero: a short vector keeps a
    length close to its own, so small capsules still pass gradient.
    Finite (zero) value and gradient at `s = 0`.

    >>> v = exponential_squash(keras.ops.convert_to_tensor([[3.0, 4.0]]))
    >>> round(float(keras.ops.norm(v)), 5)  # 1 - exp(-5)
    0.99326

    Reference: Mazzia, Salvetti & Chiaberge (2021), equation 3.
    """
    check_positive_number("epsilon", epsilon)
    s = ops.convert_to_tensor(s)
    check_axis("axis", axis, len(s.shape))
    s32 = float32_if_reduced(s)
    norm = ops.sqrt(ops.sum(ops.square(s32), axis=axis, keepdims=True) + epsilon)
    return ops.cast((1.0 - ops.exp(-norm)) / norm * s32, s.dtype)


#: The capsule non-linearities by name (`Squash(squash=...)`,
#: `DigitCaps(squash=...)`).
SQUASHES = {"sabour": squash, "exponential": exponential_squash}


def get_squash(squash):
    """The squash function named `squash` (see `SQUASHES`)."""
    if not isinstance(squash, str) or squash not in SQUASHES:
        raise ValueError(
            f"`squash` must be one of {sorted(SQUASHES)}. Received: squash={squash!r}"
        )
    return SQUASHES[squash]


def layer_norm(x, scale=None, offset=None, epsilon=1e-5):
    """Layer normalisation over the last axis (float32 inside).

    `(x - mean(x)) / sqrt(var(x) + epsilon) * scale + offset`
    """
    x = ops.convert_to_tensor(x)
    x32 = float32_if_reduced(x)
    mean = ops.mean(x32, axis=-1, keepdims=True)
    variance = ops.mean(ops.square(x32 - mean), axis=-1, keepdims=True)
    y = (x32 - mean) / ops.sqrt(variance + epsilon)
    if scale is not None:
        y = y * ops.cast(scale, y.dtype)
    if offset is not None:
        y = y + ops.cast(offset, y.dtype)
    return ops.cast(y, x.dtype)


def conv2d_patches(x, kernel, strides=1, padding="valid"):
    """2-D convolution as one matrix product over extracted patches (im2col).

    `y[b, r, c, o] = sum_{dy, dx, n} x[b, r*s + dy, c*s + dx, n] * kernel[dy, dx, n, o]`

    Gives the same result as `keras.ops.conv` (channels last, no dilation).
    `PrimaryCaps` uses it where the backend's own convolution is slow: see
    the comment in `PrimaryCaps.build`.

    Args:
        x: Images `(batch_size, height, width, channels)`.
        kernel: `(kernel_height, kernel_width, channels, filters)`.
        strides: An int or a pair of ints.
        padding: `"valid"` or `"same"` (as in `keras.layers.Conv2D`).

    Returns:
        `(batch_size, out_height, out_width, filters)`.
    """
    kernel_h, kernel_w, channels, filters = kernel.shape
    stride_h, stride_w = (strides, strides) if isinstance(strides, int) else strides
    height, width = x.shape[1], x.shape[2]
    if padding == "same":
        out_h, out_w = -(-height // stride_h), -(-width // stride_w)
        pad_h = max((out_h - 1) * stride_h + kernel_h - height, 0)
        pad_w = max((out_w - 1) * stride_w + kernel_w - width, 0)
        x = ops.pad(
            x,
            [[0, 0], [pad_h // 2, pad_h - pad_h // 2], [pad_w // 2, pad_w - pad_w // 2]]
            + [[0, 0]],
        )
    elif padding == "valid":
        out_h = (height - kernel_h) // stride_h + 1
        out_w = (width - kernel_w) // stride_w + 1
    else:
        raise ValueError(
            f"`padding` must be 'valid' or 'same'. Received: padding={padding!r}"
        )
    span_h, span_w = (out_h - 1) * stride_h + 1, (out_w - 1) * stride_w + 1
    patches = ops.concatenate(
        [
            x[:, dy : dy + span_h : stride_h, dx : dx + span_w : stride_w, :]
            for dy in range(kernel_h)
            for dx in range(kernel_w)
        ],
        axis=-1,
    )  # (b, out_h, out_w, kernel_h * kernel_w * channels), (dy, dx, n) order
    flat_kernel = ops.reshape(kernel, (kernel_h * kernel_w * channels, filters))
    return ops.matmul(patches, flat_kernel)  # (b, out_h, out_w, filters)


@functools.cache
def conv2d_patches_compiled():
    """`conv2d_patches` as one compiled jax program per input shape (jax only).

    Called op by op (`analyze`, `predict` outside a compiled step), jax
    compiles every op of `conv2d_patches` as its own program at each new batch
    size: the 81 slices of a 9x9 kernel are 81 programs. As one program, an
    eager call at a new batch size compiles once (docs/design-decisions.md,
    "Patches as one compiled program on jax"). Inside a compiled train step
    it is inlined as before, so training computes the same program. On the
    other backends: `conv2d_patches` itself.
    """
    if keras.backend.backend() != "jax":
        return conv2d_patches
    import jax

    return jax.jit(conv2d_patches, static_argnums=(2, 3))


def jax_on_cpu():
    """Whether Keras runs on jax with CPU devices only.

    Where the layers take another path for a measured reason: XLA on CPU
    differentiates some convolutions very slowly (`PrimaryCaps.build`;
    docs/design-decisions.md, "Primary capsules on jax").
    """
    return keras.backend.backend() == "jax" and all(
        device.startswith("cpu") for device in keras.distribution.list_devices()
    )


def labels_to_one_hot(labels, num_classes, dtype="float32"):
    """Turns integer labels or one-hot rows into one-hot rows.

    Integer labels have shape `(batch_size,)` or `(batch_size, 1)`; one-hot
    (or any per-class weights) have shape `(batch_size, num_classes)` and are
    returned cast to `dtype`. With one class the two shapes meet: a column
    of integers is read as labels (class 0), a float column as one-hot.

    Args:
        labels: Integer class indices or one-hot rows.
        num_classes: Number of classes (capsules).
        dtype: dtype of the result.

    Returns:
        Tensor of shape `(batch_size, num_classes)`.
    """
    shape = tuple(labels.shape)
    integers = "int" in keras.backend.standardize_dtype(labels.dtype)
    if (
        len(shape) == 2
        and shape[-1] == num_classes
        and not (integers and num_classes == 1)
    ):
        return ops.cast(labels, dtype)
    if len(shape) == 2 and shape[-1] == 1:
        labels = ops.squeeze(labels, axis=-1)
    elif len(shape) != 1:
        raise ValueError(
            "Labels must be integers of shape (batch_size,) or one-hot of shape "
            f"(batch_size, {num_classes}). Received: labels.shape={shape}"
        )
    return ops.one_hot(ops.cast(labels, "int32"), num_classes, dtype=dtype)
