"""The training and evaluation command lines."""

import csv
import json
import os
import signal
import subprocess
import sys
import time

import keras
import pytest
from conftest import REPO_ROOT

from capsules_keras import evaluate, train

ARTIFACTS = {
    "model.keras",
    "history.csv",
    "metrics.json",
    "config.json",
    "training_curves.png",
    "reconstructions.png",
    "confusion_matrix.png",
    "report.md",
}
METRIC_KEYS = {
    "test_accuracy",
    "test_error",
    "backend",
    "epochs",
    "train_seconds",
    "images_per_second",
    "data_source",
    "n_train",
    "n_test",
    "routing_iterations",
    "parameters",
}


def tiny_args(mnist_path, output_dir, *extra):
    return [
        "--data",
        mnist_path,
        "--max-train-samples",
        "100",
        "--max-test-samples",
        "60",
        "--batch-size",
        "50",
        "--epochs",
        "1",
        "--output-dir",
        str(output_dir),
        "--verbose",
        "0",
        *extra,
    ]


def only_run(output_dir):
    (name,) = os.listdir(output_dir)
    return os.path.join(output_dir, name)


def test_cli_writes_every_artifact(mnist_path, tmp_path, capsys):
    assert train.main(tiny_args(mnist_path, tmp_path)) == 0
    run_dir = only_run(tmp_path)
    assert keras.backend.backend() in os.path.basename(run_dir)
    assert ARTIFACTS <= set(os.listdir(run_dir))
    with open(os.path.join(run_dir, "metrics.json")) as f:
        metrics = json.load(f)
    assert METRIC_KEYS <= set(metrics)
    assert metrics["backend"] == keras.backend.backend()
    assert metrics["n_train"] == 100 and metrics["n_test"] == 60
    assert metrics["parameters"] == 8_215_568
    assert 0 <= metrics["test_accuracy"] <= 1
    assert metrics["test_error"] == pytest.approx(1 - metrics["test_accuracy"])
    assert metrics["images_per_second"] > 0
    with open(os.path.join(run_dir, "report.md")) as f:
        text = f.read()
    assert f"{metrics['test_accuracy']:.2%}" in text
    for figure in ARTIFACTS:
        if figure.endswith(".png"):
            assert f"]({figure})" in text
    out = capsys.readouterr().out
    for expected in ("Backend:", "Devices:", "Data:", "Sizes:", "Test accuracy"):
        assert expected in out
    # evaluate re-computes the same accuracy from the saved model.
    flags = ["--data", mnist_path, "--max-test-samples", "60"]
    assert evaluate.main([run_dir, *flags]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["test_accuracy"] == pytest.approx(metrics["test_accuracy"])


def test_cli_with_augmentation_and_validation(mnist_path, tmp_path):
    train.main(tiny_args(mnist_path, tmp_path, "--augment", "--validate"))
    run_dir = only_run(tmp_path)
    with open(os.path.join(run_dir, "history.csv")) as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 1 and "val_accuracy" in rows[0]
    with open(os.path.join(run_dir, "config.json")) as f:
        assert json.load(f)["augment"] is True


def test_a_new_run_never_overwrites_an_old_one(mnist_path, tmp_path):
    train.main(tiny_args(mnist_path, tmp_path))
    first = only_run(tmp_path)
    before = {n: os.path.getmtime(os.path.join(first, n)) for n in os.listdir(first)}
    train.main(tiny_args(mnist_path, tmp_path))
    runs = sorted(os.listdir(tmp_path))
    assert len(runs) == 2
    after = {n: os.path.getmtime(os.path.join(first, n)) for n in os.listdir(first)}
    assert after == before


def test_bad_flags_exit_with_a_message(mnist_path, tmp_path):
    with pytest.raises(SystemExit):
        train.main(tiny_args(mnist_path, tmp_path, "--epochs", "0"))
    with pytest.raises(SystemExit, match="lr-decay"):
        train.main(tiny_args(mnist_path, tmp_path, "--lr-decay", "1.5"))
    with pytest.raises(SystemExit, match="no run to resume"):
        train.main(["--resume", str(tmp_path)])
    with pytest.raises(SystemExit, match="No saved model"):
        evaluate.main([str(tmp_path)])


def test_killed_run_resumes_at_the_next_epoch(mnist_path, tmp_path):
    """Kill the trainer after its first epoch, resume, and it carries on."""
    args = tiny_args(mnist_path, tmp_path)
    args[args.index("--epochs") + 1] = "3"
    args[args.index("--max-train-samples") + 1] = "300"
    command = [sys.executable, "-m", "capsules_keras.train", *args]
    process = subprocess.Popen(
        command, cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    metadata = None
    deadline = time.time() + 600
    while time.time() < deadline and process.poll() is None:
        runs = os.listdir(tmp_path)
        if runs:
            path = os.path.join(tmp_path, runs[0], "backup", "training_metadata.json")
            if os.path.exists(path):
                process.send_signal(signal.SIGKILL)
                break
        time.sleep(0.2)
    process.wait()
    assert process.returncode == -signal.SIGKILL, process.stderr.read()[-3000:]
    run_dir = only_run(tmp_path)
    with open(os.path.join(run_dir, "backup", "training_metadata.json")) as f:
        metadata = json.load(f)
    done = metadata["epoch"]
    assert 1 <= done < 3
    assert not os.path.exists(os.path.join(run_dir, "metrics.json"))

    resumed = subprocess.run(
        [sys.executable, "-m", "capsules_keras.train", "--resume", run_dir],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"Epoch {done + 1}/3" in resumed.stdout
    assert "Epoch 1/3" not in resumed.stdout
    with open(os.path.join(run_dir, "history.csv")) as f:
        epochs = [int(row["epoch"]) for row in csv.DictReader(f)]
    assert epochs == [1, 2, 3]
    with open(os.path.join(run_dir, "metrics.json")) as f:
        assert json.load(f)["epochs"] == 3
    assert os.listdir(tmp_path) == [os.path.basename(run_dir)]
    finished = subprocess.run(
        [sys.executable, "-m", "capsules_keras.train", "--resume", run_dir],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )
    assert finished.returncode != 0 and "already finished" in finished.stderr
