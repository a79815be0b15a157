"""Training-step time on one device against data-parallel on two CPU devices.

    KERAS_BACKEND=jax python benchmarks/bench_parallel.py
    KERAS_BACKEND=tensorflow python benchmarks/bench_parallel.py

Two virtual CPU devices share the same cores, so data parallelism cannot be
faster here: this shows its overhead and that it runs, not a speed-up. jax
gets its devices from XLA_FLAGS (set below, before jax starts); tensorflow
from two logical CPU devices.
"""

import argparse
import json
import os
import sys
import time

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    args = parser.parse_args(argv)
    if os.environ.get("KERAS_BACKEND") == "tensorflow":
        import tensorflow as tf

        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * 2
        )
    import keras
    from bench_train import load_digits
    from common import DEFAULT_MNIST

    from capsules_keras import CapsNet
    from capsules_keras.distribution import data_parallel, single_device
    from capsules_keras.training import default_jit_compile

    parallel = data_parallel()
    x, y = load_digits(DEFAULT_MNIST, (args.warmup + args.steps) * args.batch_size)
    warm = args.warmup * args.batch_size
    results = {}
    for name, setup in (("single", single_device()), ("data-parallel", parallel)):
        keras.utils.set_random_seed(0)
        with setup.scope():
            model = CapsNet()
            model.compile(optimizer="adam", jit_compile=default_jit_compile())
            model.fit(x[:warm], y[:warm], batch_size=args.batch_size, verbose=0)
            start = time.perf_counter()
            model.fit(x[warm:], y[warm:], batch_size=args.batch_size, verbose=0)
            seconds = time.perf_counter() - start
        results[name] = {
            "replicas": setup.num_replicas,
            "step_ms": 1000 * seconds / args.steps,
            "description": setup.description,
        }
    print(json.dumps({"backend": keras.backend.backend(), **results}))


if __name__ == "__main__":
    main()
