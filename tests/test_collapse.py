"""The trainer's collapse guard: a run that can no longer learn stops and says why."""

import csv
import os

import numpy as np
import pytest
from test_benchmarks import image_folders
from test_train import only_run

from capsules_keras import train
from capsules_keras.training.collapse import saturated, stalled


def test_saturated_means_every_class_capsule_long():
    assert saturated(np.full((64, 3), 0.99))
    assert not saturated(np.full((64, 3), 0.001))  # short capsules still learn
    # One image of 64 whose capsules are short is not a collapse.
    lengths = np.full((64, 10), 0.99)
    lengths[0] = 0.5
    assert not saturated(lengths)
    assert not saturated(np.random.default_rng(0).uniform(0, 1, (64, 3)))


def test_stalled_needs_three_flat_epochs_at_chance():
    flat = {"loss": [0.81, 0.8101, 0.8099], "accuracy": [0.33, 0.34, 0.33]}
    assert stalled(flat, 3)
    assert not stalled({k: v[:2] for k, v in flat.items()}, 3)
    assert not stalled({**flat, "loss": [0.81, 0.75, 0.70]}, 3)  # learning
    assert not stalled({**flat, "accuracy": [0.33, 0.34, 0.6]}, 3)  # above chance
    assert not stalled({"loss": [1.0, 1.0, 1.0]}, 3)  # no accuracy logged


def test_a_collapsing_run_stops_after_its_first_epoch_and_says_why(tmp_path):
    # The new user's first folder: three shapes in colour, every pixel lit. At
    # the trainer's learning rate the paper's network (a folder's default was
    # it) has every capsule past length 1 after Adam's first steps, where the
    # squash passes no gradient.
    folder = tmp_path / "shapes"
    image_folders.write_shapes(str(folder), per_class=10)
    output = tmp_path / "runs"
    args = ["--data", str(folder), "--model=capsnet", "--epochs=4", "--batch-size=8"]
    with pytest.raises(SystemExit) as stop:
        train.main([*args, "--output-dir", str(output), "--verbose", "0"])
    message = str(stop.value)
    assert "Training collapsed after epoch 1" in message
    assert "every class capsule is at length 1" in message
    assert "--learning-rate 0.0001" in message
    run_dir = only_run(output)
    assert run_dir in message
    with open(os.path.join(run_dir, "history.csv"), newline="") as f:
        assert [row["epoch"] for row in csv.DictReader(f)] == ["1"]
