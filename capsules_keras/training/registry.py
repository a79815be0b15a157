"""The networks the trainer builds, by `--model` name: `MODELS`, one builder each.

Each `ModelChoice` says how to build its network for a dataset, what it
compiles with, which targets it trains on, which model flags it takes and
what `--jit-compile auto` means for it (`default_jit_compile`).
"""

import dataclasses
import inspect

import keras

from capsules_keras._checks import check_non_negative_int
from capsules_keras.losses import SpreadMarginSchedule
from capsules_keras.models import (
    CapsNet,
    CapsuleBackbone,
    CapsuleClassifier,
    EfficientCapsNet,
    EfficientEncoder,
    MatrixCapsNet,
    MultiDigitCapsNet,
    MultiDigitClassifier,
    ResidualCNN,
    ResidualEncoder,
    baseline_cnn,
    cnn_units_for,
)
from capsules_keras.training.presets import preset_overrides

#: What `--jit-compile auto` means per backend, measured with the CapsNet
#: (docs/design-decisions.md, "Compiling the training step"):
#: - jax: always compiled by XLA (jit_compile=False would run op by op).
#: - tensorflow: XLA differentiates the strided PrimaryCaps convolution far
#:   more slowly than TensorFlow's own kernels on CPU, so graph mode.
#: - torch: torch.compile's compilation of the train, test and predict
#:   functions outweighs its faster steps over the quick preset, so eager.
#:   For long runs try `--jit-compile on`.
JIT_COMPILE_DEFAULTS = {"jax": True, "tensorflow": False, "torch": False}


def own_compile_kwargs(dataset):
    """Nothing besides the optimizer: the model compiles its own loss and metrics."""
    return {}


@dataclasses.dataclass(frozen=True)
class ModelChoice:
    """A network the trainer can build: `--model NAME`.

    Attributes:
        title: How the output and the report name it.
        build: `build(image_shape, dataset, config)` -> an uncompiled
            `keras.Model` whose `predict` gives class scores (`config`: the
            run's `TrainConfig`).
        targets: The target form it trains on when images hold several
            objects (`capsules_keras.data.multi_mnist.TARGETS`), or None if
            it cannot (`Dataset.accepts_targets`).
        compile_kwargs: `compile_kwargs(dataset)` -> what `compile` needs
            besides the optimizer.
        options: The `TrainConfig` fields of model parts it has, with its
            defaults (None: the routing algorithm's); a preset's value goes
            first. The other models' options are None in its config.
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


def build_capsnet(image_shape, dataset, config):
    """`CapsNet`, or `MultiDigitCapsNet` for a dataset of several objects an image."""
    kwargs = {
        "image_shape": image_shape,
        "num_classes": dataset.num_classes,
        "routing": config.routing,
        "routing_iterations": config.routing_iterations,
        "reconstruction_weight": config.reconstruction_weight,
        "conv_filters": config.conv_filters,
        "primary_capsules": config.primary_capsules,
    }
    if dataset.multi_label:
        return MultiDigitCapsNet(digits_per_image=dataset.objects_per_image, **kwargs)
    return CapsNet(**kwargs)


def build_efficient(image_shape, dataset, config):
    """`EfficientCapsNet`, or its backbone under the several-objects task."""
    kwargs = {
        "num_classes": dataset.num_classes,
        "routing": config.routing,
        "routing_iterations": config.routing_iterations,
    }
    if dataset.multi_label:
        backbone = CapsuleBackbone(EfficientEncoder(image_shape), **kwargs)
        return MultiDigitClassifier(
            backbone,
            digits_per_image=dataset.objects_per_image,
            reconstruction_weight=config.reconstruction_weight,
        )
    return EfficientCapsNet(
        image_shape=image_shape,
        reconstruction_weight=config.reconstruction_weight,
        **kwargs,
    )


def build_residual(image_shape, dataset, config):
    """Capsules on `ResidualEncoder`, under the dataset's task."""
    backbone = CapsuleBackbone(
        ResidualEncoder(image_shape, primary_capsules=config.primary_capsules),
        num_classes=dataset.num_classes,
        routing=config.routing,
        routing_iterations=config.routing_iterations,
    )
    if dataset.multi_label:
        return MultiDigitClassifier(
            backbone,
            digits_per_image=dataset.objects_per_image,
            reconstruction_weight=config.reconstruction_weight,
        )
    return CapsuleClassifier(
        backbone, reconstruction_weight=config.reconstruction_weight
    )


def build_em(image_shape, dataset, config):
    return MatrixCapsNet(
        image_shape=image_shape,
        num_classes=dataset.num_classes,
        routing_iterations=config.routing_iterations,
    )


def build_cnn(image_shape, dataset, config):
    """`baseline_cnn` with about as many parameters as the preset's CapsNet.

    E.g. 8.2M for MNIST (both presets), 5.3M for MultiMNIST's quick preset
    (whose CapsNet is narrower), 11.4M for its paper preset.
    """
    # The CapsNet of `trainer_settings(preset=..., dataset=...)`: its options
    # from the preset for the dataset, else CapsNet's defaults.
    overrides = preset_overrides(config.preset, dataset.name, "capsnet")
    sizes = {name: overrides.get(name) for name in MODELS["capsnet"].options}
    capsnet_config = dataclasses.replace(config, model="capsnet", **sizes)
    capsnet = build_capsnet(image_shape, dataset, capsnet_config)
    units = cnn_units_for(image_shape, dataset.num_classes, capsnet.count_params())
    return baseline_cnn(
        image_shape,
        dataset.num_classes,
        multi_label=dataset.multi_label,
        dense_units=units,
    )


def build_residual_cnn(image_shape, dataset, config):
    """`ResidualCNN`: the residual encoder's trunk with a pooled head."""
    return ResidualCNN(
        image_shape, dataset.num_classes, multi_label=dataset.multi_label
    )


def cnn_compile_kwargs(dataset):
    """The dataset's loss and metrics of a classifier (softmax or sigmoid outputs)."""
    return {"loss": dataset.classifier_loss, "metrics": dataset.metrics()}


def signature_defaults(model_class, *names):
    """`{name: default}` of `model_class`'s arguments `names`: the options a
    model takes, with the defaults its signature gives them (their one home).

    >>> signature_defaults(CapsNet, "routing", "conv_filters")
    {'routing': 'dynamic', 'conv_filters': 256}
    """
    parameters = inspect.signature(model_class).parameters
    return {name: parameters[name].default for name in names}


#: The options of both vector-capsule models (capsnet, efficient).
ROUTING_OPTIONS = ("routing", "routing_iterations", "reconstruction_weight")

#: Every network the trainer knows, by `--model` name.
MODELS = {
    "capsnet": ModelChoice(
        "CapsNet",
        build_capsnet,
        "capsnet",
        options=signature_defaults(
            CapsNet, *ROUTING_OPTIONS, "conv_filters", "primary_capsules"
        ),
    ),
    # Mazzia et al.'s 161k-parameter network: self-attention routing.
    "efficient": ModelChoice(
        "Efficient-CapsNet",
        build_efficient,
        "capsnet",
        options=signature_defaults(EfficientCapsNet, *ROUTING_OPTIONS),
        # Its step is small convolutions and the primary capsules'
        # contraction, with no strided PrimaryCaps convolution: on
        # tensorflow, XLA trains it faster than graph mode
        # (docs/design-decisions.md, "Compiling the training step").
        jit_compile={"tensorflow": True},
        # torch.compile trains it faster per step, but its compilation pays
        # back only over a long run: the quick preset's one epoch of MNIST
        # came out faster one way in one pair of runs and the other way in
        # another, so it is compiled from two epochs on
        # (docs/design-decisions.md, "Compiling the training step").
        compile_from={"torch": 120_000},
    ),
    # Capsules on a small residual network that shrinks the map first
    # (models/residual.py): the encoder for photographs.
    "residual": ModelChoice(
        "capsules on a residual encoder",
        build_residual,
        "capsnet",
        options={
            **signature_defaults(CapsuleBackbone, "routing", "routing_iterations"),
            **signature_defaults(CapsuleClassifier, "reconstruction_weight"),
            **signature_defaults(ResidualEncoder, "primary_capsules"),
        },
    ),
    # Hinton et al.'s matrix capsules, scaled for 28x28 images (63k
    # parameters): EM routing, the spread loss with its rising margin.
    "em": ModelChoice(
        "Matrix capsules with EM routing",
        build_em,
        options=signature_defaults(MatrixCapsNet, "routing_iterations"),
        callbacks=(SpreadMarginSchedule,),
        # Its step is the routing loop, not a strided convolution, so XLA
        # runs it faster than graph mode on tensorflow. On torch,
        # torch.compile runs a step faster, but its compilations made an
        # epoch of the quick preset slower than eager: eager
        # (docs/design-decisions.md, "Compiling the training step").
        jit_compile={"tensorflow": True},
    ),
    # The same-budget CNN of `models.baseline_cnn`, for comparisons that run
    # through the same command, data and schedule.
    "cnn": ModelChoice("baseline CNN", build_cnn, "two_hot", cnn_compile_kwargs),
    # The trunk of `residual` with pooling and a dense layer: its CNN.
    "residual_cnn": ModelChoice(
        "residual CNN", build_residual_cnn, "two_hot", cnn_compile_kwargs
    ),
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
