"""`affine_images`: rotation about the centre and shifts, NumPy only."""

import numpy as np
import pytest

from capsules_keras.data import affine_images
from capsules_keras.data.transforms import shift_images


@pytest.fixture
def images():
    return np.random.default_rng(0).uniform(0, 1, (3, 28, 28, 1)).astype("float32")


def test_identity(images):
    out = affine_images(images)
    assert out.dtype == images.dtype and out.shape == images.shape
    np.testing.assert_array_equal(out, images)


def test_whole_pixel_shifts_match_shift_images(images):
    shifts = np.array([[2, -3], [0, 1], [-4, 4]])
    np.testing.assert_allclose(
        affine_images(images, shift=shifts), shift_images(images, shifts), atol=1e-6
    )
    # One pair for every image.
    np.testing.assert_allclose(
        affine_images(images, shift=(1, -2)),
        shift_images(images, np.tile([1, -2], (3, 1))),
        atol=1e-6,
    )


@pytest.mark.parametrize("angle, k", [(90, 1), (-90, -1), (180, 2), (360, 0)])
def test_quarter_turns_match_rot90_counter_clockwise(images, angle, k):
    np.testing.assert_allclose(
        affine_images(images, angle_degrees=angle),
        np.rot90(images, k, axes=(1, 2)),
        atol=1e-5,
    )


def test_one_angle_per_image(images):
    out = affine_images(images, angle_degrees=[0, 90, 180])
    np.testing.assert_allclose(out[0], images[0], atol=1e-6)
    np.testing.assert_allclose(out[1], np.rot90(images[1]), atol=1e-5)
    np.testing.assert_allclose(out[2], np.rot90(images[2], 2), atol=1e-5)


def test_half_pixel_shift_interpolates_and_fills_with_zeros():
    image = np.zeros((1, 5, 5, 1))
    image[0, 2, 2] = 1.0
    out = affine_images(image, shift=(0, 0.5))[0, :, :, 0]
    np.testing.assert_allclose(out[2, 2:4], [0.5, 0.5])
    assert out.sum() == pytest.approx(1.0)
    # Moved out of the frame entirely: nothing is left.
    assert affine_images(image, shift=(0, 10)).sum() == 0


def test_rotation_turns_about_the_centre_and_keeps_the_ink():
    image = np.zeros((1, 28, 28, 1), dtype="float32")
    image[0, 6:10, 12:16] = 1.0  # a block above the centre (13.5, 13.5)
    out = affine_images(image, angle_degrees=30)[0, :, :, 0]
    rows, cols = np.indices(out.shape)
    centre_r = (out * rows).sum() / out.sum() - 13.5
    centre_c = (out * cols).sum() / out.sum() - 13.5
    # It was at (-6, 0); counter-clockwise by 30 degrees moves it left.
    np.testing.assert_allclose(
        [centre_r, centre_c],
        [-6 * np.cos(np.pi / 6), -6 * np.sin(np.pi / 6)],
        atol=0.05,
    )
    assert out.sum() == pytest.approx(16.0, rel=0.02)


def test_integer_images_give_float32():
    out = affine_images(np.full((2, 28, 28, 1), 255, dtype=np.uint8), angle_degrees=5)
    assert out.dtype == np.float32


def test_invalid_inputs():
    with pytest.raises(ValueError, match="Received: images.shape"):
        affine_images(np.zeros((28, 28, 1)))
    with pytest.raises(ValueError, match="angle_degrees shape"):
        affine_images(np.zeros((3, 28, 28, 1)), angle_degrees=[1, 2])
    with pytest.raises(ValueError, match="shift shape"):
        affine_images(np.zeros((3, 28, 28, 1)), shift=(1, 2, 3))
