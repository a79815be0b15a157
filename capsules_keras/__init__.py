"""Capsule Networks with dynamic routing (Sabour et al. 2017) in Keras 3.

Written once in `keras.ops`, so it runs on the torch, jax and tensorflow
backends alike.
"""

from capsules_keras.layers import DigitCaps, Length, Mask, PrimaryCaps, Squash
from capsules_keras.losses import (
    MarginLoss,
    ReconstructionLoss,
    margin_loss,
    reconstruction_loss,
)
from capsules_keras.matrix_capsules import (
    ClassMatrixCaps,
    ConvMatrixCaps,
    MatrixCapsNet,
    PrimaryMatrixCaps,
    SpreadLoss,
    SpreadMarginSchedule,
    em_routing,
    spread_loss,
)
from capsules_keras.models import CapsNet, EfficientCapsNet, MultiDigitCapsNet
from capsules_keras.ops import (
    dynamic_routing,
    exponential_squash,
    inverted_dot_product_routing,
    safe_norm,
    self_attention_routing,
    squash,
)

__version__ = "0.1.0"

__all__ = [
    "CapsNet",
    "ClassMatrixCaps",
    "ConvMatrixCaps",
    "DigitCaps",
    "EfficientCapsNet",
    "Length",
    "MarginLoss",
    "Mask",
    "MatrixCapsNet",
    "MultiDigitCapsNet",
    "PrimaryCaps",
    "PrimaryMatrixCaps",
    "ReconstructionLoss",
    "SpreadLoss",
    "SpreadMarginSchedule",
    "Squash",
    "dynamic_routing",
    "em_routing",
    "exponential_squash",
    "inverted_dot_product_routing",
    "margin_loss",
    "reconstruction_loss",
    "safe_norm",
    "self_attention_routing",
    "spread_loss",
    "squash",
]
