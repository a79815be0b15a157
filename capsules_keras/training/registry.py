"""The networks the trainer builds, by `--model` name: `MODELS`, one builder each.

Each `ModelChoice` says how to build its network for a dataset, what it
compiles with, which targets it trains on, which model flags it takes and
what `--jit-compile auto` means for it (`default_jit_compile`).
"""

import dataclasses

import keras

from capsules_keras._checks import check_non_negative_int
from capsules_keras.losses import SpreadMarginSchedule
from capsules_keras.models import (
    CapsNet,
    EfficientCapsNet,
    MatrixCapsNet,
    MultiDigitCapsNet,
    baseline_cnn,
    cnn_units_for,
)
from capsules_keras.training.presets import preset_settings

#: What `--jit-compile auto` means per backend, measured on a 2-core CPU
#: (CapsNet training, batch 100; benchmarks/README.md):
#: - jax: always compiled by XLA (jit_compile=False would run op by op).
#: - tensorflow: XLA differentiates the strided PrimaryCaps convolution about
#:   25x slower than TensorFlow's own kernels on CPU, so graph mode.
#: - torch: torch.compile reached 92 images/s against 87 eager, after ~25 s
#:   of compilation for each of the train, test and predict functions; the
#:   quick preset (40,000 images) finishes no sooner, so eager. For long runs
#:   try `--jit-compile on`.
JIT_COMPILE_DEFAULTS = {"jax": True, "tensorflow": False, "torch": False}


def own_compile_kwargs(dataset):
    """Nothing besides the optimizer: the model compiles its own loss and metrics."""
    return {}


@dataclasses.dataclass(frozen=True)
class ModelChoice:
    """A network the trainer can build: `--model NAME`.

    Attributes:
        title: How the output and the report name it.
        build: `build(image_shape, dataset, settings)` -> an uncompiled
            `keras.Model` whose `predict` gives class scores.
        targets: The target form it trains on when images hold several
            objects (`capsules_keras.data.multi_mnist.TARGETS`), or None if
            it cannot (`Dataset.accepts_targets`).
        compile_kwargs: `compile_kwargs(dataset)` -> what `compile` needs
            besides the optimizer.
        options: The model flags it takes (keys of `MODEL_OPTIONS`), with
            their defaults; a preset's value, if any, goes first.
        callbacks: What training needs besides the trainer's own callbacks
            (e.g. the spread-loss margin schedule).
        jit_compile: What `--jit-compile auto` means for this model, by
            backend, where it differs from `JIT_COMPILE_DEFAULTS`.
        compile_from: Backends on which compiling pays back only over a long
            run, each with the fewest training images (epochs x images per
            epoch) from which `--jit-compile auto` compiles.
    """

    title: str
    build: object
    targets: str = None
    compile_kwargs: object = own_compile_kwargs
    options: dict = dataclasses.field(default_factory=dict)
    callbacks: tuple = ()
    jit_compile: dict = dataclasses.field(default_factory=dict)
    compile_from: dict = dataclasses.field(default_factory=dict)


def build_capsnet(image_shape, dataset, settings):
    """`CapsNet`, or `MultiDigitCapsNet` for a dataset of several objects an image."""
    kwargs = {
        "image_shape": image_shape,
        "num_classes": dataset.num_classes,
        "routing": settings["routing"],
        "routing_iterations": settings["routing_iterations"],
        "reconstruction_weight": settings["reconstruction_weight"],
        "conv_filters": settings["conv_filters"],
        "primary_capsules": settings["primary_capsules"],
    }
    if dataset.multi_label:
        return MultiDigitCapsNet(digits_per_image=dataset.objects_per_image, **kwargs)
    return CapsNet(**kwargs)


def build_efficient(image_shape, dataset, settings):
    return EfficientCapsNet(
        image_shape=image_shape,
        num_classes=dataset.num_classes,
        routing=settings["routing"],
        routing_iterations=settings["routing_iterations"],
        reconstruction_weight=settings["reconstruction_weight"],
    )


def build_em(image_shape, dataset, settings):
    return MatrixCapsNet(
        image_shape=image_shape,
        num_classes=dataset.num_classes,
        routing_iterations=settings["routing_iterations"],
    )


def build_cnn(image_shape, dataset, settings):
    """`baseline_cnn` with about as many parameters as the preset's CapsNet.

    E.g. 8.2M for MNIST (both presets), 5.3M for MultiMNIST's quick preset
    (whose CapsNet is narrower), 11.4M for its paper preset.
    """
    sizes = preset_settings(settings["preset"], dataset.name)
    capsnet = build_capsnet(
        image_shape,
        dataset,
        {
            **MODELS["capsnet"].options,
            "conv_filters": sizes["conv_filters"],
            "primary_capsules": sizes["primary_capsules"],
        },
    )
    units = cnn_units_for(image_shape, dataset.num_classes, capsnet.count_params())
    return baseline_cnn(
        image_shape,
        dataset.num_classes,
        multi_label=dataset.multi_label,
        dense_units=units,
    )


def cnn_compile_kwargs(dataset):
    """The dataset's loss and metrics of a classifier (softmax or sigmoid outputs)."""
    return {"loss": dataset.classifier_loss, "metrics": dataset.metrics()}


#: The flags of capsule models (`ModelChoice.options` says which take which).
MODEL_OPTIONS = (
    "routing",
    "routing_iterations",
    "reconstruction_weight",
    "conv_filters",
    "primary_capsules",
)
ROUTING_OPTIONS = {
    "routing_iterations": None,  # the routing algorithm's default
    "reconstruction_weight": 0.0005,  # the paper's
}

#: Every network the trainer knows, by `--model` name.
MODELS = {
    "capsnet": ModelChoice(
        "CapsNet",
        build_capsnet,
        "capsnet",
        options={
            "routing": "dynamic",
            **ROUTING_OPTIONS,
            "conv_filters": 256,
            "primary_capsules": 32,
        },
    ),
    # Mazzia et al.'s 161k-parameter network: self-attention routing.
    "efficient": ModelChoice(
        "Efficient-CapsNet",
        build_efficient,
        options={"routing": "self_attention", **ROUTING_OPTIONS},
        # Its step is small convolutions and the primary capsules'
        # contraction, with no strided PrimaryCaps convolution: on
        # tensorflow, XLA trains it faster than graph mode
        # (benchmarks/efficient/README.md).
        jit_compile={"tensorflow": True},
        # torch.compile trains it 1.1-1.7x faster per step on the CPU
        # (2-core Intel Xeon: 895 against 538 images/s with plain `fit` in
        # one process; 430-552 against 260-452 through the trainer), after
        # 45-50 s of compilation. That pays back after 40,000-165,000
        # images, depending on the machine's speed: the quick preset's one
        # epoch of 60,000 digits took 154 s of training compiled against
        # 173 s eager in one pair of runs, 189 against 128 s in another
        # (benchmarks/efficient/README.md). Compiled from two epochs on.
        compile_from={"torch": 120_000},
    ),
    # Hinton et al.'s matrix capsules, scaled for 28x28 images (63k
    # parameters): EM routing, the spread loss with its rising margin.
    "em": ModelChoice(
        "Matrix capsules with EM routing",
        build_em,
        options={"routing_iterations": MatrixCapsNet.ROUTING_ITERATIONS},
        callbacks=(SpreadMarginSchedule,),
        # Its step is the routing loop, not a strided convolution: XLA took
        # 685 ms against graph mode's 1,868 ms per step on tensorflow
        # (benchmarks/em/README.md; with its routing XLA-compiled inside the
        # graph, graph mode now takes 203 ms against XLA's 154). On torch,
        # torch.compile runs a step 2.1x faster (349 against 718 ms), but one
        # epoch of the quick preset took 248 s compiled against 229 s
        # eager (2026-12-04; eager's step has only got faster since): eager.
        jit_compile={"tensorflow": True},
    ),
    # The same-budget CNN of `models.baseline_cnn`, for comparisons that run
    # through the same command, data and schedule.
    "cnn": ModelChoice("baseline CNN", build_cnn, "two_hot", cnn_compile_kwargs),
}


def default_jit_compile(backend=None, model="capsnet", images=None):
    """The measured-faster `jit_compile` setting: what `--jit-compile auto` means.

    Args:
        backend: A Keras backend name; the current one if None.
        model: A `--model` name (a key of `MODELS`): a model's own choice
            (`ModelChoice.jit_compile`) overrides `JIT_COMPILE_DEFAULTS`.
        images: How many images the run trains on (epochs x images per
            epoch), or None if unknown: from the model's
            `ModelChoice.compile_from` images on, a long run compiles.
    """
    if model not in MODELS:
        raise ValueError(
            f"`model` must be one of {sorted(MODELS)}. Received: {model!r}"
        )
    if images is not None:
        check_non_negative_int("images", images)
    backend = backend or keras.backend.backend()
    choice = MODELS[model]
    long_run = choice.compile_from.get(backend)
    if long_run is not None and images is not None and images >= long_run:
        return True
    return choice.jit_compile.get(backend, JIT_COMPILE_DEFAULTS[backend])
