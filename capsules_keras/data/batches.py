"""Seeded batches for `fit` and `predict`, and `feed`, which serves them.

The batches are `keras.utils.PyDataset`s: in order, shuffled, or shuffled
with the paper's random shifts.
"""

import keras
import numpy as np

from capsules_keras._checks import check_non_negative_int, check_positive_int
from capsules_keras.data.transforms import shift_images


class EpochBatches(keras.utils.PyDataset):
    """Batches of an order drawn afresh every epoch, seeded.

    Batch `index` of epoch `e` depends only on `(seed, e, index)` -- through
    `rows(index)` and `rng(index)` -- so it is the same in any order of
    access and with any number of workers. Subclasses give `__getitem__`.

    Args:
        size: Examples per epoch.
        batch_size: Examples per batch (the last batch may be smaller).
        seed: Seed of the orders and of `rng`.
        **kwargs: Passed to `keras.utils.PyDataset` (`workers`, ...).
    """

    def __init__(self, size, batch_size, seed=0, **kwargs):
        super().__init__(**kwargs)
        check_positive_int("batch_size", batch_size)
        self.size, self.batch_size, self.seed = size, batch_size, seed
        self.epoch = 0
        self._rows = self.order(np.random.default_rng([seed, 0]))

    def order(self, rng):
        """The examples of one epoch, in order: a permutation of `size`."""
        return rng.permutation(self.size)

    def rows(self, index):
        return self._rows[index * self.batch_size : (index + 1) * self.batch_size]

    def rng(self, index):
        return np.random.default_rng([self.seed, self.epoch, index])

    def __len__(self):
        return -(-self.size // self.batch_size)

    def on_epoch_end(self):
        self.epoch += 1
        self._rows = self.order(np.random.default_rng([self.seed, self.epoch]))


class ArrayBatches(EpochBatches):
    """`x` and `y` in batches: in order, or shuffled afresh every epoch.

    Args:
        x: Examples `(n, ...)`.
        y: Targets: an array `(n, ...)`, a tuple or dict of them, or None
            (batches of `x` alone, e.g. for `predict`).
        batch_size: Examples per batch (the last batch may be smaller).
        shuffle: Whether every epoch draws a new order (seeded).
        seed: Seed of the orders.
        **kwargs: Passed to `keras.utils.PyDataset` (`workers`, ...).

    >>> batches = ArrayBatches(np.arange(5), np.arange(5) * 10, batch_size=2)
    >>> len(batches), batches[2]
    (3, (array([4]), array([40])))
    >>> ArrayBatches(np.arange(5), batch_size=2)[0]
    array([0, 1])
    """

    def __init__(self, x, y=None, batch_size=32, shuffle=False, seed=0, **kwargs):
        targets = [] if y is None else keras.tree.flatten(y)
        lengths = {len(x), *(len(a) for a in targets)}
        if len(lengths) > 1:
            raise ValueError(
                "x and y must have the same length. "
                f"Received: lengths {sorted(lengths)}"
            )
        self.x, self.y, self.shuffle = x, y, shuffle
        super().__init__(len(x), batch_size, seed, **kwargs)

    def order(self, rng):
        return rng.permutation(self.size) if self.shuffle else np.arange(self.size)

    def __getitem__(self, index):
        rows = self.rows(index)
        if self.y is None:
            return self.x[rows]
        return self.x[rows], keras.tree.map_structure(lambda a: a[rows], self.y)


class ShiftedBatches(ArrayBatches):
    """Shuffled batches with the paper's random shift of up to `max_shift` px.

    Every image is moved by a random whole number of pixels in
    [-max_shift, max_shift] along each axis, zero-filled (the paper's only
    augmentation). Only `fit` sees these batches; evaluation uses the plain
    images. The reconstruction target is the shifted image the network saw.

    Args:
        x: Images `(n, height, width, channels)`.
        y: Labels `(n,)` or `(n, classes)`.
        batch_size: Images per batch (the last batch may be smaller).
        max_shift: Largest shift in pixels; 0 disables the augmentation.
        seed: Seed of the shuffles and shifts (reproducible in any order of
            batch access).
        **kwargs: Passed to `keras.utils.PyDataset` (`workers`, ...).
    """

    def __init__(self, x, y, batch_size, max_shift=2, seed=0, **kwargs):
        check_non_negative_int("max_shift", max_shift)
        self.max_shift = max_shift
        super().__init__(x, y, batch_size, shuffle=True, seed=seed, **kwargs)

    def __getitem__(self, index):
        images, labels = super().__getitem__(index)
        shifts = self.rng(index).integers(
            -self.max_shift, self.max_shift + 1, (len(images), 2)
        )
        return shift_images(images, shifts), labels


def feed(batches):
    """`batches` (a `keras.utils.PyDataset`) as `fit`/`predict` read them best.

    On tensorflow: a `tf.data.Dataset` of the same batches, in the same order,
    with tf.data's autotuning off. Backend-specific for a measured reason:
    with tensorflow 2.21, Keras feeds a `PyDataset` (and arrays) through a
    tf.data pipeline that tunes itself in a background thread, and the end of
    every pass over it -- every epoch, every validation, every `predict` --
    waits, idle, for that thread's next wake-up, which comes at doubling
    intervals after the pass started (docs/design-decisions.md, "Feeding
    tensorflow without autotuning"). Without the tuning there is no wait.
    The other backends read the `PyDataset` without tf.data, so they get
    `batches` itself.
    """
    if len(batches) == 0:
        raise ValueError(f"`batches` holds no batch. Received: {batches!r}")
    if keras.backend.backend() != "tensorflow":
        return batches
    import tensorflow as tf

    def spec(array):
        array = np.asarray(array)
        return tf.TensorSpec((None, *array.shape[1:]), tf.as_dtype(array.dtype))

    def one_epoch():
        for index in range(len(batches)):
            yield batches[index]
        batches.on_epoch_end()

    dataset = tf.data.Dataset.from_generator(
        one_epoch, output_signature=keras.tree.map_structure(spec, batches[0])
    )
    dataset = dataset.apply(tf.data.experimental.assert_cardinality(len(batches)))
    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.prefetch(1).with_options(options)
