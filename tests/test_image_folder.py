"""Training on a folder of one's own images: the loader, the trainer, resume.

The folders are real MNIST digits written as image files: grey PNGs at
28 px, and coloured ones (RGB, PNG and JPEG) at two sizes.
"""

import dataclasses
import json
import os
import shutil
import subprocess
import sys

import keras
import numpy as np
import pytest
from conftest import REPO_ROOT
from PIL import Image

from capsules_keras import train
from capsules_keras.data import (
    ArrayBatches,
    ImageFolder,
    get_dataset,
    load_image_folder,
)
from capsules_keras.data.sources import IDX_FILES
from capsules_keras.training import TrainConfig, trainer_settings
from capsules_keras.training.fit import load_data, run_dataset
from capsules_keras.training.runs import resumed_config

#: Grey digits per class of the grey folder, by class folder: uneven, so
#: that a split that is not per class shows.
GREY_COUNTS = {"zero": 10, "one": 10, "two": 5}
#: The trainer's flags of a tiny run of a narrow CapsNet.
TINY = (
    "--model",
    "capsnet",
    "--epochs",
    "1",
    "--batch-size",
    "8",
    "--conv-filters",
    "8",
    "--primary-capsules",
    "2",
    "--verbose",
    "0",
)


@pytest.fixture(scope="module")
def digits(mnist_path):
    """MNIST training digits `(n, 28, 28)` uint8 and their labels."""
    with np.load(mnist_path) as data:
        return data["x_train"], data["y_train"]


def coloured(digit):
    """A grey digit as an RGB image: red strokes on a blue ground."""
    return np.stack([digit, digit // 2, 255 - digit], axis=-1)


@pytest.fixture(scope="module")
def grey_folder(tmp_path_factory, digits):
    """Three classes of 28 px grey PNGs (10, 10 and 5), a text file, a hidden file.

    Returns the folder and each class's digits as stored, by class name.
    """
    x, y = digits
    root = tmp_path_factory.mktemp("grey") / "digits"
    stored = {}
    for value, (name, count) in enumerate(GREY_COUNTS.items()):
        (root / name).mkdir(parents=True)
        chosen = x[np.flatnonzero(y == value)[:count]]
        for k, digit in enumerate(chosen):
            Image.fromarray(digit).save(root / name / f"{k:02d}.png")
        stored[name] = chosen
    (root / "zero" / "notes.txt").write_text("not an image")
    (root / "one" / ".DS_Store").write_bytes(b"\0\1")
    return root, stored


@pytest.fixture(scope="module")
def colour_folder(tmp_path_factory, digits):
    """Two classes of coloured digits: "sevens" 28 px PNGs, "threes" 40 px JPEGs."""
    x, y = digits
    root = tmp_path_factory.mktemp("colour") / "colour"
    for name, value, size, ext in (("sevens", 7, 28, "png"), ("threes", 3, 40, "jpg")):
        (root / name).mkdir(parents=True)
        for k, index in enumerate(np.flatnonzero(y == value)[:10]):
            image = Image.fromarray(coloured(x[index])).resize((size, size))
            image.save(root / name / f"{k:02d}.{ext}")
    return root


def copy_folder(source, tmp_path):
    target = tmp_path / source.name
    shutil.copytree(source, target)
    return target


def test_loader_reads_classes_images_and_a_stratified_seeded_split(grey_folder):
    root, stored = grey_folder
    folder = ImageFolder.from_path(root)
    assert folder.class_names == ("one", "two", "zero")  # sorted, as Keras does
    assert folder.image_shape == (28, 28, 1) and folder.color_mode == "grayscale"
    assert len(folder.files) == 25 and folder.skipped == 1  # notes.txt
    (x_train, y_train), (x_test, y_test), origin = folder.load()
    assert x_train.dtype == np.uint8 and x_train.shape == (20, 28, 28, 1)
    assert x_test.shape == (5, 28, 28, 1) and y_test.dtype == np.int32
    # 20% of each class held out: 2 of 10, 1 of 5.
    assert np.bincount(y_test).tolist() == [2, 1, 2]
    assert np.bincount(y_train).tolist() == [8, 4, 8]
    # Each image is a stored digit of its own class, each digit once.
    for name, digits in stored.items():
        label = folder.class_names.index(name)
        loaded = np.concatenate([x_train[y_train == label], x_test[y_test == label]])
        assert sorted(d.tobytes() for d in loaded[..., 0]) == sorted(
            d.tobytes() for d in digits
        )
    assert "3 classes, 25 images, 1 other files skipped" in origin
    assert "28x28 grayscale, as stored" in origin
    assert "20% of each class held out, seed 0" in origin
    # Seeded: the same seed holds out the same images, another seed others.
    again = load_image_folder(root)
    np.testing.assert_array_equal(again[1][0], x_test)
    other = load_image_folder(root, seed=1, validation_split=0.4)
    assert np.bincount(other[1][1]).tolist() == [4, 2, 4]
    assert {d.tobytes() for d in other[1][0]} != {d.tobytes() for d in x_test}
    # A chosen subset of classes, in the order given.
    two = ImageFolder.from_path(root, class_names=["zero", "two"])
    assert two.class_names == ("zero", "two") and len(two.files) == 15
    # The registry's template reads any folder.
    assert get_dataset("image_folder").load(path=root)[2] == origin


def test_colour_images_of_two_sizes_are_resized(colour_folder):
    with pytest.raises(ValueError, match="differ in size") as error:
        ImageFolder.from_path(colour_folder)
    assert "is 28x28" in str(error.value) and "is 40x40" in str(error.value)
    folder = ImageFolder.from_path(colour_folder, image_size="64x48")
    assert folder.color_mode == "rgb" and folder.image_shape == (64, 48, 3)
    (x_train, y_train), (x_test, y_test), origin = folder.load()
    assert x_train.shape == (16, 64, 48, 3) and x_test.shape == (4, 64, 48, 3)
    assert "64x48 rgb, resized" in origin
    # A 28 px PNG stretched to 64 rows and 48 columns, bilinear, as Pillow does.
    first = Image.open(colour_folder / "sevens" / "00.png")
    expected = np.asarray(first.resize((48, 64), Image.Resampling.BILINEAR))
    sevens = np.concatenate([x_train[y_train == 0], x_test[y_test == 0]])
    assert any(np.array_equal(image, expected) for image in sevens)
    # The colour is kept: blue ground, red strokes.
    assert sevens[..., 2].mean() > 2 * sevens[..., 0].mean()
    grey = load_image_folder(colour_folder, image_size=32, color_mode="grayscale")
    assert grey[0][0].shape == (16, 32, 32, 1)


def test_grey_images_read_as_rgb_have_three_equal_channels(grey_folder):
    root, _ = grey_folder
    (x_train, _), _, _ = load_image_folder(root, color_mode="rgb")
    assert x_train.shape == (20, 28, 28, 3)
    np.testing.assert_array_equal(x_train[..., 0], x_train[..., 2])
    assert x_train.max() == 255


def test_training_batches_keep_the_images_uint8(grey_folder):
    root, _ = grey_folder
    folder = ImageFolder.from_path(root)
    (x_train, y_train), _, _ = folder.load()
    batches = folder.training_batches(x_train, y_train, batch_size=8, seed=0)
    assert isinstance(batches, ArrayBatches) and len(batches) == 3
    images, labels = batches[0]
    assert images.dtype == np.uint8 and images.shape == (8, 28, 28, 1)
    shifted = folder.training_batches(x_train, y_train, 8, augment=True)
    assert shifted[0][0].dtype == np.uint8


def write_bad_folders(root, grey_root):
    """Folders that must be refused, each a copy of the grey one made bad."""
    good = grey_root / "zero" / "00.png"
    folders = {}

    def make(name, classes=("a", "b")):
        path = root / name
        for cls in classes:
            (path / cls).mkdir(parents=True)
            for k in range(3):
                shutil.copy(good, path / cls / f"{k}.png")
        folders[name] = path
        return path

    make("one-class", classes=("a",))
    (make("empty-class") / "c").mkdir()
    (make("lonely", classes=("a",)) / "b").mkdir()
    shutil.copy(good, root / "lonely" / "b" / "0.png")
    (make("not-an-image") / "a" / "fake.png").write_text("hello")
    data = good.read_bytes()
    (make("truncated") / "b" / "cut.png").write_bytes(data[: len(data) // 2])
    small = make("small")
    for path in small.rglob("*.png"):
        Image.open(path).resize((20, 20)).save(path)
    (root / "file.png").write_bytes(data)
    return folders


def test_bad_input_gets_a_value_error_naming_what_was_received(grey_folder, tmp_path):
    folders = write_bad_folders(tmp_path, grey_folder[0])
    cases = [
        (tmp_path / "absent", "Received: path=.*absent.*no such directory"),
        (tmp_path / "file.png", "Received: path=.*file.png.*not a directory"),
        (folders["one-class"], r"at least 2 classes.*class folders \['a'\]"),
        (folders["empty-class"], r"holding none: \['c'\]"),
        (folders["lonely"], "at least 2 images.*1 image.* of class 'b'"),
        (folders["not-an-image"], "could not be read.*fake.png"),
        (folders["small"], "smaller than 28 px.*is 20x20"),
    ]
    for path, match in cases:
        with pytest.raises(ValueError, match=match):
            ImageFolder.from_path(path)
    # A file whose header reads but whose pixels do not fails in `load`.
    with pytest.raises(ValueError, match=r"1 image file\(s\).*cut.png"):
        load_image_folder(folders["truncated"])
    # Resized, small images are fine.
    (x_train, _), _, _ = load_image_folder(folders["small"], image_size=28)
    assert x_train.shape == (4, 28, 28, 1)
    grey = grey_folder[0]
    for kwargs, match in [
        ({"image_size": 20}, "at least 28 px.*Received: image_size=20"),
        ({"image_size": "64x"}, "Received: image_size='64x'"),
        ({"color_mode": "rgba"}, "Received: color_mode='rgba'"),
        ({"validation_split": 1.0}, "Received: validation_split=1.0"),
        ({"class_names": ["zero", "ten"]}, r"missing \['ten'\]"),
    ]:
        with pytest.raises(ValueError, match=match):
            ImageFolder.from_path(grey, **kwargs)


def test_without_pillow_the_error_says_what_to_install(grey_folder, monkeypatch):
    monkeypatch.setitem(sys.modules, "PIL", None)
    with pytest.raises(ImportError, match="pip install pillow"):
        ImageFolder.from_path(grey_folder[0])


def test_the_trainer_tells_an_image_folder_from_an_idx_folder(grey_folder, tmp_path):
    root, _ = grey_folder
    config = trainer_settings(data=str(root))
    assert config.dataset == "image_folder"
    # A folder's default model and schedule: Efficient-CapsNet's, 10 epochs.
    assert (config.model, config.epochs, config.batch_size) == ("efficient", 10, 16)
    assert trainer_settings(data=str(root), model="capsnet").epochs == 10
    assert trainer_settings(data=str(root), epochs=3).epochs == 3
    assert config.data == os.path.abspath(root) and config.image_size == "28x28"
    assert config.class_names == ("one", "two", "zero")
    assert config.color_mode == "grayscale" and config.validation_split == 0.2
    saved = json.loads(json.dumps(dataclasses.asdict(config)))  # config.json
    assert TrainConfig(**saved) == config
    flags = ["--data", str(root), "--class-names", "zero", "two", "--image-size", "32"]
    chosen = train.config_of(train.build_parser().parse_args(flags))
    assert chosen.class_names == ("zero", "two") and chosen.image_size == "32x32"
    with pytest.raises(ValueError, match="reads the folder.*Received: data='auto'"):
        trainer_settings(dataset="image_folder")
    idx = tmp_path / "idx"
    idx.mkdir()
    for name in IDX_FILES.values():
        (idx / name).write_bytes(b"")
    assert trainer_settings(data=str(idx)).dataset == "mnist"
    with pytest.raises(ValueError, match="applies to dataset 'image_folder' only"):
        trainer_settings(data=str(idx), image_size="64")


def test_a_folder_that_fails_late_leaves_no_run_folder(grey_folder, tmp_path):
    bad = copy_folder(grey_folder[0], tmp_path)
    data = (bad / "one" / "00.png").read_bytes()
    (bad / "one" / "00.png").write_bytes(data[: len(data) // 2])
    runs = tmp_path / "runs"
    with pytest.raises(SystemExit, match="could not be read.*00.png"):
        train.main(["--data", str(bad), "--output-dir", str(runs), *TINY])
    assert not runs.exists()


def test_cli_trains_on_a_folder_names_the_classes_and_resumes(
    colour_folder, tmp_path, capsys, monkeypatch
):
    """`python -m capsules_keras.train --data FOLDER --image-size 32`: on jax
    and torch with neither TensorFlow nor matplotlib, as with only their
    extra and Pillow installed; then a resumed run's settings read the
    folder as config.json recorded it."""
    data = copy_folder(colour_folder, tmp_path)
    runs = tmp_path / "runs"
    args = ["--data", str(data), "--image-size", "32", "--output-dir", str(runs)]
    args += TINY
    if keras.backend.backend() == "tensorflow":
        assert train.main(args) == 0
        out = capsys.readouterr().out
    else:
        script = (
            "import sys, runpy\n"
            "sys.modules['tensorflow'] = None  # as if it were not installed\n"
            "sys.modules['matplotlib'] = None\n"
            f"sys.argv = ['train', *{args!r}]\n"
            "runpy.run_module('capsules_keras.train', run_name='__main__')\n"
        )
        result = subprocess.run(
            [sys.executable, "-c", script],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            env={**os.environ, "KERAS_BACKEND": keras.backend.backend()},
        )
        assert result.returncode == 0, result.stderr[-3000:]
        out = result.stdout
    (run_dir,) = runs.iterdir()
    assert "Classes:   2: sevens, threes" in out
    assert "CapsNet on image folder 'colour'" in out
    with open(run_dir / "metrics.json") as f:
        metrics = json.load(f)
    assert metrics["class_names"] == ["sevens", "threes"]
    assert metrics["image_shape"] == [32, 32, 3]
    assert metrics["dataset"] == "image_folder" and metrics["n_test"] == 4
    assert metrics["n_train"] == 16 and 0 <= metrics["test_accuracy"] <= 1
    report = (run_dir / "report.md").read_text()
    assert "| classes | 2: sevens, threes |" in report
    assert "32x32 rgb, resized; 20% of each class held out, seed 0" in report
    if keras.backend.backend() == "tensorflow":  # with matplotlib
        assert (run_dir / "reconstructions.png").exists()
    with open(run_dir / "config.json") as f:
        saved = json.load(f)
    assert saved["class_names"] == ["sevens", "threes"]
    assert saved["image_size"] == "32x32" and saved["color_mode"] == "rgb"
    assert saved["data"] == os.path.abspath(data)

    # A run killed before it finished: its config.json alone. Resumed from
    # elsewhere, after a class folder was added, it reads what it recorded.
    unfinished = tmp_path / "unfinished"
    unfinished.mkdir()
    shutil.copy(run_dir / "config.json", unfinished / "config.json")
    shutil.copytree(data / "sevens", data / "added")
    monkeypatch.chdir(runs)
    config = resumed_config(str(unfinished))
    assert run_dataset(config).class_names == ("sevens", "threes")
    run_data = load_data(config)
    assert run_data.x_train.shape == (16, 32, 32, 3)
    assert np.bincount(run_data.y_test).tolist() == [2, 2]
    recorded = load_image_folder(data, 32, class_names=["sevens", "threes"])
    np.testing.assert_array_equal(run_data.x_test, recorded[1][0])
    # Read afresh, the folder has a third class now.
    fresh = trainer_settings(data=str(data), image_size="32")
    assert fresh.class_names == ("added", "sevens", "threes")


def test_capsules_on_the_residual_encoder_train_on_a_folder(
    colour_folder, tmp_path, capsys
):
    runs = tmp_path / "runs"
    args = ["--data", str(colour_folder), "--image-size", "28", "--model", "residual"]
    args += ["--output-dir", str(runs), "--epochs", "1", "--batch-size", "8"]
    assert train.main([*args, "--primary-capsules", "2", "--verbose", "0"]) == 0
    out = capsys.readouterr().out
    assert "capsules on a residual encoder on image folder 'colour'" in out
    (run_dir,) = runs.iterdir()
    with open(run_dir / "config.json") as f:
        config = json.load(f)
    # Its options are recorded, the others' left unset.
    assert (config["model"], config["primary_capsules"]) == ("residual", 2)
    assert config["routing"] == "dynamic" and config["conv_filters"] is None
    model = keras.saving.load_model(run_dir / "model.keras")
    assert type(model.backbone.encoder).__name__ == "ResidualEncoder"
    with open(run_dir / "metrics.json") as f:
        assert json.load(f)["parameters"] == model.count_params()
