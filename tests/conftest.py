"""Shared fixtures. The whole suite runs once per KERAS_BACKEND."""

import os
import sys

import keras
import numpy as np
import pytest

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(TESTS_DIR)
sys.path.insert(0, TESTS_DIR)

#: Real MNIST for tests: 5,000 training digits and the full test set. CI and
#: `make test` pass it in; it is never used by the package at run time.
OFFLINE_MNIST = os.environ.get(
    "CAPSULES_KERAS_TEST_MNIST",
    os.path.join(REPO_ROOT, "..", "shared", "data", "mnist-offline.npz"),
)


@pytest.fixture(autouse=True)
def _seed():
    keras.utils.set_random_seed(0)


@pytest.fixture
def backend():
    return keras.backend.backend()


@pytest.fixture(scope="session")
def mnist_path():
    if not os.path.exists(OFFLINE_MNIST):
        pytest.fail(
            f"The offline MNIST file is missing: {OFFLINE_MNIST}. Set "
            "CAPSULES_KERAS_TEST_MNIST to a Keras-layout mnist .npz."
        )
    return OFFLINE_MNIST


def gradient(fn, x):
    """d sum(fn(x)) / dx as NumPy, with the current backend's autodiff.

    Tests only: the library itself never branches on the backend.
    """
    x = np.asarray(x, dtype="float32")
    name = keras.backend.backend()
    if name == "jax":
        import jax

        return np.asarray(jax.grad(lambda t: keras.ops.sum(fn(t)))(x))
    if name == "tensorflow":
        import tensorflow as tf

        variable = tf.Variable(x)
        with tf.GradientTape() as tape:
            y = keras.ops.sum(fn(variable))
        return tape.gradient(y, variable).numpy()
    if name == "torch":
        import torch

        tensor = torch.tensor(x, requires_grad=True)
        keras.ops.sum(fn(tensor)).backward()
        return tensor.grad.numpy()
    raise ValueError(f"No gradient helper for backend {name!r}")
