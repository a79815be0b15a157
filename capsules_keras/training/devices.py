"""Device setup: one device or data-parallel, and the devices a run computes on."""

import keras

from capsules_keras.distribution import data_parallel, single_device


def describe_devices():
    """The devices the backend computes on, e.g. "gpu:0" or "cpu:0"."""
    if keras.backend.backend() == "torch":
        # Keras lists devices for jax and tensorflow only; ask torch itself.
        import torch

        if torch.cuda.is_available():
            return ", ".join(f"gpu:{i}" for i in range(torch.cuda.device_count()))
        return "cpu:0"
    return ", ".join(keras.distribution.list_devices())


def parallel_setup(config):
    """The data-parallel (or single-device) setup a `TrainConfig` asks for.

    Call it before any other computation: jax sets its devices up once.
    """
    if config.distribute == "data-parallel":
        setup = data_parallel(
            config.coordinator_address, config.num_processes, config.process_id
        )
    else:
        setup = single_device()
    if config.batch_size % setup.num_replicas:
        raise ValueError(
            f"The global batch size must be a multiple of the {setup.num_replicas} "
            f"replicas. Received: batch_size={config.batch_size}"
        )
    return setup
