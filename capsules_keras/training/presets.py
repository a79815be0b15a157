"""The trainer's presets: what each changes in `TrainConfig`, per dataset and model.

A preset is a partial override of `TrainConfig`'s fields (a dict of field
names); `trainer_settings` applies `PRESETS[preset]`, then
`MODEL_PRESETS[model][preset]`, then `DATASET_PRESETS[dataset][preset]`,
then the flags given: what a dataset needs (how long an epoch of it is)
outranks a model's schedule, which was tuned on MNIST. A dataset's preset
may name the model too (`model`): the one `--model` defaults to for it.

quick   minutes on a laptop CPU: 5,000 training images. `TrainConfig`'s
        defaults are this preset's, so it changes nothing.
paper   the paper's settings, meant for a GPU: every training image.
"""

PRESETS = {
    # TrainConfig's defaults: the paper's network on 5,000 digits, 5 epochs.
    "quick": {},
    # The paper: Adam 1e-3 decayed by 0.9 per epoch, +-2 px shifts. It does
    # not state the epoch count; 50 is what CapsNet-Keras reports 99.66% with.
    "paper": {
        "epochs": 50,
        "batch_size": 100,
        "lr_decay": 0.9,
        "augment": True,
        "validate": True,
        "max_train_samples": None,
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
        # CapsNet"). A model without these options ignores them.
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
    # A user's folder: Efficient-CapsNet (with its own schedule, batch 16,
    # Adam 5e-4), the capsule model that learned every test folder where the
    # paper's network collapsed or stayed near chance
    # (docs/guides/your-own-images.md, "Which model"); 10 epochs, since a
    # folder of hundreds of images is an epoch of tens of steps.
    "image_folder": {
        "quick": {"model": "efficient", "epochs": 10},
        "paper": {"model": "efficient"},
    },
}
#: What a preset changes for a model.
MODEL_PRESETS = {
    # The paper's network trains 1.6x faster in mixed_bfloat16 on torch on a
    # CPU with bfloat16 instructions, with the accuracy of float32 (the same
    # 98.96% after two epochs of all of MNIST, McNemar p = 1); `auto` picks it
    # only there (docs/benchmarks.md, "Mixed precision on a CPU").
    "capsnet": {"paper": {"dtype_policy": "auto"}},
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


def preset_overrides(preset, dataset, model):
    """What `preset` changes for `dataset` and `model`: one dict, later wins.

    Unknown names change nothing here; `TrainConfig` refuses them.
    """
    return {
        **PRESETS.get(preset, {}),
        **MODEL_PRESETS.get(model, {}).get(preset, {}),
        **DATASET_PRESETS.get(dataset, {}).get(preset, {}),
    }
