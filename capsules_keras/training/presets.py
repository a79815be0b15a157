"""The trainer's presets: a run's settings by preset, adjusted per dataset and model.

quick   minutes on a laptop CPU: 5,000 training images.
paper   the paper's settings, meant for a GPU: every training image.
"""

PRESETS = {
    # Full paper architecture, short schedule: minutes on 2 CPU cores. Its
    # time is set by the training images it sees, so it trains on a fixed,
    # class-balanced, seeded subset of 5,000 of them whatever the source
    # (the full download has 60,000) and tests on the whole test set.
    # 5 epochs, not 8: 8 gained little accuracy for much more time. No
    # augmentation: with so few epochs the shifted digits slow convergence
    # more than they help (docs/design-decisions.md, "The quick preset:
    # 5 epochs of 5,000 digits").
    "quick": {
        "epochs": 5,
        "batch_size": 50,
        "learning_rate": 1e-3,
        "lr_decay": 0.8,
        "augment": False,
        "validate": False,
        "max_train_samples": 5000,
        "pairs_per_epoch": None,
        "conv_filters": 256,
        "primary_capsules": 32,
    },
    # The paper: Adam 1e-3 decayed by 0.9 per epoch, +-2 px shifts. It does
    # not state the epoch count; 50 is what CapsNet-Keras reports 99.66% with.
    "paper": {
        "epochs": 50,
        "batch_size": 100,
        "learning_rate": 1e-3,
        "lr_decay": 0.9,
        "augment": True,
        "validate": True,
        "max_train_samples": None,
        "pairs_per_epoch": None,
        "conv_filters": 256,
        "primary_capsules": 32,
    },
}
#: What a preset changes for a dataset.
DATASET_PRESETS = {
    # Two overlapping digits on a 36x36 canvas (paper, section 6). Pairs are
    # drawn afresh every epoch, so an epoch is `pairs_per_epoch` pairs; a
    # 36x36 pair costs several 28x28 digits in the paper's network.
    "multi_mnist": {
        # A narrower CapsNet (half the convolution channels, 16 capsule
        # types: 5.3M parameters, several times faster than the paper's) so
        # that the quick preset learns something in minutes on a CPU
        # (docs/design-decisions.md, "MultiMNIST's quick preset: a narrower
        # CapsNet").
        "quick": {
            "epochs": 4,
            "pairs_per_epoch": 10_000,
            "conv_filters": 128,
            "primary_capsules": 16,
        },
        # The paper's network; the paper trained on 60M pairs (1,000 per
        # digit), this preset on 50 x 60,000 freshly drawn ones.
        "paper": {"pairs_per_epoch": 60_000},
    },
}
#: What a preset changes for a model.
MODEL_PRESETS = {
    # Mazzia et al.'s MNIST schedule: Adam 5e-4 decayed x0.98 per epoch,
    # batch 16 (100 epochs with augmentation in the paper).
    "efficient": {
        # One epoch of every training digit, without shifts: with 5,000
        # digits this model is short of data, not of epochs, and one epoch
        # of 60,000 is more accurate than the general quick preset's 5 epochs
        # of 5,000 (docs/design-decisions.md, "Efficient-CapsNet's quick preset: one
        # epoch of every digit").
        "quick": {
            "epochs": 1,
            "batch_size": 16,
            "learning_rate": 5e-4,
            "lr_decay": 0.98,
            "max_train_samples": None,
        },
        "paper": {
            "epochs": 100,
            "batch_size": 16,
            "learning_rate": 5e-4,
            "lr_decay": 0.98,
        },
    },
    # Adam 3e-3 at batch 32 learns (1e-2 was slower); x0.9 per epoch. The
    # spread-loss margin reaches 0.9 after 7 epochs (SpreadMarginSchedule),
    # so the quick preset runs 8 (docs/design-decisions.md, "Matrix
    # capsules' schedule").
    "em": {
        "quick": {
            "epochs": 8,
            "batch_size": 32,
            "learning_rate": 3e-3,
            "lr_decay": 0.9,
        },
        "paper": {"batch_size": 32, "learning_rate": 3e-3, "lr_decay": 0.9},
    },
}
#: The settings a preset gives, each also a flag of the same name.
SETTINGS = (
    "epochs",
    "batch_size",
    "learning_rate",
    "lr_decay",
    "augment",
    "validate",
    "max_train_samples",
    "pairs_per_epoch",
    "conv_filters",
    "primary_capsules",
)


def preset_settings(preset, dataset, model=None):
    """`PRESETS[preset]` with what the dataset's and the model's presets change.

    Args:
        preset: A key of `PRESETS`.
        dataset: A dataset name (`capsules_keras.data.DATASETS`).
        model: A model name (`capsules_keras.training.MODELS`), or None for
            the dataset's preset alone.
    """
    if preset not in PRESETS:
        raise ValueError(
            f"`preset` must be one of {sorted(PRESETS)}. Received: {preset!r}"
        )
    return {
        **PRESETS[preset],
        **DATASET_PRESETS.get(dataset, {}).get(preset, {}),
        **MODEL_PRESETS.get(model, {}).get(preset, {}),
    }
