"""Argument checks shared by the layers, losses and models.

Each raises a `ValueError` that ends with what was received, in the style of
Keras' own layers.
"""


def check_positive_int(name, value):
    """Raises unless `value` is a positive `int` (bools are refused)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(
            f"`{name}` must be a positive integer. Received: {name}={value!r}"
        )


def check_non_negative_int(name, value):
    """Raises unless `value` is an `int` >= 0 (bools are refused)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(
            f"`{name}` must be a non-negative integer. Received: {name}={value!r}"
        )


def check_positive_number(name, value):
    """Raises unless `value` is a positive real number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(
            f"`{name}` must be a positive number. Received: {name}={value!r}"
        )


def check_rank(name, shape, rank, layout):
    """Raises unless `shape` has exactly `rank` axes, described by `layout`."""
    if len(shape) != rank:
        raise ValueError(
            f"{name} expects inputs of rank {rank}, {layout}. "
            f"Received: input_shape={tuple(shape)}"
        )


def check_image_shape(image_shape):
    """`image_shape` as a tuple; raises unless it is (height, width, channels) > 0."""
    image_shape = tuple(image_shape)
    if len(image_shape) != 3 or not all(
        isinstance(d, int) and d > 0 for d in image_shape
    ):
        raise ValueError(
            "`image_shape` must be (height, width, channels) of positive "
            f"integers. Received: image_shape={image_shape}"
        )
    return image_shape
