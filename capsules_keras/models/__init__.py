"""The capsule models, on a shared base, and the CNN baseline they are compared with.

- `CapsNet` (Sabour et al. 2017) and `MultiDigitCapsNet` (its MultiMNIST
  task), `EfficientCapsNet` (Mazzia et al. 2021): vector capsules with
  routing and a decoder (`VectorCapsNet`);
- `MatrixCapsNet`: matrix capsules with EM routing (Hinton et al. 2018);
- `baseline_cnn`: a plain CNN with CapsNet's parameter budget;
- `PRETRAINED`: trained models shipped with the package
  (`EfficientCapsNet.from_preset("efficient_capsnet_mnist")`).

All capsule models are `CapsuleModel`s: they check their inputs, compute
their own loss and `analyze` a few images in batches.
"""

from capsules_keras.models.base import CapsuleModel
from capsules_keras.models.baseline import baseline_cnn, cnn_units_for
from capsules_keras.models.capsnet import CapsNet
from capsules_keras.models.efficient import EfficientCapsNet
from capsules_keras.models.matrix import MatrixCapsNet
from capsules_keras.models.multi_digit import MultiDigitCapsNet
from capsules_keras.models.pretrained import PRETRAINED, pretrained_card
from capsules_keras.models.vector import VectorCapsNet

__all__ = [
    "CapsNet",
    "CapsuleModel",
    "EfficientCapsNet",
    "MatrixCapsNet",
    "MultiDigitCapsNet",
    "PRETRAINED",
    "VectorCapsNet",
    "baseline_cnn",
    "cnn_units_for",
    "pretrained_card",
]
