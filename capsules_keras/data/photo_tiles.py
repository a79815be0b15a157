"""An example folder of real photographs: tiles of the photos inside scikit-image.

Seven colour photographs ship inside the `scikit-image` wheel
(`skimage.data`; no download), each free to use (`PHOTOS` names them and
their licences). `write_photo_tiles` cuts each into non-overlapping square
tiles and writes some of them, drawn with a seed, as PNG files into one
sub-folder per photo: an image folder whose task is *which photo is this
square from?* Notebook 08 trains on it, and the folder comparison of
docs/guides/your-own-images.md ("Which model") is measured on it too.

The tiles do not overlap, so no pixel is both trained on and held out;
neighbouring tiles of one photo still look alike, which makes held-out
tiles easier than tiles of a new photo would be.
"""

import os

import numpy as np

from capsules_keras._checks import check_positive_int

#: Class name: (the `skimage.data` function, the photograph, its licence).
PHOTOS = {
    "astronaut": ("astronaut", "Eileen Collins, NASA Great Images", "public domain"),
    "cat": ("chelsea", "Chelsea the cat, by Stefan van der Walt", "CC0"),
    "coffee": (
        "coffee",
        "a coffee cup, by Rachel Michetti (Pikolo Espresso Bar)",
        "CC0",
    ),
    "galaxies": (
        "hubble_deep_field",
        "the Hubble eXtreme Deep Field, NASA",
        "public domain",
    ),
    "retina": (
        "retina",
        "a fundus photograph of a retina, by Mikael Häggström",
        "CC0",
    ),
    "rocket": (
        "rocket",
        "the launch of DSCOVR on a Falcon 9, SpaceX",
        "public domain",
    ),
    "tissue": (
        "immunohistochemistry",
        "stained colonic glands, CMMI",
        "no known copyright restrictions",
    ),
}


def photo(name):
    """The photograph of class `name` (`PHOTOS`): (height, width, 3) uint8."""
    if name not in PHOTOS:
        raise ValueError(f"`name` must be one of {sorted(PHOTOS)}. Received: {name!r}")
    try:
        from skimage import data
    except ImportError as error:
        raise ImportError(
            "The example photographs ship inside scikit-image: pip install scikit-image"
        ) from error
    return getattr(data, PHOTOS[name][0])()


def write_photo_tiles(folder, tile=48, per_class=90, seed=0):
    """Writes up to `per_class` tiles of each photograph into folder/<class>/.

    Each photo is cut into non-overlapping `tile` x `tile` squares, and
    `per_class` of them (all, where the photo has fewer) are drawn with
    `seed` and saved as PNG files named by their row and column.

    Args:
        folder: A folder that does not exist yet; it is created.
        tile: The side of a tile, in pixels (at least 28: the smallest
            image the models take).
        per_class: The most tiles written of one photo.
        seed: Draws the tiles.

    Returns:
        `{class name: (tiles in the photo, tiles written)}`.
    """
    from PIL import Image

    if os.path.exists(folder):
        raise ValueError(f"The folder {folder!r} exists; pass a new one.")
    if not isinstance(tile, int) or tile < 28:
        raise ValueError(f"`tile` must be an integer of at least 28. Received: {tile}")
    check_positive_int("per_class", per_class)
    rng = np.random.default_rng(seed)
    counts = {}
    for name in PHOTOS:
        pixels = photo(name)
        rows, columns = pixels.shape[0] // tile, pixels.shape[1] // tile
        chosen = np.sort(rng.permutation(rows * columns)[:per_class])
        os.makedirs(os.path.join(folder, name))
        for cell in chosen:
            r, c = divmod(int(cell), columns)
            square = pixels[r * tile : (r + 1) * tile, c * tile : (c + 1) * tile]
            path = os.path.join(folder, name, f"{name}-r{r:02d}-c{c:02d}.png")
            Image.fromarray(square).save(path)
        counts[name] = (rows * columns, len(chosen))
    return counts
