"""DigitCaps against labml_nn's Router, forward and forward+backward.

    KERAS_BACKEND=jax python benchmarks/bench_routing.py [--out FILE]

Our layer runs with the current Keras backend, compiled the ways that backend
allows (jax: jit; tensorflow: graph and XLA; torch: eager and torch.compile);
labml's `Router(in_caps, 10, 8, 16, 3)` runs in eager PyTorch as it ships
(on the GPU when torch sees one).
Both are timed interleaved in this one process (see `interleaved_medians`).
Each row says whether its mode is the backend's default path (`DEFAULT_MODE`:
what `Model.fit` runs without flags on a CPU); tensorflow also times its graph
with the routing left uncompiled (the default path before
`capsules_keras.routing._fast.compile_routing`), side by side.
The loss for the backward pass is sum(v ** 2), gradients w.r.t. the weight
and the input capsules.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import keras  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from common import interleaved_medians, machine, write_json  # noqa: E402
from reference import Router, device, synchronize  # noqa: E402

from capsules_keras import DigitCaps, squash  # noqa: E402
from capsules_keras.routing._fast import route_votes, vote_layout  # noqa: E402

#: The mode of each backend that `Model.fit` and the trainer use by default
#: on a CPU (jax: XLA; tensorflow: a graph, in which `DigitCaps` compiles its
#: routing with XLA; torch: eager).
DEFAULT_MODE = {"jax": "jit", "tensorflow": "graph", "torch": "eager"}


def _block(tree):
    """Waits for (asynchronous) results by converting them to NumPy."""
    return [keras.ops.convert_to_numpy(t) for t in keras.tree.flatten(tree)]


def our_functions(layer, u):
    """{mode: (forward, forward_backward)} for the current backend."""
    backend = keras.backend.backend()
    kernel = layer.kernel
    if backend == "jax":
        import jax

        def loss(k, x):
            v, _ = layer.stateless_call([k], [], x)
            return (v**2).sum()

        forward = jax.jit(lambda k, x: layer.stateless_call([k], [], x)[0])
        grad = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))
        k, x = kernel.value, keras.ops.convert_to_tensor(u)
        return {
            "jit": (
                lambda: jax.block_until_ready(forward(k, x)),
                lambda: jax.block_until_ready(grad(k, x)),
            )
        }
    if backend == "tensorflow":
        import tensorflow as tf

        x = tf.constant(u)
        layout = vote_layout()

        def uncompiled(x):
            """The layer's call without `compile_routing`."""
            votes = layout.votes(kernel.value, x)
            iterations = layer.routing_iterations
            return route_votes(votes, layout, iterations, False, False)

        modes = {}
        for mode, xla, call in (
            ("graph", False, layer),
            ("xla", True, layer),
            ("graph, routing uncompiled", False, uncompiled),
        ):

            @tf.function(jit_compile=xla)
            def forward(x, call=call):
                return call(x)

            @tf.function(jit_compile=xla)
            def forward_backward(x, call=call):
                with tf.GradientTape() as tape:
                    tape.watch(x)
                    value = tf.reduce_sum(call(x) ** 2)
                return tape.gradient(value, [kernel.value, x])

            modes[mode] = (
                lambda f=forward: _block(f(x)),
                lambda f=forward_backward: _block(f(x)),
            )
        return modes
    if backend == "torch":
        # On the device Keras put the layer's weights on.
        x = torch.tensor(u, device=kernel.value.device, requires_grad=True)
        modes = {}
        for mode in ("eager", "compiled"):
            call = layer if mode == "eager" else torch.compile(layer)

            def forward(call=call):
                with torch.no_grad():
                    call(x)
                synchronize()

            def forward_backward(call=call):
                kernel.value.grad = None
                x.grad = None
                (call(x) ** 2).sum().backward()
                synchronize()

            modes[mode] = (forward, forward_backward)
        return modes
    raise ValueError(f"Unknown backend {backend!r}")


def labml_functions(router, u):
    router.to(device())
    x = torch.tensor(u, device=device(), requires_grad=True)

    def forward():
        with torch.no_grad():
            router(x)
        synchronize()

    def forward_backward():
        router.zero_grad()
        x.grad = None
        (router(x) ** 2).sum().backward()
        synchronize()

    return forward, forward_backward


def run(batch_sizes, in_caps=1152, repeats=7, warmup=3):
    backend = keras.backend.backend()
    rng = np.random.default_rng(0)
    results = []
    for batch in batch_sizes:
        u = rng.standard_normal((batch, in_caps, 8)).astype("float32")
        u = keras.ops.convert_to_numpy(squash(u))
        keras.utils.set_random_seed(0)
        layer = DigitCaps(10, 16, routing_iterations=3)
        layer.build((None, in_caps, 8))
        router = Router(in_caps, 10, 8, 16, 3)
        candidates = {}
        labml_forward, labml_backward = labml_functions(router, u)
        candidates["labml/forward"] = labml_forward
        candidates["labml/forward+backward"] = labml_backward
        for mode, (forward, backward) in our_functions(layer, u).items():
            candidates[f"{mode}/forward"] = forward
            candidates[f"{mode}/forward+backward"] = backward
        timed = interleaved_medians(candidates, repeats=repeats, warmup=warmup)
        for name, stats in timed.items():
            mode, part = name.split("/")
            reference = timed[f"labml/{part}"]["median_ms"]
            results.append(
                {
                    "backend": "torch (labml_nn)" if mode == "labml" else backend,
                    "mode": mode,
                    "default": mode == DEFAULT_MODE.get(backend),
                    "batch": batch,
                    "in_capsules": in_caps,
                    "pass": part,
                    "median_ms": stats["median_ms"],
                    "min_ms": stats["min_ms"],
                    "labml_median_ms": reference,
                    "ratio_to_labml": stats["median_ms"] / reference,
                }
            )
    return results


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[32, 128])
    parser.add_argument("--in-capsules", type=int, default=1152)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--out", default="-", help="JSON file, or - for stdout")
    args = parser.parse_args(argv)
    results = run(args.batch_sizes, args.in_capsules, args.repeats, args.warmup)
    write_json(
        args.out,
        {"benchmark": "routing", "machine": machine(), "results": results},
    )
    return results


if __name__ == "__main__":
    main()
