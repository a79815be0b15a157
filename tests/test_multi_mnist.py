"""MultiMNIST pairs: placement, overlay, partners, seeds, splits, batches."""

import numpy as np
import pytest

from capsules_keras.data import get_dataset, load_mnist
from capsules_keras.data.multi_mnist import (
    TEST_PAIRS,
    MultiMNISTBatches,
    bounding_box_overlap,
    fixed_test_set,
    multi_mnist_pairs,
    overlay_pairs,
    place_digits,
)


@pytest.fixture(scope="module")
def mnist(mnist_path):
    return load_mnist("file", mnist_path)


def blocks(num_classes=10, per_class=3, size=28, value=1.0):
    """Full `size`x`size` squares: their placement shows the shift exactly."""
    labels = np.repeat(np.arange(num_classes), per_class).astype("int32")
    images = np.full((len(labels), size, size, 1), value, "float32")
    return images, labels


def ink_box(image):
    """(top, bottom, left, right) of the non-zero pixels of one image."""
    rows = np.flatnonzero(image[..., 0].any(axis=1))
    cols = np.flatnonzero(image[..., 0].any(axis=0))
    return rows[0], rows[-1] + 1, cols[0], cols[-1] + 1


def signature(image):
    """The digit cropped to its ink: equal for a digit and any shift of it."""
    top, bottom, left, right = ink_box(image)
    return image[top:bottom, left:right].tobytes()


def test_place_digits_centres_shifts_and_crops():
    digit = np.zeros((1, 28, 28, 1), "float32")
    digit[0, 10, 12] = 1.0
    centred = place_digits(digit, [[0, 0]])
    assert centred.shape == (1, 36, 36, 1)
    assert centred[0, 14, 16, 0] == 1.0  # (36 - 28) / 2 = 4 px margin
    moved = place_digits(digit, [[-4, 3]])
    assert moved[0, 10, 19, 0] == 1.0 and moved.sum() == 1.0
    full = place_digits(np.ones((1, 28, 28, 1)), [[6, -6]])  # beyond the margin
    assert ink_box(full[0]) == (10, 36, 0, 26)  # cropped, not wrapped


def test_pairs_follow_the_paper(mnist):
    _, (x_test, y_test), _ = mnist
    x, y = multi_mnist_pairs(x_test, y_test, num_pairs=300, seed=1)
    labels, digits = y["labels"], y["digits"]
    assert x.shape == (300, 36, 36, 1) and x.dtype == np.float32
    assert labels.shape == (300, 2) and labels.dtype == np.int32
    assert digits.shape == (300, 2, 36, 36, 1)
    assert x.min() >= 0 and x.max() <= 1
    assert np.all(labels[:, 0] != labels[:, 1])  # different classes
    np.testing.assert_array_equal(x, np.minimum(digits.sum(axis=1), 1.0))
    # Every placed digit is a test digit of its label, moved, never cropped:
    # a 4 px shift on the 36x36 canvas keeps all of a 28x28 digit.
    by_signature = {signature(d): c for d, c in zip(x_test, y_test, strict=True)}
    for k in (0, 1):
        for digit, label in zip(digits[:, k], labels[:, k], strict=True):
            assert by_signature[signature(digit)] == label


@pytest.mark.parametrize("max_shift", [0, 2, 4])
def test_shifts_stay_within_the_bound_and_use_it(max_shift):
    images, labels = blocks()
    _, y = multi_mnist_pairs(images, labels, 400, max_shift=max_shift)
    tops = np.array([[ink_box(d)[0] for d in pair] for pair in y["digits"]])
    lefts = np.array([[ink_box(d)[2] for d in pair] for pair in y["digits"]])
    for offsets in (tops - 4, lefts - 4):  # the centred digit starts at 4
        assert np.abs(offsets).max() == max_shift  # reached, never exceeded


def test_the_same_seed_gives_the_same_pairs(mnist):
    _, (x_test, y_test), _ = mnist
    first = multi_mnist_pairs(x_test, y_test, 50, seed=3)
    again = multi_mnist_pairs(x_test, y_test, 50, seed=3)
    other = multi_mnist_pairs(x_test, y_test, 50, seed=4)
    np.testing.assert_array_equal(first[0], again[0])
    np.testing.assert_array_equal(first[1]["labels"], again[1]["labels"])
    assert not np.array_equal(first[0], other[0])
    fixed = fixed_test_set(x_test, y_test, 50)
    np.testing.assert_array_equal(fixed[0], multi_mnist_pairs(x_test, y_test, 50)[0])
    assert TEST_PAIRS == 10_000


def test_every_digit_leads_a_pair_equally_often():
    images, labels = blocks(per_class=2)  # 20 digits
    rows_seen = []
    for seed in range(3):
        batches = MultiMNISTBatches(images, labels, 7, pairs_per_epoch=40, seed=seed)
        rows_seen.append(np.bincount(batches._rows, minlength=20))
    assert all(counts.tolist() == [2] * 20 for counts in rows_seen)


def test_training_batches_draw_only_from_the_training_digits(mnist):
    (x_train, y_train), (x_test, _), _ = mnist
    batches = MultiMNISTBatches(x_train, y_train, 64, pairs_per_epoch=128, seed=0)
    train_signatures = {signature(d) for d in x_train}
    test_signatures = {signature(d) for d in x_test}
    for index in range(len(batches)):
        _, y = batches[index]
        for digit in y["digits"].reshape(-1, 36, 36, 1):
            assert signature(digit) in train_signatures
            assert signature(digit) not in test_signatures


def test_batches_are_seeded_per_epoch_and_index(mnist):
    (x_train, y_train), _, _ = mnist
    batches = MultiMNISTBatches(x_train, y_train, 32, pairs_per_epoch=70, seed=5)
    assert len(batches) == 3 and len(batches[2][0]) == 6  # 32 + 32 + 6
    late_first = batches[1][0]
    same = MultiMNISTBatches(x_train, y_train, 32, pairs_per_epoch=70, seed=5)
    np.testing.assert_array_equal(same[0][0], batches[0][0])
    np.testing.assert_array_equal(same[1][0], late_first)  # any order of access
    first_epoch = batches[0][0]
    batches.on_epoch_end()
    assert not np.array_equal(batches[0][0], first_epoch)  # fresh pairs


def test_two_hot_targets_mark_both_classes(mnist):
    (x_train, y_train), _, _ = mnist
    batches = MultiMNISTBatches(x_train, y_train, 16, seed=0, targets="two_hot")
    x, y = batches[0]
    assert len(batches) == -(-len(x_train) // 16)  # one pair per digit
    assert y.shape == (16, 10) and y.dtype == np.float32
    np.testing.assert_array_equal(y.sum(axis=1), 2.0)
    capsnet = MultiMNISTBatches(x_train, y_train, 16, seed=0)
    x_same, targets = capsnet[0]
    np.testing.assert_array_equal(x, x_same)
    assert np.all(np.take_along_axis(y, targets["labels"], axis=1) == 1)


def test_overlay_pairs_adds_and_clips():
    images = np.zeros((2, 28, 28, 1), "float32")
    images[0, :, :14] = 0.75
    images[1, :, 7:21] = 0.5
    pairs, labels, digits = overlay_pairs(
        images, np.array([3, 8]), [0], [1], np.zeros((1, 2, 2), int)
    )
    assert labels.tolist() == [[3, 8]]
    row = pairs[0, 10, :, 0]
    assert row[4 + 3] == 0.75 and row[4 + 10] == 1.0 and row[4 + 17] == 0.5
    assert digits[0, 1].max() == 0.5


def test_bounding_box_overlap():
    canvas = np.zeros((3, 2, 36, 36, 1), "float32")
    canvas[0, :, 4:32, 4:32] = 1  # the same box twice
    canvas[1, 0, 0:10, 0:10] = 1  # two boxes apart
    canvas[1, 1, 20:30, 20:30] = 1
    canvas[2, 0, 0:10, 0:10] = 1  # half of the smaller box inside the other
    canvas[2, 1, 0:20, 5:25] = 1
    np.testing.assert_allclose(bounding_box_overlap(canvas), [1.0, 0.0, 0.5])


def test_overlap_of_real_pairs_is_large(mnist):
    _, (x_test, y_test), _ = mnist
    _, y = multi_mnist_pairs(x_test, y_test, 500)
    overlap = bounding_box_overlap(y["digits"])
    assert 0.5 < overlap.mean() < 1.0  # digits lie on top of each other


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"max_shift": -1}, "max_shift"),
        ({"max_shift": 1.5}, "max_shift"),
        ({"canvas_size": 20}, "canvas_size"),
        ({"num_pairs": 0}, "num_pairs"),
        ({"targets": "one_hot"}, "targets"),
    ],
)
def test_bad_arguments_are_refused(kwargs, match):
    images, labels = blocks()
    with pytest.raises(ValueError, match=match):
        multi_mnist_pairs(images, labels, **{"num_pairs": 5, **kwargs})


def test_bad_digits_are_refused():
    images, labels = blocks()
    with pytest.raises(ValueError, match="two different classes"):
        multi_mnist_pairs(images[:3], labels[:3], 5)
    with pytest.raises(ValueError, match="labels"):
        multi_mnist_pairs(images, labels[:-1], 5)
    with pytest.raises(ValueError, match="images"):
        multi_mnist_pairs(images[..., 0], labels, 5)
    with pytest.raises(ValueError, match="batch_size"):
        MultiMNISTBatches(images, labels, 0)
    with pytest.raises(ValueError, match="pairs_per_epoch"):
        MultiMNISTBatches(images, labels, 4, pairs_per_epoch=0)


def test_the_multi_mnist_dataset_answers_with_pairs(mnist):
    multi = get_dataset("multi_mnist")
    assert (multi.objects_per_image, multi.multi_label) == (2, True)
    (x_train, y_train), (x_test, y_test), _ = mnist
    x, y = multi.test_set(x_test, y_test, 50)
    fixed_x, fixed_y = fixed_test_set(x_test, y_test, 50)
    np.testing.assert_array_equal(x, fixed_x)
    np.testing.assert_array_equal(y["labels"], fixed_y["labels"])
    batches = multi.training_batches(
        x_train[::50], y_train[::50], 10, seed=3, targets="two_hot", pairs_per_epoch=30
    )
    assert isinstance(batches, MultiMNISTBatches) and len(batches) == 3
    assert batches[0][0].shape == (10, 36, 36, 1) and batches[0][1].shape == (10, 10)
    two_hot = multi.targets(y, "two_hot")
    assert two_hot.shape == (50, 10) and (two_hot.sum(axis=1) == 2).all()
    assert set(multi.targets(y, "capsnet")) == {"labels", "digits"}
    assert multi.accepts_targets("capsnet") and not multi.accepts_targets(None)
    labels = {"labels": np.array([[0, 1], [2, 3]])}
    scores = np.zeros((2, 10), "float32")
    scores[0, [0, 1]] = 1.0  # both right
    scores[1, [2, 5]] = 1.0  # one right
    result = multi.score(scores, labels)
    assert result == {
        "test_accuracy": 0.5,
        "test_error": 0.5,
        "test_accuracy_at_least_one": 1.0,
    }
