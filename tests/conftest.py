"""Shared fixtures. The whole suite runs once per KERAS_BACKEND."""

import os
import sys

import keras
import numpy as np
import pytest

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(TESTS_DIR)
sys.path.insert(0, TESTS_DIR)

#: Real datasets for tests, by fixture name: (environment variable, file in
#: ../shared/data). CI and `make test` pass the paths in; the package never
#: reads them at run time. MNIST: 5,000 training digits and the full test
#: set; Fashion-MNIST: all 60,000 + 10,000.
OFFLINE_FILES = {
    "mnist_path": ("CAPSULES_KERAS_TEST_MNIST", "mnist-offline.npz"),
    "fashion_path": ("CAPSULES_KERAS_TEST_FASHION_MNIST", "fashion-mnist.npz"),
}


def offline_file(fixture):
    """The path of a test dataset; fails the test if it is missing."""
    env, name = OFFLINE_FILES[fixture]
    path = os.environ.get(env, os.path.join(REPO_ROOT, "..", "shared", "data", name))
    if not os.path.exists(path):
        pytest.fail(f"The test data file is missing: {path}. Set {env} to it.")
    return path


@pytest.fixture(autouse=True)
def _seed():
    keras.utils.set_random_seed(0)


@pytest.fixture
def backend():
    return keras.backend.backend()


@pytest.fixture(scope="session")
def mnist_path():
    return offline_file("mnist_path")


@pytest.fixture(scope="session")
def fashion_path():
    return offline_file("fashion_path")


#: Tolerance of a result against its NumPy reference (float32).
TOLERANCE = {"rtol": 1e-5, "atol": 1e-5}
#: A narrow CapsNet (144 primary capsules, 1,638,480 parameters, most of
#: them the decoder's) for tests whose subject is not the paper's size: each of its
#: steps costs a fraction of the paper's 8.2M-parameter network.
NARROW = {"conv_filters": 16, "primary_capsules": 4}
#: Every backend the suite runs on (e.g. for cross-backend loading).
BACKENDS = ("torch", "jax", "tensorflow")


def random(*shape, scale=0.5, seed=0):
    """Seeded N(0, scale^2) float32 values of `shape`."""
    rng = np.random.default_rng(seed)
    return (scale * rng.standard_normal(shape)).astype("float32")


def numpy(x):
    """A backend tensor as a NumPy array."""
    return keras.ops.convert_to_numpy(x)


def central_differences(f, x, step=1e-6):
    """d f(x) / dx of a NumPy function `f` with a scalar result, in float64."""
    x = np.asarray(x, dtype="float64")
    derivative = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[index] += step
        down[index] -= step
        derivative[index] = (f(up) - f(down)) / (2 * step)
    return derivative


def gradient(fn, x):
    """d sum(fn(x)) / dx as NumPy, with the current backend's autodiff.

    Branches on the backend because a test needs the backend's own autodiff
    (`keras.ops` has no gradient function). The library's own backend
    branches, each with its measured reason, are listed on
    docs/design-decisions.md.
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
