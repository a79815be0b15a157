"""Where Efficient-CapsNet's training step goes on jax, layer by layer.

    KERAS_BACKEND=jax python benchmarks/efficient/profile_layers.py

jax is the backend on which Efficient-CapsNet trains slowest
(`bench_models.py`). Times forward + backward (the gradient of the sum of
the outputs with respect to the inputs and the weights) of each of its
layers alone, at the shapes it sees for 28x28 digits and the preset's batch
of 16, each compiled with XLA as the trainer's step is, and the whole
model's jitted `train_on_batch`; interleaved (`interleaved_medians`),
medians in ms. (Eager torch and graph tensorflow per-layer times are not
comparable this way: eager overheads, and graphs that fold what does not
depend on the weights.)
"""

import argparse
import inspect
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import keras  # noqa: E402
import numpy as np  # noqa: E402
from common import interleaved_medians  # noqa: E402

from capsules_keras.models import EfficientCapsNet  # noqa: E402


def gradient_step(layer, x):
    """A jitted d sum(layer(x)) / d (x, weights), as a blocking callable."""
    import jax

    kwargs = (
        {"training": True}
        if "training" in inspect.signature(layer.call).parameters
        else {}
    )
    # Copies: the model's train_on_batch below donates the variables' buffers.
    values = [jax.numpy.array(w.value, copy=True) for w in layer.trainable_variables]
    frozen = [
        jax.numpy.array(v.value, copy=True) for v in layer.non_trainable_variables
    ]

    def loss(values, inputs):
        out, _ = layer.stateless_call(values, frozen, inputs, **kwargs)
        return jax.numpy.sum(keras.tree.flatten(out)[0])

    step = jax.jit(jax.grad(loss, argnums=(0, 1)))
    return lambda: jax.block_until_ready(step(values, x))


def stage_step(model, x, y, stage):
    """A jitted gradient of the model's first stages, as a blocking callable.

    d sum(output of `stage`) / d (the model's weights), computed the way the
    model computes it on this backend (the primary capsules as a
    contraction on jax on CPU), BatchNorm in training mode with its moving
    statistics frozen; stage `"loss"` is the whole training loss. Timed
    together, the stages show where the whole step's time goes with XLA's
    fusion across the layers, which the layers timed alone do not.
    """
    import jax

    variables = model.trainable_variables + model.non_trainable_variables
    frozen = [
        jax.numpy.array(v.value, copy=True) for v in model.non_trainable_variables
    ]

    def loss(values, images):
        mapping = list(zip(variables, list(values) + frozen, strict=True))
        with keras.StatelessScope(state_mapping=mapping):
            features = model.conv(images, training=True)
            if stage == "convolutions":
                return jax.numpy.sum(features)
            primary = model._primary_capsules(features, training=True)
            if stage == "primary capsules":
                return jax.numpy.sum(primary)
            capsules, _ = model.digit_caps(primary)
            if stage == "class capsules":
                return jax.numpy.sum(capsules)
            outputs = {"lengths": model.length(capsules), "capsules": capsules}
            return model._task_loss(images, y, outputs, None, True)

    step = jax.jit(jax.grad(loss))
    values = [jax.numpy.array(v.value, copy=True) for v in model.trainable_variables]
    return lambda: jax.block_until_ready(step(values, x))


#: The cumulative stages of `stage_step`, in the order of the forward pass.
STAGES = ("convolutions", "primary capsules", "class capsules", "loss")


def depthwise_as_einsum(layer, x):
    """The same depthwise convolution over the whole map, as one contraction.

    With a kernel as large as its input (no padding), a depthwise convolution
    is a per-channel dot product: `y[b, c] = sum_{h,w} x[b,h,w,c] k[h,w,c] + bias[c]`.
    A candidate for the trainer's step, timed beside the layer.
    """
    import jax

    kernel = jax.numpy.array(layer.kernel.value[..., 0], copy=True)
    bias = jax.numpy.array(layer.bias.value, copy=True)

    def loss(values, inputs):
        kernel, bias = values
        return jax.numpy.sum(jax.numpy.einsum("bhwc,hwc->bc", inputs, kernel) + bias)

    step = jax.jit(jax.grad(loss, argnums=(0, 1)))
    return lambda: jax.block_until_ready(step((kernel, bias), x))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args(argv)
    if keras.backend.backend() != "jax":
        parser.error(f"run it with KERAS_BACKEND=jax, not {keras.backend.backend()}")
    keras.utils.set_random_seed(0)
    model = EfficientCapsNet()
    rng = np.random.default_rng(0)
    x = rng.random((args.batch, 28, 28, 1), dtype="float32")
    candidates = {}
    shape = x
    for layer in model.conv.layers:
        candidates[layer.name] = gradient_step(layer, shape)
        shape = keras.ops.convert_to_numpy(layer(shape, training=True))
    conv_out = shape
    for layer in model.primary_caps.layers:
        candidates[f"primary/{layer.name}"] = gradient_step(layer, shape)
        shape = keras.ops.convert_to_numpy(layer(shape))
    candidates["digit_caps"] = gradient_step(model.digit_caps, shape)
    candidates["(depthwise as an einsum)"] = depthwise_as_einsum(
        model.primary_caps.layers[0], conv_out
    )
    labels = rng.integers(0, 10, args.batch)
    one_hot = np.eye(10, dtype="float32")[labels]
    for stage in STAGES:
        candidates[f"stages up to: {stage}"] = stage_step(model, x, one_hot, stage)
    model.compile(optimizer="adam", jit_compile=True)
    candidates["whole train_on_batch"] = lambda: model.train_on_batch(x, labels)
    timed = interleaved_medians(candidates, args.repeats, warmup=3, pause=0.05)
    for name, stats in timed.items():
        print(f"{name:<26}{stats['median_ms']:8.2f} ms")


if __name__ == "__main__":
    main()
