"""The training and evaluation command lines."""

import csv
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time

import keras
import numpy as np
import pytest
from conftest import REPO_ROOT

from capsules_keras import MatrixCapsNet, evaluate, train, training
from capsules_keras.training import TrainConfig, trainer_settings
from capsules_keras.training.fit import describe_training_set, load_data
from capsules_keras.training.precision import choose_dtype_policy
from capsules_keras.training.registry import JIT_COMPILE_DEFAULTS
from capsules_keras.training.runs import SAVED_BEFORE, read_history, resumed_config

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
    "jit_compile",
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


#: A narrower CapsNet for tests whose subject is not the model's size.
NARROW = ("--conv-filters", "16", "--primary-capsules", "4")
#: Fewer digits for the tests whose steps cost the most (the paper's network
#: of 8.2M parameters, EM routing): two steps of 10, and 10 test digits.
FEW_DIGITS = ("--max-train-samples=20", "--max-test-samples=10", "--batch-size=10")


def cli_config(*flags):
    """The `TrainConfig` of a command line's flags."""
    return train.config_of(train.build_parser().parse_args(list(flags)))


def only_run(output_dir):
    (name,) = os.listdir(output_dir)
    return os.path.join(output_dir, name)


def test_cli_writes_every_artifact(mnist_path, tmp_path, capsys):
    assert train.main(tiny_args(mnist_path, tmp_path, *FEW_DIGITS)) == 0
    run_dir = only_run(tmp_path)
    assert keras.backend.backend() in os.path.basename(run_dir)
    assert ARTIFACTS <= set(os.listdir(run_dir))
    with open(os.path.join(run_dir, "metrics.json")) as f:
        metrics = json.load(f)
    assert METRIC_KEYS <= set(metrics)
    assert metrics["backend"] == keras.backend.backend()
    assert metrics["n_train"] == 20 and metrics["n_test"] == 10
    assert metrics["n_train_available"] == 5000
    assert metrics["model"] == "capsnet" and metrics["dataset"] == "mnist"
    assert metrics["conv_filters"] == 256 and metrics["reconstruction_weight"] == 5e-4
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
    assert "20 of 5,000 (class-balanced subset, seed 0) training images" in text
    out = capsys.readouterr().out
    for expected in ("Backend:", "Devices:", "Data:", "Sizes:", "Test accuracy"):
        assert expected in out
    assert "Precision: float32 (as asked)" in out
    assert metrics["dtype_policy"] == "float32"
    assert "CapsNet on MNIST" in out
    (settings,) = [line for line in out.splitlines() if line.startswith("Settings:")]
    keys = [item.split("=")[0] for item in settings[len("Settings:") :].split(", ")]
    assert "conv_filters" in keys and len(keys) == len(set(keys))  # each once
    # evaluate re-computes the same accuracy from the saved model.
    flags = ["--data", mnist_path, "--max-test-samples", "10"]
    assert evaluate.main([run_dir, *flags]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["test_accuracy"] == pytest.approx(metrics["test_accuracy"])


def test_cli_with_augmentation_validation_and_auto_precision(
    mnist_path, tmp_path, capsys
):
    flags = ("--augment", "--validate", "--dtype-policy", "auto", *NARROW)
    flags += ("--weight-decay", "0.004")
    train.main(tiny_args(mnist_path, tmp_path, *flags))
    run_dir = only_run(tmp_path)
    # The decay reaches the optimizer the model was trained and saved with.
    model = keras.saving.load_model(os.path.join(run_dir, "model.keras"))
    assert model.optimizer.weight_decay == pytest.approx(0.004)
    with open(os.path.join(run_dir, "history.csv")) as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 1 and "val_accuracy" in rows[0]
    with open(os.path.join(run_dir, "config.json")) as f:
        config = json.load(f)
    assert config["augment"] is True and config["dtype_policy"] == "auto"
    assert config["weight_decay"] == 0.004
    # The run records and says the policy `auto` chose on this machine.
    policy, why = choose_dtype_policy("auto")
    with open(os.path.join(run_dir, "metrics.json")) as f:
        assert json.load(f)["dtype_policy"] == policy
    assert f"Precision: {policy} ({why})" in capsys.readouterr().out


def test_a_new_run_never_overwrites_an_old_one(mnist_path, tmp_path):
    train.main(tiny_args(mnist_path, tmp_path, *NARROW))
    first = only_run(tmp_path)
    before = {n: os.path.getmtime(os.path.join(first, n)) for n in os.listdir(first)}
    train.main(tiny_args(mnist_path, tmp_path, *NARROW))
    runs = sorted(os.listdir(tmp_path))
    assert len(runs) == 2
    after = {n: os.path.getmtime(os.path.join(first, n)) for n in os.listdir(first)}
    assert after == before
    newest = training.latest_run(str(tmp_path), "mnist-capsnet-quick")
    assert newest == os.path.join(str(tmp_path), runs[1])


def test_latest_run_finds_the_newest_finished_run_of_a_name(tmp_path):
    def make(folder, *files):
        os.makedirs(tmp_path / folder)
        for name in files:
            (tmp_path / folder / name).write_text("")

    done = ("model.keras", "metrics.json")
    make("20260101-120000-multi_mnist-capsnet-quick-jax", *done)
    make("20260102-090000-multi_mnist-capsnet-quick-torch", *done)
    make("20260102-090000-multi_mnist-capsnet-quick-torch-2", *done)
    make("20260102-090000-multi_mnist-capsnet-quick-torch-10", *done)
    make("20260103-080000-multi_mnist-capsnet-quick-jax", "model.keras")  # running
    make("20260104-080000-multi_mnist-cnn-quick-jax", *done)  # another model
    make("20260104-080000-mnist-capsnet-quick-jax", *done)  # another dataset
    latest = training.latest_run(str(tmp_path), "multi_mnist-capsnet-quick")
    assert (
        os.path.basename(latest) == "20260102-090000-multi_mnist-capsnet-quick-torch-10"
    )
    assert training.latest_run(str(tmp_path), "mnist-capsnet") is None
    assert training.latest_run(str(tmp_path / "absent"), "mnist-capsnet-quick") is None


def test_bad_flags_exit_with_a_message(mnist_path, tmp_path):
    with pytest.raises(SystemExit):
        train.main(tiny_args(mnist_path, tmp_path, "--epochs", "0"))
    with pytest.raises(SystemExit, match="Received: lr_decay=1.5"):
        train.main(tiny_args(mnist_path, tmp_path, "--lr-decay", "1.5"))
    with pytest.raises(SystemExit, match="no run to resume"):
        train.main(["--resume", str(tmp_path)])
    with pytest.raises(SystemExit, match="No saved model"):
        evaluate.main([str(tmp_path)])


def test_killed_run_resumes_at_the_next_epoch(mnist_path, tmp_path, capsys):
    """Kill the trainer after its first epoch, resume, and it carries on."""
    args = tiny_args(mnist_path, tmp_path, *NARROW)
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

    # The resumed run in this process: a second interpreter costs seconds.
    capsys.readouterr()
    assert train.main(["--resume", run_dir]) == 0
    resumed = capsys.readouterr().out
    assert f"Epoch {done + 1}/3" in resumed
    assert "Epoch 1/3" not in resumed
    with open(os.path.join(run_dir, "history.csv")) as f:
        epochs = [int(row["epoch"]) for row in csv.DictReader(f)]
    assert epochs == [1, 2, 3]
    with open(os.path.join(run_dir, "metrics.json")) as f:
        assert json.load(f)["epochs"] == 3
    assert os.listdir(tmp_path) == [os.path.basename(run_dir)]
    with pytest.raises(SystemExit, match="already finished"):
        train.main(["--resume", run_dir])


def test_quick_preset_trains_on_a_balanced_subset_and_paper_on_everything(
    mnist_path,
):
    quick = cli_config("--data", mnist_path)
    assert quick.max_train_samples == 5000 and quick.max_test_samples is None
    assert cli_config("--preset", "paper").max_train_samples is None
    # Precision: the paper's CapsNet by the machine, the rest as measured.
    assert cli_config("--preset", "paper").dtype_policy == "auto"
    assert quick.dtype_policy == "float32"
    assert cli_config("--preset", "paper", "--model", "efficient").dtype_policy == (
        "float32"
    )
    assert cli_config("--max-train-samples", "20000").max_train_samples == 20000
    capped = dataclasses.replace(quick, max_train_samples=1000, seed=3)
    data = load_data(capped)
    assert len(data.x_train) == 1000 and data.available == 5000
    assert len(data.x_test) == 10000
    assert np.bincount(data.y_train).tolist() == [100] * 10
    assert data.training_set == "1,000 of 5,000 (class-balanced subset, seed 3)"
    again = load_data(capped)
    np.testing.assert_array_equal(again.x_train, data.x_train)  # seeded: the same
    everything = load_data(quick)  # the offline file holds 5,000: all
    assert len(everything.x_train) == 5000 and everything.training_set == "5,000 (all)"
    assert describe_training_set(5000, 5000, 0) == "5,000 (all)"


@pytest.mark.parametrize(
    "keywords, flags",
    [
        ({}, []),
        (
            {"preset": "paper", "model": "efficient"},
            ["--preset", "paper", "--model", "efficient"],
        ),
        (
            {"dataset": "multi_mnist", "pairs_per_epoch": 100, "epochs": 1},
            ["--dataset", "multi_mnist", "--pairs-per-epoch", "100", "--epochs", "1"],
        ),
        (
            {"model": "cnn", "dataset": "fashion_mnist", "seed": 3},
            ["--model", "cnn", "--dataset", "fashion_mnist", "--seed", "3"],
        ),
        (
            {"routing": "self_attention", "conv_filters": 16, "augment": True},
            ["--routing", "self_attention", "--conv-filters", "16", "--augment"],
        ),
        (
            {"model": "em", "jit_compile": "off", "max_test_samples": 60},
            ["--model", "em", "--jit-compile", "off", "--max-test-samples", "60"],
        ),
    ],
)
def test_trainer_settings_are_the_command_lines(keywords, flags):
    assert trainer_settings(**keywords) == cli_config(*flags)


@pytest.mark.parametrize(
    "flags, match",
    [
        ({"epoch": 2}, r"Unknown trainer flags \['epoch'\]"),
        ({"epochs": 0}, "Received: epochs=0"),
        ({"batch_size": 1.5}, "Received: batch_size=1.5"),
        ({"weight_decay": -0.1}, "Received: weight_decay=-0.1"),
        ({"model": "resnet"}, "Received: model='resnet'"),
        ({"dataset": "cifar10"}, "Received: dataset='cifar10'"),
        ({"model": "cnn", "routing_iterations": 1}, "does not apply to model='cnn'"),
    ],
)
def test_trainer_settings_refuse_bad_flags(flags, match):
    with pytest.raises(ValueError, match=match):
        trainer_settings(**flags)


@pytest.mark.parametrize(
    "model, title, parameters",
    # The CapsNet narrow (its paper size: test_cli_writes_every_artifact); the
    # CNN at the paper CapsNet's budget, its default.
    [("capsnet", "CapsNet", 1_638_480), ("cnn", "baseline CNN", 8_214_401)],
)
def test_both_models_train_on_fashion_mnist_through_the_same_command(
    fashion_path, tmp_path, capsys, model, title, parameters
):
    args = tiny_args(fashion_path, tmp_path, "--model", model)
    args += ["--dataset", "fashion_mnist", *(NARROW if model == "capsnet" else ())]
    assert train.main(args) == 0
    run_dir = only_run(tmp_path)
    assert f"fashion_mnist-{model}-quick" in os.path.basename(run_dir)
    with open(os.path.join(run_dir, "metrics.json")) as f:
        metrics = json.load(f)
    assert metrics["model"] == model and metrics["dataset"] == "fashion_mnist"
    assert metrics["parameters"] == parameters
    assert metrics["n_train"] == 100 and metrics["n_train_available"] == 60000
    has_decoder = model == "capsnet"  # a CNN has no decoder and no routing
    assert (metrics["routing_iterations"] == 3) == has_decoder
    files = set(os.listdir(run_dir))
    assert ARTIFACTS - {"reconstructions.png"} <= files
    assert ("reconstructions.png" in files) == has_decoder
    with open(os.path.join(run_dir, "report.md")) as f:
        text = f.read()
    assert text.startswith(f"# {title} on Fashion-MNIST")
    assert ("reconstructions.png" in text) == has_decoder
    assert ("| routing | dynamic, 3 iterations |" in text) == has_decoder
    assert f"{title} on Fashion-MNIST" in capsys.readouterr().out
    # The evaluator reads the dataset from the run folder.
    flags = ["--data", fashion_path, "--max-test-samples", "60"]
    assert evaluate.main([run_dir, *flags]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["dataset"] == "fashion_mnist"
    assert result["test_accuracy"] == pytest.approx(metrics["test_accuracy"])


def test_model_and_dataset_flags_are_checked(mnist_path, tmp_path):
    cnn_with_routing = ["--model", "cnn", "--routing-iterations", "1"]
    with pytest.raises(SystemExit, match="does not apply to model='cnn'"):
        train.main(tiny_args(mnist_path, tmp_path, *cnn_with_routing))
    with pytest.raises(SystemExit):
        train.main(tiny_args(mnist_path, tmp_path, "--dataset", "cifar10"))
    with pytest.raises(SystemExit):
        train.main(tiny_args(mnist_path, tmp_path, "--model", "resnet"))
    assert os.listdir(tmp_path) == []  # nothing started, nothing written


def test_a_run_saved_before_model_and_dataset_existed_resumes(mnist_path, tmp_path):
    flags = tiny_args(mnist_path, tmp_path, *FEW_DIGITS)
    settings = dataclasses.asdict(cli_config(*flags))
    for key in SAVED_BEFORE:  # settings that config.json lacked then
        del settings[key]
    run_dir = tmp_path / "old-run"
    run_dir.mkdir()
    with open(run_dir / "config.json", "w") as f:
        json.dump(settings, f)
    assert train.main(["--resume", str(run_dir)]) == 0
    with open(run_dir / "metrics.json") as f:
        metrics = json.load(f)
    assert metrics["model"] == "capsnet" and metrics["dataset"] == "mnist"
    assert metrics["conv_filters"] == 256 and metrics["reconstruction_weight"] == 5e-4


#: A `config.json` as the trainer wrote it before `TrainConfig` (the paper
#: preset's run of 2026-12-06): every key, in its order.
CONFIG_BEFORE_TRAIN_CONFIG = {
    "epochs": 50,
    "batch_size": 100,
    "learning_rate": 0.001,
    "lr_decay": 0.9,
    "augment": True,
    "validate": True,
    "max_train_samples": None,
    "pairs_per_epoch": None,
    "conv_filters": 256,
    "primary_capsules": 32,
    "model": "capsnet",
    "dataset": "mnist",
    "data": "/work/shared/data/mnist-full.npz",
    "max_test_samples": None,
    "seed": 0,
    "jit_compile": "auto",
    "dtype_policy": "float32",
    "distribute": "none",
    "coordinator_address": None,
    "num_processes": None,
    "process_id": None,
    "preset": "paper",
    "routing": "dynamic",
    "routing_iterations": 3,
    "reconstruction_weight": 0.0005,
}


def test_a_run_folder_written_before_train_config_resumes(mnist_path, tmp_path):
    run_dir = tmp_path / "paper-run"
    run_dir.mkdir()
    (run_dir / "config.json").write_text(json.dumps(CONFIG_BEFORE_TRAIN_CONFIG))
    config = resumed_config(str(run_dir))
    # Its settings as they were; a setting added since takes its default.
    resumed = dataclasses.asdict(config)
    assert {k: resumed[k] for k in CONFIG_BEFORE_TRAIN_CONFIG} == (
        CONFIG_BEFORE_TRAIN_CONFIG
    )
    assert resumed["memory_budget_gb"] is None
    data = CONFIG_BEFORE_TRAIN_CONFIG["data"]
    # The paper preset picks its precision by the machine since; it ran float32.
    assert config == trainer_settings(preset="paper", data=data, dtype_policy="float32")
    # The same keys with a tiny run's values: it trains to the end.
    tiny = {
        **CONFIG_BEFORE_TRAIN_CONFIG,
        "epochs": 1,
        "batch_size": 50,
        "data": mnist_path,
        "max_train_samples": 100,
        "max_test_samples": 60,
        "conv_filters": 16,
        "primary_capsules": 4,
        "augment": False,
        "validate": False,
    }
    (run_dir / "config.json").write_text(json.dumps(tiny))
    assert train.main(["--resume", str(run_dir), "--verbose", "0"]) == 0
    with open(run_dir / "metrics.json") as f:
        metrics = json.load(f)
    assert {k: metrics[k] for k in tiny if k != "jit_compile"} == {
        k: v for k, v in tiny.items() if k != "jit_compile"
    }
    (run_dir / "metrics.json").unlink()
    (run_dir / "config.json").write_text(json.dumps({**tiny, "epoch": 2}))
    with pytest.raises(SystemExit, match=r"does not know. Received: \['epoch'\]"):
        train.main(["--resume", str(run_dir)])
    (run_dir / "config.json").write_text(json.dumps({**tiny, "epochs": 0}))
    with pytest.raises(SystemExit, match="Received: epochs=0"):
        train.main(["--resume", str(run_dir)])


def test_train_config_is_the_command_line_config_json_and_metrics():
    """`TrainConfig()` is the trainer without flags; its fields are the flags,
    `config.json` and the settings in `metrics.json`."""
    assert TrainConfig() == trainer_settings() == cli_config()
    names = [field.name for field in dataclasses.fields(TrainConfig)]
    config = trainer_settings(dataset="multi_mnist", model="cnn", preset="paper")
    saved = json.loads(json.dumps(dataclasses.asdict(config)))
    assert list(saved) == names and TrainConfig(**saved) == config
    # Every preset, model option and dataset option is a field.
    for presets in (
        training.PRESETS,
        *training.DATASET_PRESETS.values(),
        *training.MODEL_PRESETS.values(),
    ):
        for overrides in presets.values():
            assert set(overrides) <= set(names)
    for choice in training.MODELS.values():
        assert set(choice.options) <= set(names)
    # Every field is a flag whose help says what the field's does.
    text = " ".join(train.build_parser().format_help().split())
    for field in dataclasses.fields(TrainConfig):
        assert "--" + field.name.replace("_", "-") in text
        assert " ".join(field.metadata["help"].split()) in text
    assert "[default 5; paper: 50;" in text  # the defaults, from TrainConfig
    assert "multi_mnist quick: 128]" in text  # ... and from the presets
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.epochs = 3


@pytest.mark.parametrize(
    "model, figure",
    [
        ("capsnet", "overlapping_digits.png"),
        # Efficient-CapsNet's backbone under the several-digits task.
        ("efficient", "overlapping_digits.png"),
        ("cnn", None),
    ],
)
def test_every_model_trains_on_overlapping_digits(
    mnist_path, tmp_path, capsys, model, figure
):
    args = tiny_args(mnist_path, tmp_path, "--model", model, "--validate")
    args += ["--dataset", "multi_mnist", "--pairs-per-epoch", "60"]
    if model == "capsnet":
        args += NARROW
    assert train.main(args) == 0
    run_dir = only_run(tmp_path)
    assert f"multi_mnist-{model}-quick" in os.path.basename(run_dir)
    with open(os.path.join(run_dir, "metrics.json")) as f:
        metrics = json.load(f)
    assert metrics["n_test"] == 60  # fixed test pairs, not test digits
    assert metrics["pairs_per_epoch"] == 60 and metrics["n_train"] == 100
    if model == "cnn":  # sized like the quick preset's (narrower) CapsNet
        assert metrics["parameters"] == pytest.approx(5_321_872, rel=1e-3)
    exact = metrics["test_accuracy"]
    at_least_one = metrics["test_accuracy_at_least_one"]
    assert 0 <= exact <= at_least_one <= 1
    history = read_history(os.path.join(run_dir, "history.csv"))
    assert {"exact_match", "at_least_1", "val_exact_match"} <= set(history)
    files = set(os.listdir(run_dir))
    assert {"model.keras", "training_curves.png", "report.md"} <= files
    assert "confusion_matrix.png" not in files
    assert ("overlapping_digits.png" in files) == (figure is not None)
    with open(os.path.join(run_dir, "report.md")) as f:
        text = f.read()
    assert "| both digits right |" in text and "| at least one right |" in text
    assert "fresh pairs drawn from 100" in text
    out = capsys.readouterr().out
    assert "60 fixed test pairs" in out and "At least one right" in out
    # The evaluator rebuilds the same fixed test pairs from the run's dataset.
    flags = ["--data", mnist_path, "--max-test-samples", "60"]
    assert evaluate.main([run_dir, *flags]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["dataset"] == "multi_mnist"
    assert result["test_accuracy"] == pytest.approx(exact)
    assert result["test_accuracy_at_least_one"] == pytest.approx(at_least_one)
    if model == "capsnet":
        assert evaluate.main([run_dir, *flags, "--routing-iterations", "1"]) == 0
        result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert result["routing_iterations"] == 1
    elif model == "cnn":
        with pytest.raises(SystemExit, match="needs a capsule classifier"):
            evaluate.main([run_dir, *flags, "--routing-iterations", "1"])


def test_multi_mnist_presets(mnist_path):
    quick = cli_config("--dataset", "multi_mnist")
    preset = training.DATASET_PRESETS["multi_mnist"]["quick"]
    assert {k: getattr(quick, k) for k in preset} == preset
    assert quick.max_train_samples == 5000  # digits, as for MNIST
    paper = cli_config("--dataset", "multi_mnist", "--preset", "paper")
    assert (paper.conv_filters, paper.primary_capsules) == (256, 32)
    assert paper.pairs_per_epoch == 60_000 and paper.max_train_samples is None
    assert cli_config("--dataset", "mnist").pairs_per_epoch is None
    cnn = cli_config("--dataset", "multi_mnist", "--model", "cnn")
    assert cnn.conv_filters is None and cnn.reconstruction_weight is None
    assert cnn.epochs == 4  # the dataset's preset still applies
    assert cli_config("--reconstruction-weight", "0").reconstruction_weight == 0


@pytest.mark.parametrize(
    "flags, match",
    [
        (["--pairs-per-epoch", "10"], "dataset 'multi_mnist' only"),
        (["--model", "cnn", "--conv-filters", "8"], "does not apply to model='cnn'"),
        (["--model", "cnn", "--reconstruction-weight", "0"], "apply to model='cnn'"),
        (["--reconstruction-weight", "-1"], "must be >= 0"),
        (["--model", "efficient", "--conv-filters", "8"], "only to capsnet"),
        (["--model", "em", "--dataset", "multi_mnist"], "one object"),
    ],
)
def test_task_flags_are_checked(mnist_path, tmp_path, flags, match):
    with pytest.raises(SystemExit, match=match):
        train.main(tiny_args(mnist_path, tmp_path, *flags))
    assert os.listdir(tmp_path) == []


def test_routing_flag_swaps_the_routing_of_capsnet(mnist_path, tmp_path):
    assert cli_config().routing == "dynamic" and cli_config().routing_iterations == 3
    attention = cli_config("--routing", "self_attention")
    assert attention.routing_iterations == 1  # one pass
    assert cli_config("--model", "cnn").routing is None
    with pytest.raises(SystemExit, match="one pass"):
        train.main(
            tiny_args(mnist_path, tmp_path, "--routing", "self_attention")
            + ["--routing-iterations", "3"]
        )
    with pytest.raises(SystemExit, match="does not apply to model='cnn'"):
        cnn = ["--model", "cnn", "--routing", "dynamic"]
        train.main(tiny_args(mnist_path, tmp_path, *cnn))
    assert os.listdir(tmp_path) == []
    args = tiny_args(mnist_path, tmp_path, "--routing", "inverted_dot_product")
    assert train.main([*args, *NARROW]) == 0
    with open(os.path.join(only_run(tmp_path), "metrics.json")) as f:
        metrics = json.load(f)
    assert metrics["routing"] == "inverted_dot_product"
    assert metrics["routing_iterations"] == 3 and metrics["conv_filters"] == 16
    model = keras.saving.load_model(os.path.join(only_run(tmp_path), "model.keras"))
    assert model.routing == "inverted_dot_product"


def test_efficient_capsnet_trains_through_the_same_command(mnist_path, tmp_path):
    paper = cli_config("--model", "efficient", "--preset", "paper")
    assert (paper.batch_size, paper.learning_rate, paper.lr_decay) == (16, 5e-4, 0.98)
    assert paper.routing == "self_attention" and paper.routing_iterations == 1
    assert paper.conv_filters is None and paper.max_train_samples is None
    quick = cli_config("--model", "efficient", "--preset", "quick")
    assert (quick.epochs, quick.max_train_samples, quick.augment) == (1, None, False)
    dynamic = cli_config("--model", "efficient", "--routing", "dynamic")
    assert dynamic.routing == "dynamic" and dynamic.routing_iterations == 3
    assert train.main(tiny_args(mnist_path, tmp_path, "--model", "efficient")) == 0
    run_dir = only_run(tmp_path)
    with open(os.path.join(run_dir, "metrics.json")) as f:
        metrics = json.load(f)
    assert metrics["model"] == "efficient" and metrics["routing"] == "self_attention"
    assert metrics["parameters"] == 1_573_744  # 161,824 without the decoder
    assert "reconstructions.png" in os.listdir(run_dir)
    with open(os.path.join(run_dir, "report.md")) as f:
        assert f.read().startswith("# Efficient-CapsNet on MNIST")


def test_matrix_capsules_train_through_the_same_command(mnist_path, tmp_path):
    quick = cli_config("--model", "em")
    assert quick.routing_iterations == MatrixCapsNet.ROUTING_ITERATIONS
    assert quick.routing is None and quick.conv_filters is None
    assert quick.max_train_samples == 5000
    with pytest.raises(SystemExit, match="only to capsnet"):
        train.main(
            tiny_args(mnist_path, tmp_path, "--model", "em", "--routing", "dynamic")
        )
    assert os.listdir(tmp_path) == []
    args = tiny_args(
        mnist_path, tmp_path, "--model", "em", "--epochs", "2", *FEW_DIGITS
    )
    assert train.main(args + ["--routing-iterations", "1"]) == 0
    run_dir = only_run(tmp_path)
    with open(os.path.join(run_dir, "metrics.json")) as f:
        metrics = json.load(f)
    assert metrics["model"] == "em" and metrics["routing_iterations"] == 1
    assert metrics["epochs"] == 2 and metrics["parameters"] == 63_389
    # --jit-compile auto: XLA on jax and, for this model, on tensorflow.
    assert metrics["jit_compile"] == (keras.backend.backend() != "torch")
    model = keras.saving.load_model(os.path.join(run_dir, "model.keras"))
    assert isinstance(model, MatrixCapsNet) and model.routing_iterations == 1
    # SpreadMarginSchedule raised the margin at the start of epoch 2.
    assert float(model.spread_margin) == pytest.approx(0.3)
    with open(os.path.join(run_dir, "report.md")) as f:
        assert f.read().startswith("# Matrix capsules with EM routing on MNIST")


def test_default_jit_compile_is_chosen_per_backend_and_model():
    backend = keras.backend.backend()
    assert training.default_jit_compile() == JIT_COMPILE_DEFAULTS[backend]
    assert training.default_jit_compile("jax") is True
    assert training.default_jit_compile("tensorflow") is False
    # Matrix capsules: XLA on tensorflow too (their step is the routing loop).
    assert training.default_jit_compile("tensorflow", model="em") is True
    assert training.default_jit_compile("torch", model="em") is False
    # Efficient-CapsNet: XLA on tensorflow (its primary capsules are a
    # contraction, its convolutions small).
    assert training.default_jit_compile("tensorflow", model="efficient") is True
    assert training.default_jit_compile("torch", model="efficient") is False
    # ... and torch.compile on torch, from two epochs of 60,000 digits on.
    short, long = 119_999, 120_000
    assert training.default_jit_compile("torch", "efficient", images=short) is False
    assert training.default_jit_compile("torch", "efficient", images=long) is True
    assert training.default_jit_compile("torch", "capsnet", images=10**8) is False
    assert training.default_jit_compile("tensorflow", "capsnet", images=long) is False
    assert training.default_jit_compile("jax", "efficient", images=0) is True
    with pytest.raises(ValueError, match="'lenet'"):
        training.default_jit_compile(model="lenet")
    for images in (-1, 2.5, True, "many"):
        with pytest.raises(ValueError, match=f"images={images!r}"):
            training.default_jit_compile("torch", "efficient", images=images)


def test_a_batch_that_would_not_fit_fails_before_training(mnist_path, tmp_path, capsys):
    # The capacity plan is printed, and a budget below its peak stops the run
    # before the first step, naming the largest batch that fits.
    args = tiny_args(mnist_path, tmp_path, *NARROW, "--memory-budget-gb", "0.05")
    with pytest.raises(SystemExit, match="largest batch that fits") as error:
        train.main(args)
    assert "batch_size=50" in str(error.value)
    out = capsys.readouterr().out
    assert "peak training memory, batch 50" in out
    assert not os.path.exists(os.path.join(only_run(tmp_path), "history.csv"))
