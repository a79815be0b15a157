"""Whole-image transforms in NumPy: shifts, padding, rotations."""

import numpy as np

from capsules_keras._checks import check_positive_int


def shift_images(images, shifts):
    """Moves each image by whole pixels, filling with zeros.

    Args:
        images: `(n, height, width, channels)`.
        shifts: `(n, 2)` integer (rows, columns) offsets; positive moves the
            content down / right.

    Returns:
        Shifted images, same shape and dtype.
    """
    images = np.asarray(images)
    shifts = np.asarray(shifts, dtype=int)
    n, height, width, _ = images.shape
    pad = int(np.abs(shifts).max(initial=0))
    padded = np.pad(images, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    rows = pad - shifts[:, :1] + np.arange(height)  # (n, height)
    cols = pad - shifts[:, 1:] + np.arange(width)  # (n, width)
    return padded[np.arange(n)[:, None, None], rows[:, :, None], cols[:, None, :]]


def _image_batch(images):
    """`images` as a NumPy array, checked to be `(n, height, width, channels)`."""
    images = np.asarray(images)
    if images.ndim != 4:
        raise ValueError(
            "`images` must have shape (n, height, width, channels). "
            f"Received: images.shape={images.shape}"
        )
    return images


def pad_images(images, size):
    """Places each image at the centre of a zero `size x size` canvas.

    The paper's expanded MNIST: 28x28 digits padded to 40x40, then moved by
    up to 6 pixels during training (`ShiftedBatches(x, y, batch_size,
    max_shift=6)`) so that a digit never leaves the canvas. Values are kept
    as they are (no rescaling).

    Args:
        images: `(n, height, width, channels)` with `height, width <= size`.
        size: Side of the square canvas in pixels.

    Returns:
        `(n, size, size, channels)` float32: image `k` at rows
        `top : top + height` and columns `left : left + width`, with
        `top = (size - height) // 2` and `left = (size - width) // 2`, zeros
        elsewhere. When the padding is odd, the extra pixel goes below and
        to the right (28 -> 37: 4 rows above, 5 below).

    >>> padded = pad_images(np.ones((1, 28, 28, 1)), 40)
    >>> padded.shape, float(padded[0, 6:34, 6:34].min()), float(padded.sum())
    ((1, 40, 40, 1), 1.0, 784.0)
    """
    images = _image_batch(images)
    n, height, width, channels = images.shape
    check_positive_int("size", size)
    if size < height or size < width:
        raise ValueError(
            f"`size` must be at least the images' height {height} and width "
            f"{width}. Received: size={size}"
        )
    top, left = (size - height) // 2, (size - width) // 2
    canvas = np.zeros((n, size, size, channels), dtype=np.float32)
    canvas[:, top : top + height, left : left + width] = images
    return canvas


def affine_images(images, angle_degrees=0.0, shift=(0.0, 0.0)):
    """Rotates images about their centre, then shifts them (bilinear, zero fill).

    ```
    out[r, c] = image[R(-angle) @ ((r, c) - centre - shift) + centre]
    ```

    A positive angle turns the content counter-clockwise as displayed (like
    `np.rot90`); a positive shift moves it down / right (like
    `shift_images`). Pixels that come from outside the image are zero. Used
    to test how a model trained on upright, centred digits copes with moved
    and turned ones (a small version of the paper's affNIST experiment).

    Args:
        images: `(n, height, width, channels)`.
        angle_degrees: A number, or one angle per image `(n,)`.
        shift: `(rows, columns)` in pixels (fractions allowed), or one pair per
            image `(n, 2)`.

    Returns:
        Float images of the same shape (float32 for integer inputs).

    >>> image = np.zeros((1, 3, 3, 1)); image[0, 0, 1] = 1.0  # top middle
    >>> affine_images(image, angle_degrees=90)[0, :, :, 0]  # turned to the left
    array([[0., 0., 0.],
           [1., 0., 0.],
           [0., 0., 0.]])
    """
    images = _image_batch(images)
    n, height, width, _ = images.shape
    dtype = images.dtype if np.issubdtype(images.dtype, np.floating) else np.float32
    try:
        angles = np.broadcast_to(np.asarray(angle_degrees, dtype=float), (n,))
        shifts = np.broadcast_to(np.asarray(shift, dtype=float), (n, 2))
    except ValueError:
        raise ValueError(
            "`angle_degrees` must be a number or have shape (n,), and `shift` a "
            f"pair or shape (n, 2), for n={n} images. Received: "
            f"angle_degrees shape {np.shape(angle_degrees)}, "
            f"shift shape {np.shape(shift)}"
        ) from None
    theta = np.deg2rad(angles)[:, None, None]  # (n, 1, 1)
    centre_r, centre_c = (height - 1) / 2, (width - 1) / 2
    # Output pixel coordinates relative to the centre, shift undone: (n, H, W).
    r = np.arange(height)[None, :, None] - centre_r - shifts[:, 0, None, None]
    c = np.arange(width)[None, None, :] - centre_c - shifts[:, 1, None, None]
    # Undo the rotation. Rows point down, so counter-clockwise on screen is
    # (r, c) -> (r cos - c sin, c cos + r sin); its inverse is below.
    source_r = r * np.cos(theta) + c * np.sin(theta) + centre_r  # (n, H, W)
    source_c = c * np.cos(theta) - r * np.sin(theta) + centre_c  # (n, H, W)
    r0, c0 = np.floor(source_r), np.floor(source_c)
    batch = np.arange(n)[:, None, None]
    out = np.zeros(images.shape, dtype=float)
    # Bilinear: the four neighbours, each weighted by its closeness.
    for dr in (0, 1):
        for dc in (0, 1):
            rows, cols = r0 + dr, c0 + dc
            weight = (1 - np.abs(source_r - rows)) * (1 - np.abs(source_c - cols))
            inside = (rows >= 0) & (rows < height) & (cols >= 0) & (cols < width)
            rows = np.clip(rows, 0, height - 1).astype(int)
            cols = np.clip(cols, 0, width - 1).astype(int)
            out += (weight * inside)[..., None] * images[batch, rows, cols]
    return out.astype(dtype)
