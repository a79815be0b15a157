"""Capacity planning: what a capsule model costs before it trains.

```
plan = plan_capacity(model, batch_size=32)   # parameters, votes, memory, FLOPs
print(plan.table())                          # what the trainer prints
check_fits(plan, available_memory())         # ValueError if the batch won't fit
```

The class-capsule kernel `W[i,j,n,m]` and the votes `u_hat[b,i,j,m]` grow
with the number of primary capsules `i`, which grows with the image's area
at fixed strides: with the paper's, `CapsNet((128, 128, 3), 4)` has 100,352
primary capsules and 107,690,752 parameters (its default strides keep the
grid at most 12x12: 3,872 capsules, docs/guides/capacity.md). The planner
counts from the layers' shapes (`compute_output_shape`), never from their
weights, so an unbuilt `CapsuleBackbone` plans a model without allocating it:

>>> from capsules_keras.models import capsnet_backbone
>>> paper = capsnet_backbone((128, 128, 3), 4, conv_strides=1, primary_strides=2)
>>> plan = plan_capacity(paper, batch_size=8)
>>> plan.parameters, plan.primary_capsules
(107690752, 100352)

Peak training memory, for a batch of `b` images (bytes, float32):

```
peak = overhead + 4 * (weights + (3 + optimizer_copies + kernel_copies) * trainable)
     + 4 * b * (vote_copies * votes + couplings + features + patches + decoder + image)
```

- weights, their gradients and Adam's two moments: 4 copies of the weights;
  the optimizer's temporaries and the kernels' layout copies (per backend,
  `BACKEND_COSTS`);
- per image, what the backward pass keeps and the largest temporaries
  beside it: the votes `(in_capsules, classes, digit_dim)` (kept, their
  gradient, and a copy in another layout), the routing logits and couplings
  of every iteration, every feature map of the encoder, the PrimaryCaps
  patches where the backend convolves by patches (jax on CPU), the decoder;
- `overhead`: what the framework itself adds when training starts (its
  trainer, compiled functions, allocator pools), measured with a CapsNet too
  small to hold anything else.

The estimate is checked against peak memory measured on every backend
(docs/guides/capacity.md has the table and the command).
"""

import dataclasses
import math
import os
from typing import NamedTuple

import keras

from capsules_keras._checks import check_positive_int

MB = 2**20


class BackendCosts(NamedTuple):
    """What training costs on one backend beyond the tensors every one keeps."""

    # Framework memory that training adds whatever the model (bytes).
    overhead: int
    # Temporaries of Adam's update, in copies of the trainable weights.
    optimizer_copies: float
    # Copies of the weights made for the step (layouts a matmul needs).
    kernel_copies: float
    # Vote-sized tensors alive at the step's peak.
    vote_copies: float


#: What each backend's training keeps, by reading its code paths; the
#: overheads are the measured training memory of a CapsNet of 25k weights
#: (docs/guides/capacity.md, with the check against measured peaks).
BACKEND_COSTS = {
    # torch's Adam updates every weight at once (`torch._foreach_*`): three
    # weight-sized lists alive together. Its einsums copy the kernels into
    # the layout of their matmul and keep the copies for the backward pass.
    # Votes: kept, their written-out gradient, and that gradient's copy in
    # the layout of the kernel's gradient.
    "torch": BackendCosts(28 * MB, 3.0, 1.0, 3.0),
    # XLA fuses Adam's update into the donated weights' buffers (about one
    # copy of temporaries); autodiff of the routing loop keeps the votes
    # and builds their gradient beside them.
    "jax": BackendCosts(331 * MB, 1.0, 0.0, 3.0),
    # Adam one variable at a time; the votes as on jax.
    "tensorflow": BackendCosts(171 * MB, 1.0, 0.0, 3.0),
}


@dataclasses.dataclass(frozen=True)
class CapacityPlan:
    """What a capsule model costs to train at one batch size.

    Byte counts are for the model's compute dtype (float32: 4 bytes a
    number). `peak_bytes` and `largest_batch` are None-free only where the
    activations are planned (`CapsuleClassifier` models and their
    backbones); for `MatrixCapsNet` only the parameters and the fixed state
    are.
    """

    model: str
    backend: str
    image_shape: tuple
    batch_size: int
    #: All weights, as `model.count_params()` counts them.
    parameters: int
    #: Weights that train (Adam keeps two moments of each).
    trainable_parameters: int
    #: The class-capsule kernel and its routing's weights.
    class_capsule_parameters: int
    #: The decoder that reconstructs the image (0 if none).
    decoder_parameters: int
    primary_capsules: int
    primary_dim: int
    num_classes: int
    digit_dim: int
    routing: str
    routing_iterations: int
    #: The votes `u_hat` of one image, `in_capsules x classes x digit_dim`.
    vote_bytes_per_image: int
    #: Memory that does not grow with the batch: overhead, weights, state.
    fixed_bytes: int
    #: Memory each image of the batch adds at the step's peak; None if not
    #: planned.
    bytes_per_image: int | None
    #: Forward multiply-adds x 2 of the convolutions, dense layers, votes and
    #: routing contractions (elementwise operations left out); None if not
    #: planned.
    flops_per_image: int | None
    dtype_bytes: int = 4

    @property
    def vote_bytes(self):
        """The votes of the whole batch."""
        return self.batch_size * self.vote_bytes_per_image

    @property
    def peak_bytes(self):
        """Estimated peak training memory at `batch_size` (None if unplanned)."""
        return self.peak_bytes_for(self.batch_size)

    def peak_bytes_for(self, batch_size):
        """Estimated peak training memory at another batch size."""
        check_positive_int("batch_size", batch_size)
        if self.bytes_per_image is None:
            return None
        return self.fixed_bytes + batch_size * self.bytes_per_image

    def largest_batch(self, memory):
        """The largest batch whose estimated peak fits in `memory` bytes (0: none).

        >>> from capsules_keras.models import capsnet_backbone
        >>> plan = plan_capacity(capsnet_backbone(), batch_size=1)
        >>> plan.largest_batch(plan.peak_bytes_for(50))
        50
        """
        if isinstance(memory, bool) or not isinstance(memory, (int, float)):
            raise ValueError(
                f"`memory` must be a number of bytes. Received: memory={memory!r}"
            )
        if self.bytes_per_image is None:
            raise ValueError(
                f"The activations of {self.model} are not planned, so neither is "
                f"the largest batch. Received: memory={memory!r}"
            )
        return max(0, int((memory - self.fixed_bytes) // self.bytes_per_image))

    def table(self):
        """The plan as a plain-text table (what a CLI prints)."""
        rows = [
            ("model", f"{self.model} on {self.backend}"),
            ("input", "x".join(map(str, self.image_shape))),
            ("parameters", f"{self.parameters:,}"),
            ("  class-capsule kernel", f"{self.class_capsule_parameters:,}"),
            ("  decoder", f"{self.decoder_parameters:,}"),
            (
                "primary capsules",
                f"{self.primary_capsules:,} of {self.primary_dim} dims",
            ),
            (
                "class capsules",
                f"{self.num_classes} of {self.digit_dim} dims, {self.routing} "
                f"routing x {self.routing_iterations}",
            ),
            ("votes per image", _megabytes(self.vote_bytes_per_image)),
            (f"votes per batch of {self.batch_size}", _megabytes(self.vote_bytes)),
            ("fixed (weights, Adam, framework)", _megabytes(self.fixed_bytes)),
            ("per image at the peak", _megabytes(self.bytes_per_image)),
            (
                f"peak training memory, batch {self.batch_size}",
                _megabytes(self.peak_bytes),
            ),
            (
                "forward FLOPs per image",
                "n/a"
                if self.flops_per_image is None
                else f"{self.flops_per_image:.3g}",
            ),
        ]
        width = max(len(name) for name, _ in rows)
        return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)


def _megabytes(count):
    return "n/a" if count is None else f"{count / MB:,.1f} MB"


def plan_capacity(model, batch_size, *, decoder_units=(512, 1024)):
    """What `model` costs to train with batches of `batch_size` images.

    Args:
        model: A built capsule model (`CapsNet`, `EfficientCapsNet`,
            `MultiDigitCapsNet`, any `CapsuleClassifier`; `MatrixCapsNet`
            for its parameters and fixed state only), or a
            `CapsuleBackbone`, built or not: an unbuilt one (e.g.
            `capsnet_backbone((128, 128, 3), 4)`) plans a model without
            allocating its weights.
        batch_size: Images per training step.
        decoder_units: A backbone's decoder, as `CapsNet(decoder_units=...)`;
            None for none. Ignored for a model, which has its own.

    Returns:
        A `CapacityPlan`.

    Raises:
        ValueError: If `batch_size` is not a positive integer, or `model` is
            none of the above.
    """
    from capsules_keras.models import CapsuleBackbone, CapsuleClassifier, MatrixCapsNet

    check_positive_int("batch_size", batch_size)
    backend = keras.backend.backend()
    costs = BACKEND_COSTS.get(backend, BACKEND_COSTS["tensorflow"])
    if isinstance(model, MatrixCapsNet):
        return _plan_built(model, batch_size, backend, costs)
    if isinstance(model, CapsuleClassifier):
        backbone, decoder_units = model.backbone, model.decoder_units
    elif isinstance(model, CapsuleBackbone):
        backbone = model
    else:
        raise ValueError(
            "`model` must be a capsule model or a CapsuleBackbone. "
            f"Received: model of type {type(model).__name__}"
        )
    image_shape = tuple(backbone.image_shape)
    encoder = _encoder_costs(backbone.encoder, (1, *image_shape))
    digit = backbone.digit_caps
    _, in_capsules, in_dim = encoder.output_shape
    classes, dim = backbone.num_classes, backbone.digit_dim
    iterations = backbone.routing_iterations
    votes = in_capsules * classes * dim  # u_hat[i, j, m] of one image
    kernel = in_capsules * classes * in_dim * dim  # W[i, j, n, m]
    class_params = kernel + _routing_weights(digit, in_capsules)
    decoder = _decoder_costs(classes * dim, decoder_units, math.prod(image_shape))
    params = encoder.params + class_params + decoder.params
    trainable = params - encoder.frozen
    itemsize = _itemsize(digit)
    # c and the logits b of every iteration, (i, j) each.
    couplings = 2 * iterations * in_capsules * classes
    per_image = (
        costs.vote_copies * votes
        + couplings
        + encoder.kept
        + decoder.kept
        + math.prod(image_shape)
    )
    # u_hat = W u, then per iteration s = sum_i c u_hat and b += u_hat . v.
    flops = (
        encoder.flops + 2 * kernel + 2 * (2 * iterations - 1) * votes + decoder.flops
    )
    fixed = _fixed_bytes(costs, params, trainable)
    name = type(model).__name__
    if model is backbone:
        name = f"{name}({type(backbone.encoder).__name__})"
    return CapacityPlan(
        model=name,
        backend=backend,
        image_shape=image_shape,
        batch_size=batch_size,
        parameters=params,
        trainable_parameters=trainable,
        class_capsule_parameters=class_params,
        decoder_parameters=decoder.params,
        primary_capsules=in_capsules,
        primary_dim=in_dim,
        num_classes=classes,
        digit_dim=dim,
        routing=backbone.routing,
        routing_iterations=iterations,
        vote_bytes_per_image=itemsize * votes,
        fixed_bytes=int(fixed),
        bytes_per_image=int(itemsize * per_image),
        flops_per_image=int(flops),
        dtype_bytes=itemsize,
    )


def _fixed_bytes(costs, params, trainable):
    """Framework overhead, the weights, and per trainable weight its gradient,
    Adam's two moments, the optimizer's temporaries and the layout copies."""
    copies = 3 + costs.optimizer_copies + costs.kernel_copies
    return costs.overhead + 4 * (params + copies * trainable)


def _plan_built(model, batch_size, backend, costs):
    """`MatrixCapsNet`: the parameters and the fixed state, from its weights."""
    params = model.count_params()
    trainable = sum(math.prod(w.shape) for w in model.trainable_weights)
    class_params = sum(math.prod(w.shape) for w in model.class_caps.trainable_weights)
    fixed = _fixed_bytes(costs, params, trainable)
    return CapacityPlan(
        model=type(model).__name__,
        backend=backend,
        image_shape=tuple(model.image_shape),
        batch_size=batch_size,
        parameters=params,
        trainable_parameters=trainable,
        class_capsule_parameters=class_params,
        decoder_parameters=0,
        primary_capsules=0,
        primary_dim=0,
        num_classes=model.num_classes,
        digit_dim=0,
        routing="em",
        routing_iterations=model.routing_iterations,
        vote_bytes_per_image=0,
        fixed_bytes=int(fixed),
        bytes_per_image=None,
        flops_per_image=None,
    )


class _Costs(NamedTuple):
    params: int  # every weight
    frozen: int  # weights that do not train (batch norm's moving statistics)
    kept: int  # numbers per image kept for the backward pass
    flops: int  # forward FLOPs per image
    output_shape: tuple = ()


def _itemsize(layer):
    return 2 if "16" in str(layer.compute_dtype) else 4


#: Layers without weights the planner costs as their output alone.
WEIGHTLESS_LAYERS = (
    keras.layers.Activation,
    keras.layers.Dropout,
    keras.layers.MaxPooling2D,
    keras.layers.AveragePooling2D,
    keras.layers.ReLU,
    keras.layers.Reshape,
)


def _encoder_costs(encoder, input_shape):
    """Parameters, kept activations and FLOPs of an encoder, layer by layer
    (`CapsuleEncoder.planned_layers`)."""
    from capsules_keras.layers import PrimaryCaps, Squash
    from capsules_keras.ops import jax_on_cpu

    params = frozen = kept = flops = 0
    for layer, shape in encoder.planned_layers(input_shape):
        out = tuple(layer.compute_output_shape(shape))
        size = math.prod(out[1:])
        if isinstance(layer, PrimaryCaps):
            conv = layer.conv
            conv_out = conv.compute_output_shape(shape)
            p, f = _conv_costs(conv, shape, conv_out)
            # The convolution's output, and the squashed capsules.
            kept += 2 * size
            if jax_on_cpu():
                # Convolved as patches and one matmul on jax on CPU; the
                # patches are kept for the kernel's gradient
                # (docs/design-decisions.md, "Primary capsules on jax").
                patch = math.prod(conv.kernel_size) * shape[-1]
                kept += math.prod(conv_out[1:3]) * patch
        elif isinstance(layer, keras.layers.Conv2D | keras.layers.DepthwiseConv2D):
            p, f = _conv_costs(layer, shape, out)
            # Its output; with a fused activation (CapsNet's ReLU), the
            # activation's output as well.
            activation = getattr(layer.activation, "__name__", "linear")
            kept += size * (1 if activation == "linear" else 2)
        elif isinstance(layer, keras.layers.BatchNormalization):
            channels = shape[-1]
            p, f = 4 * channels, 0
            frozen += 2 * channels  # the moving mean and variance
            kept += size
        elif isinstance(layer, (*WEIGHTLESS_LAYERS, Squash)):
            p, f = 0, 0
            kept += 0 if isinstance(layer, keras.layers.Reshape) else size
        else:
            raise ValueError(
                f"The capacity planner cannot cost the layer {layer.name!r} of "
                f"type {type(layer).__name__} in the encoder "
                f"{type(encoder).__name__}: it knows Conv2D, DepthwiseConv2D, "
                "BatchNormalization, PrimaryCaps and layers without weights "
                "(capacity.WEIGHTLESS_LAYERS, Squash). List the layers it "
                "runs in the encoder's `planned_layers`."
            )
        params += p
        flops += f
    output_shape = tuple(encoder.compute_output_shape(tuple(input_shape)))
    return _Costs(params, frozen, kept, flops, output_shape)


def _conv_costs(conv, input_shape, output_shape):
    """Parameters and forward FLOPs of a Conv2D or DepthwiseConv2D."""
    kernel_area = math.prod(conv.kernel_size)
    channels = input_shape[-1]
    if isinstance(conv, keras.layers.DepthwiseConv2D):
        outputs = channels * conv.depth_multiplier
        weights = kernel_area * outputs
        macs = math.prod(output_shape[1:]) * kernel_area
    else:
        outputs = conv.filters
        weights = kernel_area * channels * outputs
        macs = math.prod(output_shape[1:]) * kernel_area * channels
    return weights + (outputs if conv.use_bias else 0), 2 * macs


def _routing_weights(digit_caps, in_capsules):
    """Parameters of the routing's own weights (priors, pose scale...)."""
    from capsules_keras.routing import get_routing

    shapes = (
        w.shape(in_capsules, digit_caps.num_capsules, digit_caps.capsule_dim)
        for w in get_routing(digit_caps.routing).weights
    )
    return sum(math.prod(shape) for shape in shapes)


def _decoder_costs(inputs, units, outputs):
    """The decoder's Dense stack `inputs -> *units -> outputs`."""
    if units is None:
        return _Costs(0, 0, 0, 0)
    sizes = (inputs, *units, outputs)
    params = sum((a + 1) * b for a, b in zip(sizes, sizes[1:], strict=False))
    macs = sum(a * b for a, b in zip(sizes, sizes[1:], strict=False))
    return _Costs(params, 0, sum(sizes), 2 * macs)


#: What shrinks the votes `(in_capsules, classes, digit_dim)` and the
#: class-capsule kernel, for the error that a batch does not fit.
KNOBS = (
    "a smaller batch_size",
    "a smaller image_shape (the primary capsules grow with the image's area)",
    "fewer capsule types (primary_capsules=16 halves the primary capsules)",
    "a larger primary_strides (2 -> 4 quarters them; CapsNet's default keeps "
    "the grid at most 12x12)",
    "fewer classes or a smaller digit_dim (the votes are in_capsules x "
    "num_classes x digit_dim)",
)


class CapacityError(ValueError):
    """A batch that the planned peak memory says will not fit (`check_fits`)."""


def check_fits(plan, available):
    """Raises a `CapacityError` (a `ValueError`) unless `plan`'s batch fits.

    `available` is in bytes.

    The message names the batch asked for, the estimated need, the memory
    available, the largest batch that fits and the knobs that shrink the
    votes (`KNOBS`). Nothing is checked where `available` is None (unknown)
    or the plan has no activations planned (then only its fixed state is).

    >>> from capsules_keras.models import capsnet_backbone
    >>> plan = plan_capacity(capsnet_backbone(), batch_size=100)
    >>> check_fits(plan, 64 * 2**30)  # 64 GiB: fits, nothing happens
    """
    if not isinstance(plan, CapacityPlan):
        raise ValueError(
            "`plan` must be a CapacityPlan (see `plan_capacity`). "
            f"Received: plan of type {type(plan).__name__}"
        )
    if available is None:
        return
    if isinstance(available, bool) or not isinstance(available, (int, float)):
        raise ValueError(
            "`available` must be a number of bytes or None. "
            f"Received: available={available!r}"
        )
    need = plan.peak_bytes
    if need is None:
        need = plan.fixed_bytes
        if need <= available:
            return
        largest = "none"  # even the fixed state does not fit
    else:
        if need <= available:
            return
        largest = plan.largest_batch(available) or (
            f"none (the weights, Adam and the framework alone need about "
            f"{plan.fixed_bytes / MB:,.0f} MB)"
        )
    knobs = "; ".join(KNOBS)
    raise CapacityError(
        f"{plan.model} on {'x'.join(map(str, plan.image_shape))} images would need "
        f"about {need / MB:,.0f} MB to train with batch_size={plan.batch_size}, "
        f"but {available / MB:,.0f} MB are available. The largest batch that "
        f"fits: {largest}. Its {plan.primary_capsules:,} primary capsules make "
        f"votes of {plan.vote_bytes_per_image / MB:,.2f} MB per image; what "
        f"shrinks them: {knobs}. Received: batch_size={plan.batch_size}, "
        f"available={available}"
    )


def available_memory():
    """Bytes free for training where it runs, or None if unknown.

    Host RAM (`MemAvailable` of /proc/meminfo on Linux, else the free pages
    `os.sysconf` reports); on a GPU, the device's free memory where the
    backend tells it cheaply. Backend-specific because only the backend
    knows its device: torch's `torch.cuda.mem_get_info`, jax's
    `device.memory_stats()`; tensorflow reports no free memory without
    allocating, so its GPU is unknown (None).
    """
    backend = keras.backend.backend()
    if backend == "torch":
        import torch  # already imported by Keras' torch backend

        if torch.cuda.is_available():
            return torch.cuda.mem_get_info()[0]
    elif backend == "jax":
        import jax  # already imported by Keras' jax backend

        device = jax.devices()[0]
        if device.platform != "cpu":
            stats = device.memory_stats() or {}
            if "bytes_limit" not in stats:
                return None
            return stats["bytes_limit"] - stats.get("bytes_in_use", 0)
    elif backend == "tensorflow":
        import tensorflow as tf  # already imported by Keras' tensorflow backend

        if tf.config.list_logical_devices("GPU"):
            return None
    return _host_memory()


def _host_memory():
    """Host RAM available, in bytes (None if the platform does not say)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None
