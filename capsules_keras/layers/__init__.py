"""Capsule layers: vector capsules (`DigitCaps` and the layers around it),
matrix capsules with EM routing, and the batch normalisation the models use."""

from capsules_keras.layers.digit_caps import DigitCaps, legacy_scale_agreement
from capsules_keras.layers.matrix import (
    CAPSULE_SIZE,
    ClassMatrixCaps,
    ConvMatrixCaps,
    PrimaryMatrixCaps,
    cell_coordinates,
)
from capsules_keras.layers.normalization import BatchNormalization
from capsules_keras.layers.vector import Length, Mask, PrimaryCaps, Squash

__all__ = [
    "BatchNormalization",
    "CAPSULE_SIZE",
    "ClassMatrixCaps",
    "ConvMatrixCaps",
    "DigitCaps",
    "Length",
    "Mask",
    "PrimaryCaps",
    "PrimaryMatrixCaps",
    "Squash",
    "cell_coordinates",
    "legacy_scale_agreement",
]
