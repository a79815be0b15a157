"""MultiMNIST: two overlapping digits of different classes in one image.

Sabour et al. (2017), section 6: each 28x28 digit is placed on a 36x36
canvas, shifted by up to 4 pixels in each direction, and overlaid on a digit
of a DIFFERENT class from the same split (training or test); the pixel values
add and are clipped to 1. The network must name both digits, and the paper's
CapsNet reconstructs each from its own capsule.

```
digit_a, digit_b       28x28, labels a != b, from the same split
canvas_a = shift(pad(digit_a, 4), (dy_a, dx_a))    # 36x36, |dy|, |dx| <= 4
canvas_b = shift(pad(digit_b, 4), (dy_b, dx_b))
image    = min(canvas_a + canvas_b, 1)
```

Training pairs are drawn on the fly (`MultiMNISTBatches`, a seeded
`keras.utils.PyDataset`), so no file of millions of images is needed; the test
pairs are one fixed, seeded set built only from test digits
(`multi_mnist_pairs`). Every function works from any MNIST source
(`capsules_keras.data.load_mnist`).

Targets (`y`) come in one of two forms (`TARGETS`):
    - `"capsnet"`: a dict with `"labels"` `(n, 2)` int32 (the two classes)
      and `"digits"` `(n, 2, 36, 36, 1)` float32 (each shifted digit alone,
      the reconstruction targets of `MultiDigitCapsNet`);
    - `"two_hot"`: `(n, 10)` float32 rows with a 1 at both classes, for a
      network with sigmoid outputs (`baseline_cnn(..., multi_label=True)`).
"""

import numpy as np

from capsules_keras._checks import check_non_negative_int, check_positive_int
from capsules_keras.data.batches import EpochBatches

#: The paper's canvas (28 + 2 x 4 pixels) and largest shift.
CANVAS_SIZE = 36
MAX_SHIFT = 4
#: Size of the fixed test set (`fixed_test_set`).
TEST_PAIRS = 10_000
TARGETS = ("capsnet", "two_hot")


def _check_arguments(images, labels, canvas_size, max_shift):
    images = np.asarray(images)
    labels = np.asarray(labels)
    if images.ndim != 4:
        raise ValueError(
            "`images` must be (n, height, width, channels) digits, e.g. from "
            f"`load_mnist()`. Received: images.shape={images.shape}"
        )
    if labels.shape != (len(images),):
        raise ValueError(
            f"`labels` must be {len(images)} integer classes, one per image. "
            f"Received: labels.shape={labels.shape}"
        )
    if len(np.unique(labels)) < 2:
        raise ValueError(
            "Pairs need digits of at least two different classes. "
            f"Received: classes {np.unique(labels).tolist()}"
        )
    check_positive_int("canvas_size", canvas_size)
    check_non_negative_int("max_shift", max_shift)
    height, width = images.shape[1:3]
    if canvas_size < max(height, width):
        raise ValueError(
            f"`canvas_size` must be at least the digit size {height}x{width}. "
            f"Received: canvas_size={canvas_size}"
        )
    return images, labels


def place_digits(digits, shifts, canvas_size=CANVAS_SIZE):
    """Digits centred on a larger blank canvas, then moved by whole pixels.

    Args:
        digits: `(n, height, width, channels)`.
        shifts: `(n, 2)` integer (rows, columns) offsets from the centred
            position; positive moves the digit down / right. A shift beyond
            the canvas margin crops the digit (MNIST digits have a blank
            border of about 4 pixels, so little is lost).
        canvas_size: Side of the square canvas.

    Returns:
        `(n, canvas_size, canvas_size, channels)`, same dtype.

    >>> placed = place_digits(np.ones((1, 28, 28, 1)), [[4, -4]])[0, :, :, 0]
    >>> placed.sum(axis=0)[25:30]  # columns 0..27: moved 4 to the left
    array([28., 28., 28.,  0.,  0.])
    """
    digits = np.asarray(digits)
    shifts = np.asarray(shifts, dtype=int)
    n, height, width, channels = digits.shape
    canvas = np.zeros((n, canvas_size, canvas_size, channels), digits.dtype)
    top = (canvas_size - height) // 2 + shifts[:, 0]
    left = (canvas_size - width) // 2 + shifts[:, 1]
    for k in range(n):
        # The part of the digit that lands on the canvas.
        r0, c0 = max(0, -top[k]), max(0, -left[k])
        r1 = min(height, canvas_size - top[k])
        c1 = min(width, canvas_size - left[k])
        if r1 > r0 and c1 > c0:
            canvas[k, top[k] + r0 : top[k] + r1, left[k] + c0 : left[k] + c1] = digits[
                k, r0:r1, c0:c1
            ]
    return canvas


def draw_partners(labels, rows, rng):
    """For each index in `rows`, a random index of a digit of another class.

    Uniform over all digits of the other classes (a draw of the same class is
    redrawn).

    Args:
        labels: `(n,)` classes of the whole split.
        rows: Indices of the first digits.
        rng: A `numpy.random.Generator`.

    Returns:
        `(len(rows),)` indices into `labels`.
    """
    labels = np.asarray(labels)
    partners = rng.integers(0, len(labels), len(rows))
    same = labels[partners] == labels[rows]
    while same.any():
        partners[same] = rng.integers(0, len(labels), int(same.sum()))
        same = labels[partners] == labels[rows]
    return partners


def overlay_pairs(images, labels, rows, partners, shifts, canvas_size=CANVAS_SIZE):
    """Overlaid pairs `images[rows]` + `images[partners]`, shifted by `shifts`.

    Args:
        images: `(n, height, width, channels)` digits in [0, 1].
        labels: `(n,)` their classes.
        rows: `(m,)` indices of the first digit of each pair.
        partners: `(m,)` indices of the second digit of each pair.
        shifts: `(m, 2, 2)` integer shifts (digit, rows/columns).
        canvas_size: Side of the square canvas.

    Returns:
        `(pairs, pair_labels, digits)`: float32 `(m, S, S, channels)` images
        `min(a + b, 1)`, int32 `(m, 2)` classes, float32
        `(m, 2, S, S, channels)` each shifted digit alone.
    """
    images = np.asarray(images, dtype="float32")
    shifts = np.asarray(shifts, dtype=int)
    digits = np.stack(
        [
            place_digits(images[rows], shifts[:, 0], canvas_size),
            place_digits(images[partners], shifts[:, 1], canvas_size),
        ],
        axis=1,
    )
    pairs = np.minimum(digits.sum(axis=1), 1.0)
    pair_labels = np.stack([labels[rows], labels[partners]], axis=1).astype("int32")
    return pairs, pair_labels, digits


def random_pairs(images, labels, rows, rng, max_shift, canvas_size):
    """`overlay_pairs` of `rows` with random partners and random shifts."""
    partners = draw_partners(labels, rows, rng)
    shifts = rng.integers(-max_shift, max_shift + 1, (len(rows), 2, 2))
    return overlay_pairs(images, labels, rows, partners, shifts, canvas_size)


def as_targets(pair_labels, digits, targets, num_classes=10):
    """The `y` of a batch in the form `targets` names (see the module doc)."""
    if targets == "capsnet":
        return {"labels": pair_labels, "digits": digits}
    two_hot = np.zeros((len(pair_labels), num_classes), "float32")
    np.put_along_axis(two_hot, pair_labels, 1.0, axis=1)
    return two_hot


def _check_targets(targets):
    if targets not in TARGETS:
        raise ValueError(f"`targets` must be one of {TARGETS}. Received: {targets!r}")


def multi_mnist_pairs(
    images,
    labels,
    num_pairs=10_000,
    max_shift=MAX_SHIFT,
    canvas_size=CANVAS_SIZE,
    seed=0,
    targets="capsnet",
):
    """A fixed, seeded set of overlaid pairs, e.g. the test set from test digits.

    Every digit is the first digit of a pair about equally often (the digits
    are taken in a seeded random order, cycling when `num_pairs` exceeds
    them); its partner is a random digit of another class.

    Args:
        images: `(n, 28, 28, 1)` digits in [0, 1] of ONE split.
        labels: `(n,)` their classes.
        num_pairs: How many pairs.
        max_shift: Largest shift of each digit in pixels, per axis.
        canvas_size: Side of the square canvas (36 in the paper).
        seed: The same seed gives the same pairs.
        targets: `"capsnet"` or `"two_hot"` (see the module doc).

    Returns:
        `(x, y)`: float32 images `(num_pairs, S, S, 1)` and the targets.
    """
    images, labels = _check_arguments(images, labels, canvas_size, max_shift)
    check_positive_int("num_pairs", num_pairs)
    _check_targets(targets)
    rng = np.random.default_rng(seed)
    rows = _cycled_permutation(rng, len(images), num_pairs)
    pairs, pair_labels, digits = random_pairs(
        images, labels, rows, rng, max_shift, canvas_size
    )
    return pairs, as_targets(pair_labels, digits, targets)


def fixed_test_set(images, labels, num_pairs=None):
    """The fixed MultiMNIST test set: `TEST_PAIRS` pairs (or `num_pairs`), seed 0.

    Built from test digits only, with the paper's canvas and shifts; the same
    digits always give the same pairs, so every training run and
    `python -m capsules_keras.evaluate` test on the same set.
    """
    return multi_mnist_pairs(images, labels, num_pairs or TEST_PAIRS, seed=0)


def _cycled_permutation(rng, n, size):
    """`size` indices: random permutations of `range(n)`, one after another."""
    return np.concatenate([rng.permutation(n) for _ in range(-(-size // n))])[:size]


class MultiMNISTBatches(EpochBatches):
    """Freshly drawn overlaid pairs for `fit`, seeded, on every backend.

    Each epoch takes the training digits in a new random order as the first
    digits of `pairs_per_epoch` pairs, with a random partner of another class
    and random shifts for both. A batch depends only on `(seed, epoch,
    index)`, so the pairs are the same in any order of access.

    Args:
        images: `(n, 28, 28, 1)` training digits in [0, 1].
        labels: `(n,)` their classes.
        batch_size: Pairs per batch (the last batch may be smaller).
        pairs_per_epoch: Pairs per epoch; default one per training digit.
        max_shift: Largest shift of each digit in pixels, per axis.
        canvas_size: Side of the square canvas.
        seed: Seed of the order, partners and shifts.
        targets: `"capsnet"` or `"two_hot"` (see the module doc).
        **kwargs: Passed to `keras.utils.PyDataset` (`workers`, ...).
    """

    def __init__(
        self,
        images,
        labels,
        batch_size,
        pairs_per_epoch=None,
        max_shift=MAX_SHIFT,
        canvas_size=CANVAS_SIZE,
        seed=0,
        targets="capsnet",
        **kwargs,
    ):
        self.images, self.labels = _check_arguments(
            images, labels, canvas_size, max_shift
        )
        if pairs_per_epoch is not None:
            check_positive_int("pairs_per_epoch", pairs_per_epoch)
        _check_targets(targets)
        self.max_shift = max_shift
        self.canvas_size = canvas_size
        self.targets = targets
        size = pairs_per_epoch or len(self.images)
        super().__init__(size, batch_size, seed, **kwargs)

    @property
    def pairs_per_epoch(self):
        return self.size

    def order(self, rng):
        return _cycled_permutation(rng, len(self.images), self.size)

    def __getitem__(self, index):
        pairs, pair_labels, digits = random_pairs(
            self.images,
            self.labels,
            self.rows(index),
            self.rng(index),
            self.max_shift,
            self.canvas_size,
        )
        return pairs, as_targets(pair_labels, digits, self.targets)


def bounding_box_overlap(digits, threshold=0.0):
    """How much the bounding boxes of the two digits of each pair overlap.

    The paper reports "on average 80% overlap" without defining it; this is
    the area of the intersection of the two boxes over the area of the
    smaller box (1 when one box lies inside the other).

    Args:
        digits: `(n, 2, S, S, channels)` the two placed digits of each pair.
        threshold: A pixel above this value belongs to the digit.

    Returns:
        `(n,)` float fractions in [0, 1].
    """
    digits = np.asarray(digits)
    ink = digits.max(axis=-1) > threshold  # (n, 2, S, S)
    rows, cols = ink.any(axis=3), ink.any(axis=2)  # (n, 2, S)
    index = np.arange(ink.shape[-1])

    def extent(mask):
        first = np.where(mask, index, ink.shape[-1]).min(axis=-1)
        last = np.where(mask, index, -1).max(axis=-1)
        return first, last + 1  # (n, 2) each

    def common(first, last):  # length of the shared extent of the two boxes
        return np.clip(last.min(axis=1) - first.max(axis=1), 0, None)

    (r0, r1), (c0, c1) = extent(rows), extent(cols)
    area = np.clip(r1 - r0, 0, None) * np.clip(c1 - c0, 0, None)  # (n, 2)
    smaller = np.maximum(area.min(axis=1), 1)
    return common(r0, r1) * common(c0, c1) / smaller
