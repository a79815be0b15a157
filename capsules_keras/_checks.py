"""Argument checks shared by the layers, losses and models.

Each raises a `ValueError` that ends with what was received, in the style of
Keras' own layers; `per_axis` and `collapsed` read and write a Conv2D-style
`strides` argument; `renamed_argument` takes an argument's old name.
"""

import warnings


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


def check_axis(name, value, rank=None):
    """Raises unless `value` is an `int` axis, in [-rank, rank) if `rank` is known."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"`{name}` must be an integer. Received: {name}={value!r}")
    if rank is not None and not -rank <= value < rank:
        raise ValueError(
            f"`{name}` must be in [-{rank}, {rank}) for inputs of rank {rank}. "
            f"Received: {name}={value!r}"
        )


def check_positive_int_or_pair(name, value):
    """Raises unless `value` is a positive `int` or a pair of them (a Conv2D
    `kernel_size` or `strides`; Keras' own check lets bools and None through)."""
    pair = isinstance(value, (tuple, list)) and len(value) == 2
    if not all(
        isinstance(v, int) and not isinstance(v, bool) and v > 0
        for v in (value if pair else (value,))
    ):
        raise ValueError(
            f"`{name}` must be a positive integer or a pair of them. "
            f"Received: {name}={value!r}"
        )


def per_axis(name, value):
    """`value` (None, a positive int or a pair of them) as a `(height, width)`
    pair, the way Conv2D reads its `strides`; None stays `(None, None)`."""
    if value is None:
        return (None, None)
    check_positive_int_or_pair(name, value)
    return tuple(value) if isinstance(value, (tuple, list)) else (value, value)


def collapsed(pair):
    """A `(height, width)` pair as one int where the two are equal (as a
    config and a message write it), else as a tuple."""
    return pair[0] if pair[0] == pair[1] else tuple(pair)


def check_padding(value):
    """Raises unless `value` is "valid" or "same" (any case, as Keras takes it)."""
    if not isinstance(value, str) or value.lower() not in ("valid", "same"):
        raise ValueError(
            f"`padding` must be 'valid' or 'same'. Received: padding={value!r}"
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


def renamed_argument(kwargs, old, new, value, default):
    """`value` of argument `new`, or that of its old name `old` in `kwargs`.

    The old name (popped from `kwargs`) still works, from code and from saved
    configs, with a `DeprecationWarning`; both names at once are refused.
    """
    if old not in kwargs:
        return value
    old_value = kwargs.pop(old)
    if value != default:
        raise ValueError(
            f"`{old}` is the old name of `{new}`: pass `{new}` only. "
            f"Received: {old}={old_value!r}, {new}={value!r}"
        )
    warn_renamed(old, new, stacklevel=4)
    return old_value


def warn_renamed(old, new, stacklevel=3):
    """The `DeprecationWarning` for a name `old` that is now `new`."""
    warnings.warn(
        f"`{old}` is deprecated: it is now called `{new}`.",
        DeprecationWarning,
        stacklevel=stacklevel,
    )
