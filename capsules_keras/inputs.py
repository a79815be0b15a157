"""Images and labels as users hold them, checked and converted for the models.

`keras.datasets.mnist.load_data()` gives uint8 images in 0..255 of shape
`(n, 28, 28)` and uint8 labels. The models want float32 images in [0, 1] with
a channel axis (CapsNet's decoder ends in a sigmoid, so its reconstruction
target must lie in [0, 1]) and class indices 0..num_classes-1. These helpers
accept the first and return the second, or raise a `ValueError` that says
what was received and what to do:

- integer images (uint8, ...) are taken as 0..255 and divided by 255;
  booleans become 0.0 / 1.0; float images must already lie in [0, 1]
  (a float image in 0..255 is ambiguous, so it is refused, not guessed at);
- `(n, height, width)` gets the channel axis when the model has one channel;
- integer labels must lie in 0..num_classes-1 (1-based labels are refused
  with a hint), one-hot or per-class rows must have `num_classes` columns of
  values in [0, 1] with at least one positive entry per row.

`CapsNet.fit`, `evaluate`, `predict` and `analyze` apply them to NumPy arrays
and tensors before any computation. Datasets they cannot look into ahead of
time (`tf.data.Dataset`, `keras.utils.PyDataset`, generators) are not checked
ahead, but their batches are converted as arrays are: the models' `call` and
loss take every batch through `image_batch`, so integer images in 0..255 are
scaled to [0, 1] and `(batch, height, width)` gets its channel axis however
they were fed. What cannot be told from one batch in a compiled step (float
images outside [0, 1], labels out of range) is the dataset's to get right:
map `prepare_images` / `prepare_labels` over its batches to have them checked.
"""

import keras
import numpy as np


def is_array(value):
    """Whether `value` is an array the helpers can check ahead of training."""
    return isinstance(value, (np.ndarray, list, tuple)) or keras.ops.is_tensor(value)


def image_batch(images, image_shape):
    """A batch of images as the layers take it, however it was fed.

    Integer images (0..255) become float32 in [0, 1], booleans 0.0 / 1.0, and
    `(batch, height, width)` gets the channel axis when `image_shape` has one
    channel; float images pass unchanged. The models apply it in `call` and
    in their loss, so that a batch of uint8 digits trains the same from
    arrays (where `prepare_images` has converted it already), a
    `tf.data.Dataset`, a `keras.utils.PyDataset` or a generator.

    >>> batch = image_batch(keras.ops.full((2, 4, 4), 255, "uint8"), (4, 4, 1))
    >>> tuple(batch.shape), float(keras.ops.max(batch))
    ((2, 4, 4, 1), 1.0)
    """
    dtype = keras.backend.standardize_dtype(images.dtype)
    if dtype == "bool":
        images = keras.ops.cast(images, "float32")
    elif "int" in dtype:
        images = keras.ops.cast(images, "float32") / 255.0
    if len(images.shape) == 3 and image_shape[-1] == 1:
        images = keras.ops.expand_dims(images, -1)  # (batch, height, width, 1)
    return images


def prepare_images(images, image_shape, name="x"):
    """Float32 images in [0, 1] of shape `(n, *image_shape)`.

    Args:
        images: `(n, height, width, channels)`, or `(n, height, width)` when
            `image_shape` has one channel; integer images in 0..255 (divided
            by 255), booleans, or floats in [0, 1].
        image_shape: `(height, width, channels)` the model was built for.
        name: What to call the images in error messages.

    Returns:
        A float32 NumPy array `(n, *image_shape)`.

    >>> prepare_images(np.full((2, 28, 28), 255, "uint8"), (28, 28, 1)).shape
    (2, 28, 28, 1)
    """
    images = _numpy(images)
    image_shape = tuple(image_shape)
    received = images.shape
    if images.ndim == 3 and image_shape[-1] == 1:
        images = images[..., None]  # (n, height, width, 1)
    if images.ndim != 4 or images.shape[1:] != image_shape:
        expected = f"(n, {', '.join(map(str, image_shape))})"
        if image_shape[-1] == 1:
            expected += f" or (n, {image_shape[0]}, {image_shape[1]})"
        raise ValueError(
            f"`{name}` must hold images of shape {expected}. "
            f"Received: {name}.shape={received}"
        )
    if images.dtype == bool:
        return images.astype("float32")
    if np.issubdtype(images.dtype, np.integer):
        low, high = _value_range(images)
        if low < 0 or high > 255:
            raise ValueError(
                f"Integer images must hold pixel values 0..255. Received: {name} "
                f"with values from {low} to {high}"
            )
        return images.astype("float32") / 255.0
    if not np.issubdtype(images.dtype, np.floating):
        raise ValueError(
            f"`{name}` must hold integer, boolean or float pixels. "
            f"Received: {name}.dtype={images.dtype}"
        )
    low, high = _value_range(images)
    if not (low >= 0 and high <= 1):  # also refuses NaN
        raise ValueError(
            f"Float images must lie in [0, 1] (the decoder ends in a sigmoid); "
            f"for 0..255 images divide by 255 or pass them as uint8. Received: "
            f"{name} with values from {low} to {high}"
        )
    return images.astype("float32", copy=False)


def prepare_labels(labels, num_classes, num_images=None, name="y"):
    """Integer class indices `(n,)` (int32) or per-class rows `(n, classes)`.

    Args:
        labels: Class indices `(n,)` or `(n, 1)` (any integer dtype, or
            floats holding whole numbers), or one-hot / per-class rows
            `(n, num_classes)` with values in [0, 1].
        num_classes: Number of classes of the model.
        num_images: The number of images the labels go with, if known.
        name: What to call the labels in error messages.

    Returns:
        int32 indices `(n,)` or float32 rows `(n, num_classes)` (NumPy).

    >>> prepare_labels(np.array([3, 0, 9], "uint8"), 10)
    array([3, 0, 9], dtype=int32)
    """
    labels = _numpy(labels)
    if num_images is not None and len(labels) != num_images:
        raise ValueError(
            f"`{name}` must have one label per image ({num_images}). "
            f"Received: {name}.shape={labels.shape}"
        )
    if labels.ndim == 2 and labels.shape[1] == num_classes and num_classes > 1:
        return _per_class_rows(labels, name)
    if labels.ndim == 2 and labels.shape[1] == 1:
        labels = labels[:, 0]
    if labels.ndim != 1:
        raise ValueError(
            f"`{name}` must be class indices of shape (n,) or one-hot rows of shape "
            f"(n, {num_classes}). Received: {name}.shape={labels.shape}"
        )
    whole = np.issubdtype(labels.dtype, np.integer) or (
        np.issubdtype(labels.dtype, np.floating) and np.all(labels % 1 == 0)
    )
    if labels.dtype == bool or not whole:
        raise ValueError(
            f"`{name}` must hold whole class indices 0..{num_classes - 1}. "
            f"Received: {name} of dtype {labels.dtype}"
            + (" with fractions" if np.issubdtype(labels.dtype, np.floating) else "")
        )
    low, high = _value_range(labels)
    if low < 0 or high >= num_classes:
        hint = (
            " They look 1-based: subtract 1."
            if low == 1 and high == num_classes
            else ""
        )
        raise ValueError(
            f"`{name}` must hold class indices 0..{num_classes - 1}.{hint} "
            f"Received: labels from {low:g} to {high:g}"
        )
    return labels.astype("int32")


def prepare_label_sets(labels, num_classes, per_image, num_images=None, name="y"):
    """The classes of several objects per image: int32 `(n, per_image)`.

    Each row must name `per_image` DIFFERENT classes in 0..num_classes-1
    (MultiMNIST's two digits, say).

    >>> prepare_label_sets([[3, 0], [9, 1]], 10, 2)
    array([[3, 0],
           [9, 1]], dtype=int32)
    """
    labels = _numpy(labels)
    if labels.ndim != 2 or labels.shape[1] != per_image:
        raise ValueError(
            f"`{name}` must hold {per_image} class indices per image, shape "
            f"(n, {per_image}). Received: {name}.shape={labels.shape}"
        )
    flat = prepare_labels(labels.reshape(-1), num_classes, name=name)
    labels = flat.reshape(labels.shape)
    if num_images is not None and len(labels) != num_images:
        raise ValueError(
            f"`{name}` must have one row of labels per image ({num_images}). "
            f"Received: {name}.shape={labels.shape}"
        )
    ordered = np.sort(labels, axis=1)
    repeated = np.flatnonzero((ordered[:, 1:] == ordered[:, :-1]).any(axis=1))
    if len(repeated):
        raise ValueError(
            f"The classes in each row of `{name}` must differ. Received: "
            f"{len(repeated)} rows with a repeated class, the first at index "
            f"{repeated[0]}: {labels[repeated[0]].tolist()}"
        )
    return labels


def prepare_image_sets(images, image_shape, per_image, num_images=None, name="y"):
    """Several images per example (one per object): float32 `(n, per_image, ...)`.

    Each image goes through `prepare_images`.
    """
    images = _numpy(images)
    if images.ndim < 4 or images.shape[1] != per_image:
        raise ValueError(
            f"`{name}` must hold {per_image} images per example, shape "
            f"(n, {per_image}, {', '.join(map(str, image_shape))}). "
            f"Received: {name}.shape={images.shape}"
        )
    if num_images is not None and len(images) != num_images:
        raise ValueError(
            f"`{name}` must have {per_image} images for each of the {num_images} "
            f"inputs. Received: {name}.shape={images.shape}"
        )
    flat = prepare_images(images.reshape(-1, *images.shape[2:]), image_shape, name=name)
    return flat.reshape(len(images), per_image, *image_shape)


def _per_class_rows(rows, name):
    rows = rows.astype("float32")
    low, high = _value_range(rows)
    if not (low >= 0 and high <= 1):
        raise ValueError(
            f"One-hot `{name}` must hold values in [0, 1]. "
            f"Received: values from {low} to {high}"
        )
    empty = np.flatnonzero(rows.max(axis=1, initial=0) == 0)
    if len(empty):
        raise ValueError(
            f"Every one-hot row of `{name}` needs a positive class. "
            f"Received: {len(empty)} all-zero rows, the first at index {empty[0]}"
        )
    return rows


def _value_range(array):
    if not array.size:
        return 0, 0
    return array.min().item(), array.max().item()


def _numpy(value):
    if keras.ops.is_tensor(value):
        return keras.ops.convert_to_numpy(value)
    return np.asarray(value)
