"""Capsule networks and their routing algorithms in Keras 3.

Dynamic routing (Sabour et al. 2017), self-attention routing with
Efficient-CapsNet (Mazzia et al. 2021), inverted dot-product attention
routing (Tsai et al. 2020), and matrix capsules with EM routing (Hinton,
Sabour & Frosst 2018). Written once in `keras.ops`, so it runs on the torch,
jax and tensorflow backends alike; where one backend takes a faster path to
the same result, the reason is measured (docs/design-decisions.md).
"""

from capsules_keras import _startup  # noqa: F401 (first: imports Keras quietly)
from capsules_keras.capacity import plan_capacity
from capsules_keras.layers import (
    ClassMatrixCaps,
    ConvMatrixCaps,
    DigitCaps,
    Length,
    Mask,
    PrimaryCaps,
    PrimaryMatrixCaps,
    Squash,
)
from capsules_keras.losses import (
    MarginLoss,
    ReconstructionLoss,
    SpreadLoss,
    SpreadMarginSchedule,
    margin_loss,
    reconstruction_loss,
    spread_loss,
)
from capsules_keras.models import (
    BaselineCNN,
    CapsNet,
    CapsNetEncoder,
    CapsuleBackbone,
    CapsuleClassifier,
    CapsuleEncoder,
    EfficientCapsNet,
    EfficientEncoder,
    MatrixCapsNet,
    MultiDigitCapsNet,
    MultiDigitClassifier,
    ResidualCNN,
    ResidualEncoder,
    baseline_cnn,
)
from capsules_keras.ops import exponential_squash, safe_norm, squash
from capsules_keras.routing import (
    dynamic_routing,
    em_routing,
    inverted_dot_product_routing,
    self_attention_routing,
)

__version__ = "0.2.0"

__all__ = [
    "BaselineCNN",
    "CapsNet",
    "CapsNetEncoder",
    "CapsuleBackbone",
    "CapsuleClassifier",
    "CapsuleEncoder",
    "ClassMatrixCaps",
    "ConvMatrixCaps",
    "DigitCaps",
    "EfficientCapsNet",
    "EfficientEncoder",
    "Length",
    "MarginLoss",
    "Mask",
    "MatrixCapsNet",
    "MultiDigitCapsNet",
    "MultiDigitClassifier",
    "PrimaryCaps",
    "PrimaryMatrixCaps",
    "ReconstructionLoss",
    "ResidualCNN",
    "ResidualEncoder",
    "SpreadLoss",
    "SpreadMarginSchedule",
    "Squash",
    "baseline_cnn",
    "dynamic_routing",
    "em_routing",
    "exponential_squash",
    "inverted_dot_product_routing",
    "margin_loss",
    "plan_capacity",
    "reconstruction_loss",
    "safe_norm",
    "self_attention_routing",
    "spread_loss",
    "squash",
]
