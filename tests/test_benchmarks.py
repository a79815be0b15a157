"""The benchmarks run at a tiny size, so that they cannot rot.

Speed is never asserted here: `make bench` measures it (benchmarks/README.md).
"""

import json
import os
import sys

import keras
import numpy as np
import pytest
from conftest import REPO_ROOT

sys.path.insert(0, os.path.join(REPO_ROOT, "benchmarks"))

import bench_em  # noqa: E402
import bench_routing  # noqa: E402
import bench_routings  # noqa: E402
import bench_train  # noqa: E402
import reference_accuracy  # noqa: E402
import run_all  # noqa: E402
import test_durations  # noqa: E402


@pytest.fixture(scope="module")
def tiny_routing():
    """The routing benchmark at a tiny size, shared by the tests below."""
    return bench_routing.run([2], in_caps=16, repeats=1, warmup=1)


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


@pytest.fixture(scope="module")
def tiny_train(mnist_path):
    """One tiny training run of each implementation, shared by the tests below."""
    return [
        {**bench_train.run(impl, 2, 1, 1, mnist_path), "paired_with": "x"}
        for impl in ("labml", "ours")
    ]


def test_train_benchmark_tiny(tiny_train):
    assert [result["impl"] for result in tiny_train] == ["labml", "ours"]
    for result in tiny_train:
        assert result["parameters"] == 8_215_568
        assert result["images_per_second"] > 0 and result["rss_peak_mb"] > 0
    assert tiny_train[1]["backend"] == keras.backend.backend()


def test_report_from_tiny_results(tmp_path, tiny_routing, tiny_train):
    report = {
        "date": "today",
        "machine": run_all.machine(),
        "routing": tiny_routing,
        "train": tiny_train,
    }
    run_all.write_report(report, str(tmp_path), notes="notes")
    text = (tmp_path / "README.md").read_text()
    assert "| x |" in text and "ours / labml" in text and "notes" in text
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


def test_reference_accuracy_tiny(mnist_path, tmp_path):
    out = tmp_path / "labml.json"
    flags = ["--data", mnist_path, "--max-train-samples", "200"]
    flags += ["--max-test-samples", "100", "--out", str(out)]
    result = reference_accuracy.main(flags)
    assert result["n_train"] == 200 and result["n_test"] == 100
    (epoch,) = result["history"]
    assert 0 <= epoch["test_accuracy"] <= 1 and epoch["images_per_second"] > 0
    with open(out) as f:
        assert json.load(f)["history"] == result["history"]
    with pytest.raises(SystemExit, match="exists"):
        reference_accuracy.main(flags)  # an old result is never overwritten


def test_durations_summary_per_suite():
    log = "\n".join(
        [
            "=== tests: KERAS_BACKEND=jax ===",
            "2.50s call     tests/test_a.py::test_one",
            "0.50s setup    tests/test_a.py::test_one",
            "1.00s call     notebooks/01.ipynb::Cell 3",
            "==== 3 passed in 9.00s ====",
            "=== tests: KERAS_BACKEND=torch ===",
            "==== 1 failed, 2 passed in 4.00s ====",
        ]
    )
    found = test_durations.suites(log)
    assert list(found) == ["jax", "torch"]
    closing, items = found["jax"]
    assert closing == "3 passed in 9.00s"
    assert items == {
        "tests/test_a.py::test_one": 3.0,
        "notebooks/01.ipynb::Cell 3": 1.0,
    }
    assert found["torch"] == ("1 failed, 2 passed in 4.00s", {})
    text = test_durations.summary(log, top=1)
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
    for model_class in relu_bn_order.ORDERS.values():
        keras.utils.set_random_seed(0)
        model = model_class()
        model(np.zeros((1, 28, 28, 1), "float32"))
        starts.append(model.get_weights())
    for first, second in zip(*starts, strict=True):
        np.testing.assert_array_equal(first, second)
