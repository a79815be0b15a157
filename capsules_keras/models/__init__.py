"""The capsule models, composed from a backbone and a task, and the CNN baseline.

A model is a task on a backbone (KerasHub's shape):

```
backbone = CapsuleBackbone(encoder, num_classes)  # images -> class capsules
  encoder: a CapsuleEncoder (the contract: models/encoder.py)
           CapsNetEncoder     conv -> PrimaryCaps (Sabour et al. 2017)
           EfficientEncoder   conv stack -> depthwise capsules (Mazzia et al.)
           ResidualEncoder    residual blocks -> PrimaryCaps (for photographs)
model = CapsuleClassifier(backbone)      # one label: lengths, decoder, loss
model = MultiDigitClassifier(backbone)   # several digits per image
```

so every encoder trains on every task; a new encoder or task is one new
module. The papers' models are these compositions under their names, with
the papers' arguments:

- `CapsNet` (Sabour et al. 2017) and `MultiDigitCapsNet` (its MultiMNIST
  task), `EfficientCapsNet` (Mazzia et al. 2021);
- `MatrixCapsNet`: matrix capsules with EM routing (Hinton et al. 2018);
- `baseline_cnn`: a plain CNN with CapsNet's parameter budget (a
  `BaselineCNN`, which scales integer images as the capsule models do),
  and `ResidualCNN`, the residual encoder's trunk with a pooled head;
- `PRETRAINED`: trained models shipped with the package
  (`EfficientCapsNet.from_preset("efficient_capsnet_mnist")`).

All capsule models are `CapsuleModel`s: they check their inputs, compute
their own loss and `analyze` a few images in batches.
"""

from capsules_keras.models.backbone import CapsuleBackbone
from capsules_keras.models.base import CapsuleModel
from capsules_keras.models.baseline import (
    BaselineCNN,
    ResidualCNN,
    baseline_cnn,
    cnn_units_for,
)
from capsules_keras.models.capsnet import CapsNet, CapsNetEncoder, capsnet_backbone
from capsules_keras.models.classifier import CapsuleClassifier
from capsules_keras.models.efficient import EfficientCapsNet, EfficientEncoder
from capsules_keras.models.encoder import CapsuleEncoder
from capsules_keras.models.matrix import MatrixCapsNet
from capsules_keras.models.multi_digit import MultiDigitCapsNet, MultiDigitClassifier
from capsules_keras.models.pretrained import PRETRAINED, pretrained_card
from capsules_keras.models.residual import ResidualBlock, ResidualEncoder

__all__ = [
    "BaselineCNN",
    "CapsNet",
    "CapsNetEncoder",
    "CapsuleBackbone",
    "CapsuleClassifier",
    "CapsuleEncoder",
    "CapsuleModel",
    "EfficientCapsNet",
    "EfficientEncoder",
    "MatrixCapsNet",
    "MultiDigitCapsNet",
    "MultiDigitClassifier",
    "PRETRAINED",
    "ResidualBlock",
    "ResidualCNN",
    "ResidualEncoder",
    "baseline_cnn",
    "capsnet_backbone",
    "cnn_units_for",
    "pretrained_card",
]
