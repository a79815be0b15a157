"""The benchmarks run at a tiny size, so that they cannot rot.

Every script in benchmarks/ runs here or in `make bench` (benchmarks/run_all.py).
Speed is never asserted here: `make bench` measures it (benchmarks/README.md).
"""

import json
import os
import subprocess
import sys
from importlib.metadata import version

import keras
import numpy as np
import pytest
from conftest import REPO_ROOT

BENCHMARKS = os.path.join(REPO_ROOT, "benchmarks")
sys.path.insert(0, BENCHMARKS)
sys.path.insert(0, os.path.join(REPO_ROOT, "tools"))

import bench_em  # noqa: E402
import bench_models  # noqa: E402
import bench_routing  # noqa: E402
import bench_routings  # noqa: E402
import choose_weights  # noqa: E402
import export_pretrained  # noqa: E402
import first_steps  # noqa: E402
import folder_comparison  # noqa: E402
import image_folders  # noqa: E402
import mnist_validation_split  # noqa: E402
import precision_parity  # noqa: E402
import reference_accuracy  # noqa: E402
import run_all  # noqa: E402
import slowest_tests  # noqa: E402


@pytest.fixture(scope="module")
def gpu_dry_run(tmp_path_factory, mnist_path):
    """benchmarks/gpu_check.sh end to end, tiny, on this CPU and this backend.

    A second backend is made absent the way it is absent on the GPU machine:
    its import fails (a package on PYTHONPATH that raises ImportError), so the
    check skips it with one line. One dtype policy of the two, the one more
    likely to break: float32 trains in every other test. Its benchmark run
    (`run_all.py`: the routing and training benchmarks at a tiny size) is
    also what the benchmarks' own tests below read, so that they run once.

    Returns:
        `(result, out)`: the finished script and its output folder.
    """
    tmp_path = tmp_path_factory.mktemp("gpu_check")
    backend = keras.backend.backend()
    absent = "jax" if backend == "tensorflow" else "tensorflow"
    shadow = tmp_path / "absent" / absent
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text(f"raise ImportError('no {absent} here')\n")
    out = tmp_path / "gpu"
    env = {
        **os.environ,
        "GPU_CHECK_PYTHON": sys.executable,
        "GPU_CHECK_BACKENDS": f"{backend} {absent}",
        "GPU_CHECK_POLICIES": "mixed_bfloat16",
        "CAPSULES_KERAS_TEST_MNIST": mnist_path,
        "PYTHONPATH": os.pathsep.join(
            [str(tmp_path / "absent"), os.environ.get("PYTHONPATH", "")]
        ),
    }
    script = os.path.join(BENCHMARKS, "gpu_check.sh")
    result = subprocess.run(
        ["bash", script, "--dry-run", str(out)],
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    return result, out


@pytest.fixture(scope="module")
def tiny_bench(gpu_dry_run):
    """The dry run's benchmark results (`run_all.py`'s results.json)."""
    _, out = gpu_dry_run
    with open(out / f"bench-{keras.backend.backend()}" / "results.json") as f:
        return json.load(f)


@pytest.fixture(scope="module")
def tiny_routing(tiny_bench):
    """The routing benchmark at a tiny size: batch 2, 16 input capsules."""
    return tiny_bench["routing"]


def test_routing_benchmark_tiny(tiny_routing):
    results = tiny_routing
    modes = {r["mode"] for r in results}
    assert "labml" in modes and len(modes) >= 2
    for row in results:
        assert row["median_ms"] > 0 and row["ratio_to_labml"] > 0
        assert row["pass"] in ("forward", "forward+backward")
    # One mode of ours is the backend's default path, none of labml's.
    defaults = {r["mode"] for r in results if r["default"]}
    assert defaults == {bench_routing.DEFAULT_MODE[keras.backend.backend()]}


def test_routings_benchmark_tiny():
    results = bench_routings.run(batch=2, in_caps=16, repeats=1, warmup=1)
    names = [row["name"] for row in results]
    assert names == [name for name, _, _ in bench_routings.ROUTING_CASES]
    (baseline,) = [row for row in results if row["name"] == bench_routings.BASELINE]
    assert baseline["ratio_to_dynamic_3"] == 1
    for row in results:
        assert row["backend"] == keras.backend.backend() and row["median_ms"] > 0
        assert row["jit_compile"] == (keras.backend.backend() == "jax")


def test_em_benchmark_tiny():
    # Two of the three cases: each builds and compiles a model of its own.
    results = bench_em.run(
        batch=2, repeats=1, warmup=1, opt_in=False, iterations=(1, 2)
    )
    assert [row["routing_iterations"] for row in results] == [1, 2]
    for row in results:
        assert row["backend"] == keras.backend.backend() and row["median_ms"] > 0
        assert row["jit_compile"] == (keras.backend.backend() == "jax")
        assert row["parameters"] == 63_389 and row["images_per_second"] > 0


def test_models_benchmark_tiny(tmp_path):
    # Two of the three models: the ratio needs the CapsNet, and each model
    # compiles a training step of its own.
    out = tmp_path / "models.json"
    flags = ["--models", "capsnet", "efficient", "--images", "8", "--repeats", "1"]
    bench_models.main([*flags, "--out", str(out)])
    with open(out) as f:
        report = json.load(f)
    assert report["benchmark"] == "models" and report["settings"]["images"] == 8
    rows = {row["model"]: row for row in report["results"]}
    assert list(rows) == ["capsnet", "efficient"]
    assert rows["capsnet"]["ratio_to_capsnet"] == 1
    for name, row in rows.items():
        assert row["backend"] == keras.backend.backend()
        assert row["batch_size"] == bench_models.MODELS[name][1]
        assert row["images_per_s"] >= row["median_images_per_s"] > 0
    assert rows["efficient"]["ratio_to_capsnet"] == pytest.approx(
        rows["efficient"]["images_per_s"] / rows["capsnet"]["images_per_s"]
    )


@pytest.fixture(scope="module")
def tiny_train(tiny_bench):
    """One tiny training run of each implementation: one step at batch 2."""
    return [{**run, "paired_with": "x"} for run in tiny_bench["train"]]


def test_train_benchmark_tiny(tiny_train):
    # The dry run asks for ours in float32 only (--train-dtype-policies).
    runs = [(result["impl"], result.get("dtype_policy")) for result in tiny_train]
    assert runs == [("labml", None), ("ours", "float32")]
    for result in tiny_train:
        assert result["parameters"] == 8_215_568
        assert result["images_per_second"] > 0 and result["rss_peak_mb"] > 0
    assert tiny_train[1]["backend"] == keras.backend.backend()


def test_report_from_tiny_results(tmp_path, tiny_routing, tiny_train):
    # The precision table pairs ours in float32 with ours in mixed_bfloat16.
    float32 = tiny_train[1]["images_per_second"]
    mixed = {**tiny_train[1], "dtype_policy": "mixed_bfloat16"}
    mixed["images_per_second"] = 1.5 * float32
    report = {
        "date": "today",
        "machine": run_all.machine(),
        "routing": tiny_routing,
        "train": [*tiny_train, mixed],
    }
    run_all.write_report(report, str(tmp_path), notes="notes")
    text = (tmp_path / "README.md").read_text()
    assert "| x |" in text and "ours / labml" in text and "notes" in text
    assert f"| x | {float32:.1f} | {1.5 * float32:.1f} | 1.50x |" in text
    assert (tmp_path / "results.png").stat().st_size > 1000
    assert (tmp_path / "results.json").exists()


def test_report_rewritten_from_json(tmp_path, tiny_train):
    report = {"date": "today", "machine": run_all.machine(), "routing": []}
    run_all.write_report({**report, "train": tiny_train}, str(tmp_path))
    notes = tmp_path / "notes.md"
    notes.write_text("fresh notes")
    again = tmp_path / "again"
    again.mkdir()
    args = ["--from-json", str(tmp_path / "results.json"), "--output-dir", str(again)]
    run_all.main([*args, "--notes-file", str(notes)])
    text = (again / "README.md").read_text()
    assert "fresh notes" in text and "| x |" in text


def test_precision_parity_tiny(mnist_path, tmp_path):
    from capsules_keras import CapsNet

    with np.load(mnist_path) as data:
        digits = {key: data[key][:20] for key in data.files}
    np.savez(tmp_path / "mnist.npz", **digits)
    keras.utils.set_random_seed(0)
    model = CapsNet()
    model.build((None, 28, 28, 1))
    model.save(tmp_path / "a.keras")
    model.save_weights(tmp_path / "b.weights.h5")
    out = tmp_path / "parity.json"
    args = [
        "--float32",
        str(tmp_path / "a.keras"),
        "--data",
        str(tmp_path / "mnist.npz"),
    ]
    precision_parity.main(
        [*args, "--mixed", str(tmp_path / "b.weights.h5"), "--out", str(out)]
    )
    result = json.loads(out.read_text())
    # One model in two files: the same digits right, nothing to tell apart.
    assert result["test_digits"] == 20
    assert result["float32_accuracy"] == result["mixed_accuracy"]
    assert (result["float32_only"], result["mixed_only"], result["mcnemar_p"]) == (
        0,
        0,
        1.0,
    )
    assert result["mixed_minus_float32"] == [0.0, 0.0, 0.0]


def _tiny_mnist(mnist_path, folder, n=30):
    with np.load(mnist_path) as data:
        digits = {key: data[key][:n] for key in data.files}
    np.savez(folder / "mnist.npz", **digits)
    return folder / "mnist.npz", digits


def _capsnet_weights(folder, seeds):
    """One untrained paper CapsNet per seed, saved as epoch_1, epoch_2, ..."""
    from capsules_keras import CapsNet

    folder.mkdir()
    weights = []
    for epoch, seed in enumerate(seeds, start=1):
        keras.utils.set_random_seed(seed)
        model = CapsNet()
        model.build((None, 28, 28, 1))
        model.save_weights(folder / f"epoch_{epoch}.weights.h5")
        weights.append(model.get_weights())
    return model, weights


def test_mnist_validation_split_holds_out_the_last_digits(mnist_path, tmp_path):
    source, digits = _tiny_mnist(mnist_path, tmp_path)
    out = tmp_path / "split.npz"
    assert mnist_validation_split.main([str(source), str(out), "--validation", "10"])
    with np.load(out) as split:
        np.testing.assert_array_equal(split["x_train"], digits["x_train"][:20])
        np.testing.assert_array_equal(split["y_test"], digits["y_train"][20:])
    with pytest.raises(SystemExit, match="exists"):
        mnist_validation_split.main([str(source), str(out)])
    with pytest.raises(ValueError, match="--validation 30"):
        mnist_validation_split.main(
            [str(source), str(tmp_path / "b.npz"), "--validation", "30"]
        )


def test_choose_weights_tiny(mnist_path, tmp_path):
    data, _ = _tiny_mnist(mnist_path, tmp_path)
    model, weights = _capsnet_weights(tmp_path / "epochs", seeds=(0, 1, 2))
    average = tmp_path / "average.weights.h5"
    flags = [str(tmp_path / "epochs"), "--data", str(data), "--validation", "10"]
    result = choose_weights.main(
        [*flags, "--average-last", "2", "--save-average", str(average), "--out", "-"]
    )
    assert [c["name"] for c in result["epochs"]] == ["epoch 1", "epoch 2", "epoch 3"]
    assert result["average"]["name"] == "average of epochs 2-3"
    assert (result["validation_digits"], result["test_digits"]) == (10, 30)
    model.load_weights(average)
    for saved, second, third in zip(model.get_weights(), *weights[1:], strict=True):
        np.testing.assert_allclose(saved, (second + third) / 2, rtol=1e-5, atol=1e-7)
    scored = [*result["epochs"], result["average"]]
    best = max(c["validation_accuracy"] for c in scored)
    assert result["chosen"]["validation_accuracy"] == best
    assert result["chosen"] in scored
    with pytest.raises(ValueError, match="--average-last 4"):
        choose_weights.main([*flags, "--average-last", "4"])


def test_export_pretrained_ships_the_chosen_weights(mnist_path, tmp_path, monkeypatch):
    from capsules_keras.data import get_dataset

    data, _ = _tiny_mnist(mnist_path, tmp_path)
    model, weights = _capsnet_weights(tmp_path / "epochs", seeds=(0, 1))
    run = tmp_path / "run"
    run.mkdir()
    model.save(run / "model.keras")  # the run's last weights: epoch 2
    metrics = {"dataset": "mnist", "training_set": "20 (all)", "backend": "torch"}
    metrics |= {"keras_version": "3", "preset": "paper", "epochs": 2}
    metrics |= {"batch_size": 10, "learning_rate": 1e-3, "lr_decay": 0.9}
    metrics |= {"augment": True, "seed": 0, "dtype_policy": "mixed_bfloat16"}
    metrics |= {"train_seconds": 1.0, "images_per_second": 40.0}
    (run / "metrics.json").write_text(json.dumps(metrics | {"test_accuracy": 0.1}))
    (run / "history.csv").write_text("epoch,val_accuracy\n0,0.1\n1,0.2\n")
    choice = {"validation_digits": 10, "epochs": [], "average": {}}
    choice["epochs"] = [
        {"name": f"epoch {k}", "validation_accuracy": 0.1 * k, "test_accuracy": 0.2}
        for k in (1, 2)
    ]
    choice["chosen"] = choice["epochs"][0] | {
        "weights": str(tmp_path / "epochs" / "epoch_1.weights.h5")
    }
    (tmp_path / "choice.json").write_text(json.dumps(choice))
    monkeypatch.setattr(export_pretrained, "WEIGHTS", tmp_path / "weights")
    monkeypatch.setattr(
        export_pretrained,
        "pretrained_path",
        lambda name: tmp_path / "weights" / f"{name}.keras",
    )
    args = [str(run), "--name", "capsnet_mnist", "--data", str(data), "--commit", "c"]
    args += ["--command", "train", "--machine", "here"]
    export_pretrained.main([*args, "--choice", str(tmp_path / "choice.json")])

    shipped = keras.saving.load_model(tmp_path / "weights" / "capsnet_mnist.keras")
    for got, want in zip(
        shipped.get_weights(), weights[0], strict=True
    ):  # epoch 1's, not 2's
        np.testing.assert_array_equal(got, want)
    card = json.loads((tmp_path / "weights" / "capsnet_mnist.json").read_text())
    _, (x_test, y_test), _ = get_dataset("mnist").load(path=data)
    predicted = shipped.predict(x_test, verbose=0).argmax(-1)
    assert card["test_errors"] == np.flatnonzero(predicted != y_test).tolist()
    assert card["shipped"] == "epoch 1, chosen on the validation digits"
    assert card["data"] == (
        "20 training images (the last 10 of 30 held out for validation), 30 test"
    )
    assert card["per_epoch_validation_accuracy"] == [0.1, 0.2]
    assert card["per_epoch_test_accuracy"] == [0.2, 0.2]
    assert "run_test_accuracy" not in card  # the run scored validation digits
    with pytest.raises(SystemExit, match="exists"):
        export_pretrained.main(args)


def test_first_steps_tiny(tmp_path):
    folder = tmp_path / "shapes"
    image_folders.write_shapes(str(folder), per_class=4)
    rows = first_steps.main([str(folder), "--steps", "2", "--batch-size", "4"])
    assert [step for step, _, _ in rows] == [0, 1, 2]
    for _, primary, classes in rows:
        assert 0 < primary <= 1 and 0 < classes <= 1


def test_image_folders_writes_shapes_the_trainer_reads(tmp_path):
    from capsules_keras.data import load_image_folder

    folder = tmp_path / "shapes"
    flags = ["shapes", str(folder), "--per-class", "4", "--size", "28"]
    assert image_folders.main(flags) == 12
    assert {path.suffix for path in folder.rglob("*.*")} <= {".png", ".jpg"}
    (x_train, y_train), (x_test, y_test), _ = load_image_folder(folder)
    assert x_train.shape[1:] == (28, 28, 3) and x_train.dtype == np.uint8
    assert sorted(set(y_train.tolist()) | set(y_test.tolist())) == [0, 1, 2]
    assert len(y_train) + len(y_test) == 12
    with pytest.raises(SystemExit, match="exists"):
        image_folders.main(flags)


def test_image_folders_writes_coloured_garments(tmp_path, fashion_path):
    from capsules_keras.data import load_image_folder

    folder = tmp_path / "fashion"
    flags = ["fashion", str(folder), "--source", fashion_path, "--per-class", "2"]
    assert image_folders.main(flags) == 20
    (x_train, y_train), (x_test, _), origin = load_image_folder(folder)
    assert x_train.shape[1:] == (40, 40, 3) and len(x_train) + len(x_test) == 20
    assert "(10 classes, 20 images" in origin and len(set(y_train.tolist())) == 10
    with pytest.raises(SystemExit, match="--source"):
        image_folders.main(["fashion", str(tmp_path / "none")])


def test_image_folders_writes_notebook_08s_photo_tiles(tmp_path):
    from PIL import Image

    from capsules_keras.data import load_image_folder
    from capsules_keras.data.photo_tiles import PHOTOS, photo

    folder = tmp_path / "photos"
    flags = ["photos", str(folder), "--per-class", "2", "--size", "32"]
    assert image_folders.main(flags) == 14
    (x_train, y_train), (x_test, y_test), _ = load_image_folder(folder)
    assert x_train.shape[1:] == (32, 32, 3) and len(x_train) + len(x_test) == 14
    # A tile is the photo's pixels at the row and column its name gives.
    tile = next((folder / "cat").glob("*.png"))
    row, column = (int(part[1:]) for part in tile.stem.split("-")[1:])
    expected = photo("cat")[row * 32 : (row + 1) * 32, column * 32 : (column + 1) * 32]
    np.testing.assert_array_equal(np.asarray(Image.open(tile)), expected)
    assert sorted(PHOTOS) == sorted(path.name for path in folder.iterdir())
    with pytest.raises(SystemExit, match="exists"):
        image_folders.main(flags)
    with pytest.raises(ValueError, match="Received: 'dog'"):
        photo("dog")


def test_folder_comparison_pairs_each_seed_and_keeps_finished_runs(tmp_path):
    # A finished run is read, not run again (no trainer starts here).
    target = folder_comparison.run_folder(str(tmp_path), "/data/shapes", "cnn", 1)
    os.makedirs(os.path.join(target, "run"))
    with open(os.path.join(target, "run", "metrics.json"), "w") as f:
        f.write("{}")
    assert folder_comparison.train("/data/shapes", "cnn", 1, 10, target) == (
        os.path.join(target, "run")
    )
    assert target.endswith(os.path.join("shapes", "cnn", "seed1"))
    # ... nor is one the trainer stopped (its log ends with the error).
    stopped = folder_comparison.run_folder(str(tmp_path), "/data/shapes", "cnn", 2)
    os.makedirs(stopped)
    with open(os.path.join(stopped, "train.log"), "w") as f:
        f.write("Model: baseline CNN\nerror: Training collapsed after epoch 4\n")
    assert folder_comparison.train("/data/shapes", "cnn", 2, 10, stopped) is None
    # Two seeds of which images each model reads right; the second CNN stopped.
    right = {
        "residual": {0: [True] * 30 + [False] * 10, 1: [True] * 40},
        "cnn": {0: [True] * 20 + [False] * 20, 1: None},
    }
    runs = {
        model: {
            seed: {"right": None if r is None else np.array(r)}
            for seed, r in by_seed.items()
        }
        for model, by_seed in right.items()
    }
    pairs, bound = folder_comparison.compare_folder(
        "/data/shapes", ["residual", "cnn"], [0, 1], runs
    )
    assert bound == 0.025  # two seeds, one comparison
    (pair, verdict) = pairs
    assert (pair["seed"], pair["a_only"], pair["b_only"]) == (0, 10, 0)
    assert pair["difference"] == pytest.approx(0.25)
    # The verdict says over how many seeds it was reached.
    assert pair["p_value"] < bound and verdict["verdict"] == "supported"
    assert verdict["seeds"] == 1
    report = {
        "folders": ["/data/shapes"],
        "models": ["residual", "cnn"],
        "runs": [
            {
                "folder": "/data/shapes",
                "model": model,
                "seed": seed,
                "accuracy": None if r["right"] is None else float(r["right"].mean()),
                "n_test": 40,
            }
            for model, by_seed in runs.items()
            for seed, r in by_seed.items()
        ],
        "pairs": pairs,
        "bounds": {"/data/shapes": bound},
    }
    text = folder_comparison.table(report)
    assert "| residual | 2 | 87.5% | 75.0%, 100.0% |" in text
    assert "| cnn | 2 | 50.0% | 50.0%, stopped |" in text
    assert "| residual - cnn | 0 | +25.0 |" in text
    assert "verdict over 1 paired seed(s): **supported**" in text


def test_reference_accuracy_tiny(mnist_path, tmp_path):
    out = tmp_path / "labml.json"
    flags = ["--data", mnist_path, "--max-train-samples", "40", "--batch-size", "20"]
    flags += ["--max-test-samples", "20", "--out", str(out)]
    result = reference_accuracy.main(flags)
    assert result["n_train"] == 40 and result["n_test"] == 20
    (epoch,) = result["history"]
    assert 0 <= epoch["test_accuracy"] <= 1 and epoch["images_per_second"] > 0
    with open(out) as f:
        assert json.load(f)["history"] == result["history"]
    with pytest.raises(SystemExit, match="exists"):
        reference_accuracy.main(flags)  # an old result is never overwritten


def test_slowest_tests_summary_per_suite():
    log = "\n".join(
        [
            "=== tests: KERAS_BACKEND=jax (units) ===",
            "2.50s call     tests/test_a.py::test_one",
            "0.50s setup    tests/test_a.py::test_one",
            "1.00s call     notebooks/01.ipynb::Cell 3",
            "==== 3 passed in 9.00s ====",
            "=== tests: KERAS_BACKEND=torch ===",  # a log from before the parts
            "==== 1 failed, 2 passed in 4.00s ====",
        ]
    )
    found = slowest_tests.suites(log)
    assert list(found) == ["jax (units)", "torch"]
    closing, items = found["jax (units)"]
    assert closing == "3 passed in 9.00s"
    assert items == {
        "tests/test_a.py::test_one": 3.0,
        "notebooks/01.ipynb::Cell 3": 1.0,
    }
    assert found["torch"] == ("1 failed, 2 passed in 4.00s", {})
    text = slowest_tests.summary(log, top=1)
    assert (
        "| `tests/test_a.py` | 3.0 |" in text
        and "| `notebooks/01.ipynb` | 1.0 |" in text
    )
    assert "slowest 1" in text and "Cell 3" not in text.split("slowest 1")[1]


def test_relu_bn_order_tiny(mnist_path, tmp_path):
    sys.path.insert(0, os.path.join(REPO_ROOT, "benchmarks", "efficient"))
    import relu_bn_order

    out = tmp_path / "order.json"
    flags = ["--data", mnist_path, "--max-train-samples", "32"]
    flags += ["--max-test-samples", "20", "--out", str(out)]
    result = relu_bn_order.main(flags)
    ours, authors = result["results"]
    assert ours["layers"][:3] == ["conv1", "bn1", "relu1"]
    assert authors["layers"][:3] == ["conv1", "relu1", "bn1"]
    assert len(authors["layers"]) == len(ours["layers"]) == 12
    for row in (ours, authors):
        low, high = row["interval_95"]
        assert low <= row["test_accuracy"] <= high
    test = result["mcnemar"]
    assert test["ours_only"] + test["authors_only"] <= result["n_test"] == 20
    with open(out) as f:
        assert json.load(f)["results"] == result["results"]
    with pytest.raises(SystemExit, match="exists"):
        relu_bn_order.main(flags)  # an old result is never overwritten
    # One seed, one start: the two orders begin from the same weights.
    starts = []
    for build in relu_bn_order.ORDERS.values():
        keras.utils.set_random_seed(0)
        model = build()
        model(np.zeros((1, 28, 28, 1), "float32"))
        starts.append(model.get_weights())
    for first, second in zip(*starts, strict=True):
        np.testing.assert_array_equal(first, second)


def test_gpu_check_dry_run(gpu_dry_run):
    result, out = gpu_dry_run
    backend = keras.backend.backend()
    absent = "jax" if backend == "tensorflow" else "tensorflow"
    skipped = [
        line
        for line in result.stdout.splitlines()
        if line.startswith("gpu_check: skipping")
    ]
    assert skipped == [
        f"gpu_check: skipping {absent}: {sys.executable} cannot import {absent}"
    ]
    with open(out / "summary.json") as f:
        summary = json.load(f)
    assert summary["skipped"] == skipped and summary["failed"] == []
    (bench,) = summary["benchmarks"]
    assert bench["backend"] == backend and bench["routing_batch"] == 2
    assert bench["routing_ratio_to_labml"] > 0 and bench["train_ratio_to_labml"] > 0
    (run,) = summary["train"]
    assert (run["backend"], run["dtype_policy"]) == (backend, "mixed_bfloat16")
    assert (run["epochs"], run["n_train"], run["n_test"]) == (2, 32, 16)
    assert 0 <= run["test_accuracy"] <= 1 and run["last_epoch_images_per_second"] > 0
    assert "| ours / labml |" in (out / f"bench-{backend}" / "README.md").read_text()
    assert f"| {backend} | " in (out / "summary.md").read_text()


def test_gpu_carry_pins_the_versions_tested_here():
    script = os.path.join(BENCHMARKS, "gpu_carry.sh")
    env = {**os.environ, "GPU_CARRY_PYTHON": sys.executable}
    result = subprocess.run(
        ["bash", script, "--print"], env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    lines = dict(line.split(": ", 1) for line in result.stdout.splitlines())
    pins = dict(pin.split("==") for pin in lines["carry"].split())
    # keras, the two of its requirements the GPU machine lacks, and labml's
    # reference: the versions this suite runs, for the machine's CPython 3.12.
    assert pins == {
        name: version(name) for name in ("keras", "namex", "optree", "labml-nn")
    }
    assert "--python-version 3.12" in lines["fetch"]
    assert "--no-deps" in lines["fetch"] and "manylinux" in lines["fetch"]
    assert lines["data"].endswith("-> .gpu-check/mnist-full.npz")
