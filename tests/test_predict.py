"""The prediction command: image files in, the classes `model.predict` gives out."""

import dataclasses
import json
import os
import shutil

import keras
import numpy as np
import pytest
from PIL import Image

from capsules_keras import DigitCaps, Length, PrimaryCaps, predict
from capsules_keras.data.image_folder import read_images
from capsules_keras.models import EfficientCapsNet
from capsules_keras.models.pretrained import pretrained_path
from capsules_keras.training import TrainConfig, start_run

PRESET = "efficient_capsnet_mnist"
DIGITS = 10


@pytest.fixture(scope="module")
def digits(mnist_path, tmp_path_factory):
    """The first real MNIST test digits as PNG files: `(paths, images, labels)`."""
    with np.load(mnist_path) as data:
        images, labels = data["x_test"][:DIGITS], data["y_test"][:DIGITS]
    folder = tmp_path_factory.mktemp("digits")
    paths = []
    for index, image in enumerate(images):
        path = str(folder / f"digit{index}.png")
        Image.fromarray(image).save(path)
        paths.append(path)
    return paths, images, labels


@pytest.fixture(scope="module")
def preset():
    """The pretrained Efficient-CapsNet: a trained model, loaded once."""
    return EfficientCapsNet.from_preset(PRESET)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A run folder as the trainer leaves it (tests/test_train.py trains
    one): its `config.json` from `start_run`, `model.keras` (here the
    pretrained model's) and `metrics.json`, which starts with the settings."""
    config = TrainConfig(model="efficient")
    folder = start_run(str(tmp_path_factory.mktemp("runs")), config)
    shutil.copy(pretrained_path(PRESET), os.path.join(folder, "model.keras"))
    with open(os.path.join(folder, "metrics.json"), "w") as f:
        json.dump({"test_accuracy": 0.9956, **dataclasses.asdict(config)}, f)
    return folder


def scaled(images):
    """uint8 digits `(n, 28, 28)` as the trainer feeds them: [0, 1], one channel."""
    return images[..., None].astype("float32") / 255.0


def run_json(argv, capsys):
    capsys.readouterr()
    assert predict.main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_cli_predicts_what_the_model_predicts(run_dir, preset, digits, capsys):
    paths, images, labels = digits
    expected = preset.predict(scaled(images), verbose=0)
    capsys.readouterr()
    assert predict.main([run_dir, *paths]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    # One line per image: its path, the class (an MNIST run: the digit, from
    # the run folder's dataset) and the class capsule's length.
    assert len(lines) == len(paths)
    for line, path, row in zip(lines, paths, expected, strict=True):
        assert line == f"{path}: {row.argmax()} (capsule length {row.max():.3f})"
    # The card's 0.44% errors are none of the first test digits.
    assert expected.argmax(-1).tolist() == labels.tolist()


def test_json_top_k_and_redrawings(preset, digits, tmp_path, capsys):
    paths, images, labels = digits
    expected = preset.predict(scaled(images), verbose=0)
    folder = tmp_path / "redrawn"
    argv = [PRESET, *paths, "--top-k", "3", "--redraw", str(folder)]
    document = run_json(argv, capsys)
    assert document["score_kind"] == "capsule length"
    assert document["class_names"] == [str(c) for c in range(10)]  # the card's
    records = document["predictions"]
    assert [r["path"] for r in records] == paths
    assert [r["class_index"] for r in records] == expected.argmax(-1).tolist()
    assert [r["class"] for r in records] == [str(c) for c in labels]
    np.testing.assert_allclose(
        [r["score"] for r in records], expected.max(-1), rtol=1e-5, atol=1e-6
    )
    for record, row in zip(records, expected, strict=True):
        assert record["notes"] == []  # 28x28 grey: used as they are
        top = record["top_k"]
        assert [t["class_index"] for t in top] == np.argsort(-row)[:3].tolist()
        np.testing.assert_allclose(
            [t["score"] for t in top], np.sort(row)[::-1][:3], rtol=1e-5, atol=1e-6
        )
        assert predict.describe(record).startswith(
            f"{record['path']}: {top[0]['class']} (capsule length "
        )
    # The decoder redraws each digit from its capsule: each redrawing is
    # closer to its own digit than to any other of them.
    redrawn = []
    for record in records:
        with Image.open(record["redrawn"]) as image:
            assert image.size == (28, 28) and image.mode == "L"
            redrawn.append(np.asarray(image, dtype="float64").ravel())
    flat = images.reshape(len(images), -1).astype("float64")
    agreement = np.corrcoef(np.concatenate([redrawn, flat]))[: len(flat), len(flat) :]
    assert agreement.argmax(-1).tolist() == list(range(len(flat)))
    assert agreement.diagonal().min() > 0.5


def test_class_names_come_from_the_run_folder(run_dir, tmp_path):
    copy = shutil.copytree(run_dir, tmp_path / "run")
    with open(copy / "metrics.json") as f:
        metrics = json.load(f)
    with open(copy / "config.json") as f:
        config = json.load(f)

    def write(name, content):
        with open(copy / name, "w") as f:
            json.dump(content, f)

    # An MNIST run: the dataset's names, the digits.
    assert predict.run_class_names(copy) == tuple(str(c) for c in range(10))
    # metrics.json's names come first.
    names = ["zero", "one", "two", "three", "four"] + [f"d{c}" for c in range(5, 10)]
    write("metrics.json", {**metrics, "class_names": names})
    assert predict.run_class_names(copy) == tuple(names)
    # A model.keras inside a run folder takes the run's names too.
    assert predict.load_trained_model(copy / "model.keras").class_names == tuple(names)
    # An image folder's run records its classes in config.json.
    write("metrics.json", {**metrics, "class_names": None})
    write("config.json", {**config, "dataset": "image_folder", "class_names": ["a"]})
    assert predict.run_class_names(copy) == ("a",)
    write("config.json", {**config, "dataset": "fashion_mnist"})
    assert predict.run_class_names(copy)[:2] == ("T-shirt/top", "Trouser")
    # Nothing names the classes: None (the CLI prints the indices).
    write("config.json", {**config, "dataset": "a dataset of a later version"})
    assert predict.run_class_names(copy) is None
    os.remove(copy / "config.json")
    os.remove(copy / "metrics.json")
    assert predict.run_class_names(copy) is None


def test_images_are_read_as_the_trainer_reads_them(preset, digits, tmp_path):
    paths, images, labels = digits
    # A colour JPEG twice the size, a grey PNG with an alpha channel, and a
    # 16-bit grey PNG.
    colour = np.repeat(images[4][..., None], 3, axis=-1)
    big = Image.fromarray(colour).resize((56, 56), Image.Resampling.BILINEAR)
    big.save(tmp_path / "big.jpg", quality=95)
    Image.fromarray(images[5]).convert("LA").save(tmp_path / "alpha.png")
    Image.fromarray(images[6].astype("uint16") * 257).save(tmp_path / "wide.png")
    files = [str(tmp_path / name) for name in ("big.jpg", "alpha.png", "wide.png")]
    read, notes = predict.load_images(files, (28, 28, 1))
    assert read.dtype == np.uint8 and read.shape == (3, 28, 28, 1)
    assert notes == [
        ["resized from 56x56 to 28x28", "converted RGB to grayscale"],
        ["converted LA to grayscale"],
        ["scaled 16-bit grey to 8 bits"],
    ]
    # The pixels the trainer would train on, had the files been in an image
    # folder: a model sees new images as it saw its training images.
    np.testing.assert_array_equal(read, read_images(files, (28, 28), "grayscale"))
    np.testing.assert_array_equal(read[1:, ..., 0], images[5:7])
    # For a colour model, a grey image becomes three equal channels (a 16-bit
    # one scaled to 8 bits first, not clipped at 255).
    rgb, rgb_notes = predict.load_images([paths[0], files[2]], (28, 28, 3))
    assert rgb_notes == [
        ["converted grayscale to RGB"],
        ["scaled 16-bit grey to 8 bits", "converted grayscale to RGB"],
    ]
    np.testing.assert_array_equal(rgb[0], np.repeat(images[0][..., None], 3, -1))
    np.testing.assert_array_equal(rgb[1], np.repeat(images[6][..., None], 3, -1))
    names = [f"class {c}" for c in range(10)]
    records = predict.predict_images(preset, files, names)
    assert [r["class_index"] for r in records] == labels[4:7].tolist()
    assert [r["class"] for r in records] == [names[c] for c in labels[4:7]]
    assert [r["notes"] for r in records] == notes


def test_functional_models_and_their_scores(digits, tmp_path):
    paths, images, _ = digits
    inputs = keras.Input((28, 28, 1))
    x = keras.layers.Conv2D(16, 9, activation="relu")(inputs)
    x = PrimaryCaps(capsule_types=4, capsule_dim=8, kernel_size=9, strides=2)(x)
    x = DigitCaps(num_capsules=10, capsule_dim=16, routing_iterations=3)(x)
    capsules = keras.Model(inputs, Length()(x))
    flat = keras.layers.Flatten()(inputs)
    softmax = keras.Model(inputs, keras.layers.Dense(10, "softmax")(flat))
    for model, kind in ((capsules, "capsule length"), (softmax, "probability")):
        path = tmp_path / f"{kind.replace(' ', '_')}.keras"
        model.save(path)
        trained = predict.load_trained_model(path)
        assert trained.class_names is None  # nothing names them: the indices
        assert predict.score_kind(trained.model) == kind
        records = predict.predict_images(trained.model, paths)
        expected = trained.model.predict(scaled(images), verbose=0)
        assert [r["class"] for r in records] == [str(c) for c in expected.argmax(-1)]
        np.testing.assert_allclose(
            [r["score"] for r in records], expected.max(-1), rtol=1e-5, atol=1e-6
        )
    # Only a capsule classifier has a decoder to redraw with.
    with pytest.raises(ValueError, match="decoder"):
        predict.redraw_images(capsules, paths[:1])


def test_bad_input_fails_clearly(run_dir, preset, digits, tmp_path, capsys):
    paths, _, _ = digits
    not_an_image = tmp_path / "notes.png"
    not_an_image.write_text("not an image")
    empty = tmp_path / "empty"
    empty.mkdir()
    cases = [
        ([run_dir, str(tmp_path / "missing.png")], "No image file at"),
        ([run_dir, paths[0], str(not_an_image)], "1 image file(s) could not be read"),
        ([str(empty), paths[0]], "holds no model.keras"),
        (["no_such_model", paths[0]], "No run folder, .keras file or pretrained"),
        ([str(not_an_image), paths[0]], "a file that is not .keras"),
        ([run_dir, paths[0], "--top-k", "11"], "`top_k` must be between 1 and"),
    ]
    capsys.readouterr()
    for argv, message in cases:
        with pytest.raises(SystemExit) as error:
            predict.main(argv)
        # A message (on stderr, exit status 1), not a traceback.
        assert isinstance(error.value.code, str)
        assert error.value.code.startswith("error: ")
        assert message in error.value.code
    assert capsys.readouterr().out == ""
    # The library raises and prints nothing.
    with pytest.raises(ValueError, match="notes.png"):
        predict.predict_images(preset, [paths[0], str(not_an_image)])
    with pytest.raises(ValueError, match="must name the model's 10 classes"):
        predict.predict_images(preset, paths[:1], class_names=["a", "b"])
    with pytest.raises(ValueError, match="1 .grayscale. or 3 .RGB. channels"):
        predict.load_images(paths[:1], (28, 28, 4))
    assert capsys.readouterr() == ("", "")
