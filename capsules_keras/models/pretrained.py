"""Trained models that ship inside the package and load without a network.

Each name of `PRETRAINED` has two files in `weights/`, next to this module:
`<name>.keras`, the trained model saved without its optimizer, and
`<name>.json`, its card: the command, data, epochs, seed and commit that
trained it, and what it scores on the test set (`test_accuracy`, and
`test_errors`, the indices of the test images it gets wrong).
`CapsuleModel.from_preset(name)` loads one.
"""

import json
from pathlib import Path

#: The shipped models: name -> what it is.
PRETRAINED = {
    "capsnet_mnist": (
        "CapsNet (Sabour et al. 2017), the paper's network, trained on all "
        "60,000 MNIST training digits with the trainer's paper preset"
    ),
    "efficient_capsnet_mnist": (
        "EfficientCapsNet (Mazzia et al. 2021) trained on all 60,000 MNIST "
        "training digits with the trainer's paper preset"
    ),
}
WEIGHTS = Path(__file__).resolve().parent / "weights"


def _checked(name):
    if name not in PRETRAINED:
        raise ValueError(
            f"No pretrained model is named {name!r}. Available: {sorted(PRETRAINED)}"
        )
    return name


def pretrained_path(name):
    """The `.keras` file of the pretrained model `name` (a key of `PRETRAINED`)."""
    return WEIGHTS / f"{_checked(name)}.keras"


def pretrained_card(name):
    """The card of the pretrained model `name`, as a dict (see the module)."""
    return json.loads(pretrained_path(name).with_suffix(".json").read_text())
