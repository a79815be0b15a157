"""Data-parallel training on the backends' own engines, and mixed precision."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
from conftest import NARROW, REPO_ROOT

from capsules_keras import CapsNet, train
from capsules_keras.distribution import data_parallel, single_device

# Two CPU devices: jax reads XLA_FLAGS at start-up; tensorflow is configured in
# the script itself, before it initialises.
TWO_DEVICES_ENV = {
    "XLA_FLAGS": os.environ.get("XLA_FLAGS", "")
    + " --xla_force_host_platform_device_count=2"
}

PARALLEL_SCRIPT = """
import json, os, sys
import numpy as np
if os.environ["KERAS_BACKEND"] == "tensorflow":
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import keras
from capsules_keras import CapsNet
from capsules_keras.distribution import data_parallel, single_device

parallel = data_parallel()
with np.load(sys.argv[1]) as data:
    keep = np.random.default_rng(0).permutation(5000)[:8]
    x = data["x_train"][keep].astype("float32")[..., None] / 255.0
    y = data["y_train"][keep].astype("int32")

def run(setup, steps):
    keras.utils.set_random_seed(0)
    with setup.scope():
        model = CapsNet(conv_filters=32, primary_capsules=8, decoder_units=(64,))
        model.compile(optimizer=keras.optimizers.SGD(0.5))
        history = model.fit(x, y, batch_size=8, epochs=steps, shuffle=False,
                            verbose=0)
        weights = [keras.ops.convert_to_numpy(w) for w in model.trainable_weights]
    return history.history["loss"], weights

single_loss, single_weights = run(single_device(), 1)
parallel_loss, parallel_weights = run(parallel, 1)
difference = max(float(np.abs(a - b).max())
                 for a, b in zip(single_weights, parallel_weights))
scale = max(float(np.abs(a).max()) for a in single_weights)
losses, _ = run(parallel, 6)
# Set up again and train a model of another size, in the same process.
again = data_parallel()
with again.scope():
    other = CapsNet(conv_filters=16, primary_capsules=4, decoder_units=(64,))
    other.compile(optimizer=keras.optimizers.SGD(0.5))
    other_loss = other.fit(x, y, batch_size=8, epochs=1, verbose=0)
print(json.dumps({
    "other_loss": other_loss.history["loss"][0],
    "replicas": parallel.num_replicas,
    "description": parallel.description,
    "single_loss": single_loss[0],
    "parallel_loss": parallel_loss[0],
    "weight_difference": difference,
    "weight_scale": scale,
    "losses": losses,
}))
"""


def test_data_parallel_equals_single_device_or_is_refused(mnist_path):
    backend = keras.backend.backend()
    if backend == "torch":
        with pytest.raises(ValueError, match="jax and tensorflow.*backend='torch'"):
            data_parallel()
        return
    result = subprocess.run(
        [sys.executable, "-c", PARALLEL_SCRIPT, mnist_path],
        env={**os.environ, **TWO_DEVICES_ENV},
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["replicas"] == 2, report["description"]
    # One step on the same global batch: same loss, same updated weights.
    assert report["parallel_loss"] == pytest.approx(report["single_loss"], rel=1e-5)
    assert report["weight_difference"] <= 1e-5 * max(1.0, report["weight_scale"])
    # A few data-parallel steps lower the loss.
    assert report["losses"][-1] < report["losses"][0]
    # A second set-up in the process trains a model of another size (tensorflow
    # aborted its all-reduces when each set-up made its own strategy).
    assert np.isfinite(report["other_loss"])


def test_cli_data_parallel(mnist_path, tmp_path):
    command = [
        sys.executable,
        "-m",
        "capsules_keras.train",
        "--data",
        mnist_path,
        "--max-train-samples",
        "40",
        "--max-test-samples",
        "20",
        "--batch-size",
        "20",
        "--epochs",
        "1",
        "--distribute",
        "data-parallel",
        "--conv-filters",  # narrow: the subject is the distribution
        str(NARROW["conv_filters"]),
        "--primary-capsules",
        str(NARROW["primary_capsules"]),
        "--output-dir",
        str(tmp_path),
        "--verbose",
        "0",
    ]
    if keras.backend.backend() == "torch":
        # Refused before anything starts: in this process, as `-m` runs it.
        with pytest.raises(SystemExit, match="jax and tensorflow"):
            train.main(command[3:])
        assert os.listdir(tmp_path) == []  # no run folder for a refused run
        return
    result = subprocess.run(
        command,
        env={**os.environ, **TWO_DEVICES_ENV},
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert "Parallel:" in result.stdout and "global" in result.stdout
    (run,) = os.listdir(tmp_path)
    with open(os.path.join(tmp_path, run, "metrics.json")) as f:
        assert json.load(f)["distribute"] == "data-parallel"


def test_tensorflow_multi_host_takes_tf_config():
    if keras.backend.backend() != "tensorflow":
        pytest.skip("tensorflow-specific argument check")
    with pytest.raises(ValueError, match="TF_CONFIG"):
        data_parallel(coordinator_address="10.0.0.1:1234")


def test_single_device_setup():
    setup = single_device()
    assert setup.num_replicas == 1
    with setup.scope():
        pass


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision_trains_one_step(policy, mnist_path):
    with np.load(mnist_path) as data:
        x = data["x_train"][:8].astype("float32")[..., None] / 255.0
        y = data["y_train"][:8].astype("int32")
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(policy)
    try:
        model = CapsNet(**NARROW)
        model.compile(optimizer="adam")
        history = model.fit(x, y, batch_size=8, epochs=1, verbose=0)
        outputs = model(x)
        # What the trainer's figures and notebook 03 use, outside fit/call.
        inside = model.analyze(x[:2], labels=y[:2])
    finally:
        keras.config.set_dtype_policy(previous)
    compute = policy.split("_")[1]
    assert model.dtype_policy.name == policy
    assert model.digit_caps.compute_dtype == compute
    assert model.digit_caps.kernel.dtype == "float32"  # variables stay float32
    assert keras.backend.standardize_dtype(outputs["capsules"].dtype) == compute
    assert keras.backend.standardize_dtype(outputs["lengths"].dtype) == "float32"
    assert np.isfinite(history.history["loss"][0])
    assert np.all(np.isfinite(keras.ops.convert_to_numpy(outputs["lengths"])))
    for name in ("capsules", "reconstructions", "coupling"):
        assert np.all(np.isfinite(inside[name].astype("float32"))), name


def test_the_paper_network_in_bfloat16_scores_as_in_float32(mnist_path):
    # The same weights in each policy: bfloat16 keeps 8 bits of mantissa, so
    # the lengths move by a few hundredths at most, and no class changes but
    # where two lengths lie that close. What stays float32 stays exact.
    with np.load(mnist_path) as data:
        x = data["x_test"][:32].astype("float32")[..., None] / 255.0
        y = data["y_test"][:32].astype("int32")
    full = CapsNet()
    scores = {"float32": keras.ops.convert_to_numpy(full(x)["lengths"])}
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        mixed = CapsNet()
        mixed.build((None, 28, 28, 1))
        mixed.set_weights(full.get_weights())
        outputs = mixed(x)
        loss = mixed.compute_loss(x, y, outputs)
    finally:
        keras.config.set_dtype_policy(previous)
    scores["mixed"] = keras.ops.convert_to_numpy(outputs["lengths"])
    assert scores["mixed"].dtype == np.float32
    assert keras.backend.standardize_dtype(loss.dtype) == "float32"
    np.testing.assert_allclose(scores["mixed"], scores["float32"], atol=3e-2)
    margin = np.sort(scores["float32"], axis=-1)
    clear = margin[:, -1] - margin[:, -2] > 6e-2
    np.testing.assert_array_equal(
        scores["mixed"][clear].argmax(-1), scores["float32"][clear].argmax(-1)
    )
