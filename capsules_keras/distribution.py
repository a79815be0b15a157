"""Data-parallel training on each backend's own engine.

- jax: `keras.distribution.DataParallel` over every visible device; several
  hosts join through `keras.distribution.initialize` (coordinator address,
  number of processes, process id -- arguments or the environment variables
  `KERAS_DISTRIBUTION_JOB_ADDRESSES`, `KERAS_DISTRIBUTION_NUM_PROCESSES`,
  `KERAS_DISTRIBUTION_PROCESS_ID`).
- tensorflow: `tf.distribute.MirroredStrategy` on one host (all GPUs, or all
  logical CPUs when there is no GPU) and `MultiWorkerMirroredStrategy` on
  several hosts (configured by the `TF_CONFIG` environment variable).
- torch: refused. Keras 3 ships no distribution for the torch backend, and
  driving `torch.distributed` (DDP) would mean replacing `Model.fit` with a
  hand-written loop and launcher -- the home-made data parallelism this
  project avoids. Use the jax or tensorflow backend to scale out.

The batch size given to `fit` is the GLOBAL batch: each of the N replicas
computes 1/N of it and the gradients are combined, so one step equals a
single-device step on the same global batch and the learning rate needs no
change. (If you raise the global batch to use more devices, the usual linear
scaling rule -- learning rate proportional to the global batch -- is a
starting point; it is not applied automatically.)

Backend-specific code is the point of this module: each engine has its own
API, and Keras exposes no common one.
"""

import contextlib
import functools
import os
from collections.abc import Callable
from dataclasses import dataclass

import keras

SUPPORTED_BACKENDS = ("jax", "tensorflow")
MULTI_HOST_ENV = (
    "KERAS_DISTRIBUTION_JOB_ADDRESSES",
    "KERAS_DISTRIBUTION_NUM_PROCESSES",
    "KERAS_DISTRIBUTION_PROCESS_ID",
)


@dataclass
class DataParallelSetup:
    """What `data_parallel` set up.

    Attributes:
        scope: Returns a (new) context manager to build, compile and fit the
            model in: `with setup.scope(): ...`.
        num_replicas: Number of model replicas (devices).
        description: One line for the user: engine and devices.
    """

    scope: Callable[[], contextlib.AbstractContextManager]
    num_replicas: int
    description: str


def data_parallel(coordinator_address=None, num_processes=None, process_id=None):
    """Prepares data-parallel training with the current backend's engine.

    Call it before any other computation (jax initialises its devices once).

    Args:
        coordinator_address: jax multi-host only: `host:port` of process 0
            (or all job addresses, comma separated). Falls back to
            `KERAS_DISTRIBUTION_JOB_ADDRESSES`.
        num_processes: jax multi-host only: number of processes.
        process_id: jax multi-host only: this process' id, 0 to
            `num_processes - 1`.

    Returns:
        A `DataParallelSetup`.

    Raises:
        ValueError: on the torch backend, or when multi-host arguments are
            given to the tensorflow backend (which reads `TF_CONFIG`).
    """
    backend = keras.backend.backend()
    multi_host_args = (coordinator_address, num_processes, process_id)
    if backend == "jax":
        if any(a is not None for a in multi_host_args) or any(
            name in os.environ for name in MULTI_HOST_ENV
        ):
            keras.distribution.initialize(
                coordinator_address, num_processes, process_id
            )
        devices = keras.distribution.list_devices()
        distribution = keras.distribution.DataParallel(devices=devices)
        return DataParallelSetup(
            distribution.scope,
            len(devices),
            f"jax DataParallel over {len(devices)} device(s): {', '.join(devices)}",
        )
    if backend == "tensorflow":
        if any(a is not None for a in multi_host_args):
            raise ValueError(
                "On the tensorflow backend, several hosts are configured with the "
                "TF_CONFIG environment variable, not with coordinator/process "
                f"arguments. Received: coordinator_address={coordinator_address}, "
                f"num_processes={num_processes}, process_id={process_id}"
            )
        strategy, name = _tensorflow_strategy()
        replicas = strategy.num_replicas_in_sync
        return DataParallelSetup(
            strategy.scope,
            replicas,
            f"tensorflow {name} over {replicas} replica(s)",
        )
    raise ValueError(
        "Data-parallel training uses the backend's own engine, which Keras 3 "
        f"provides for {' and '.join(SUPPORTED_BACKENDS)} only (torch would need "
        "a hand-written DDP loop instead of Model.fit). Set KERAS_BACKEND=jax or "
        f"KERAS_BACKEND=tensorflow. Received: backend={backend!r}"
    )


@functools.cache
def _tensorflow_strategy():
    """The process's one tensorflow strategy, and its name.

    One per process: a second `MirroredStrategy` numbers its collective
    operations from the start again, so a second model trained in the same
    process (of another size) meets the first one's all-reduces under the
    same keys and tensorflow aborts them ("Shape mismatch in the collective
    instance 100").
    """
    import tensorflow as tf

    if "TF_CONFIG" in os.environ:
        return (
            tf.distribute.MultiWorkerMirroredStrategy(),
            "MultiWorkerMirroredStrategy (TF_CONFIG)",
        )
    gpus = tf.config.list_logical_devices("GPU")
    devices = gpus or tf.config.list_logical_devices("CPU")
    return tf.distribute.MirroredStrategy([d.name for d in devices]), "MirroredStrategy"


def single_device():
    """The no-op counterpart of `data_parallel`: one replica, no scope."""
    return DataParallelSetup(contextlib.nullcontext, 1, "single device")
