"""Image folders to try the trainer on, written from code: one sub-folder per class.

    python benchmarks/image_folders.py shapes FOLDER --per-class 200
    python benchmarks/image_folders.py fashion FOLDER --source fashion-mnist.npz
    python benchmarks/image_folders.py photos FOLDER
    python -m capsules_keras.train --data FOLDER --epochs 10

`shapes`: three classes of filled shapes (circle, square, triangle) in 40x40
RGB on noisy backgrounds, as a new user's first folder might be: each image
draws its shape in a random colour, size, place and (square, triangle) turn
over a background of random colour plus per-pixel noise, and is written as
PNG or JPEG at random (both readers are exercised). A class is told by its
outline only: colour, size and place carry no information.

`fashion`: Fashion-MNIST's garments as colour photographs might show them,
40x40 RGB: each 28x28 garment (from the training images of `--source`, a
Keras-layout .npz) is scaled up, given a random colour over a random
background with per-pixel noise, and written as PNG or JPEG. Its ten
classes (`FASHION_CLASSES`) are told by the garment's shape and texture.

`photos`: notebook 08's folder, non-overlapping tiles of seven real colour
photographs (`capsules_keras.data.photo_tiles`), 48x48 RGB by default, up
to 90 a photo; the class is the photo a tile was cut from.
"""

import argparse
import math
import os
import sys

import numpy as np

from capsules_keras.data.photo_tiles import write_photo_tiles

#: The classes of `write_shapes`, in label order.
SHAPES = ("circle", "square", "triangle")
#: The classes of `write_fashion`: Fashion-MNIST's, in label order.
FASHION_CLASSES = (
    "t-shirt",
    "trouser",
    "pullover",
    "dress",
    "coat",
    "sandal",
    "shirt",
    "sneaker",
    "bag",
    "ankle-boot",
)


def shape_outline(kind, centre, radius, turn):
    """The corners of a square or triangle inscribed in a circle of `radius`
    about `centre`, turned by `turn` radians; `None` for a circle."""
    if kind == "circle":
        return None
    corners = {"square": 4, "triangle": 3}[kind]
    x, y = centre
    return [
        (
            x + radius * math.cos(turn + 2 * math.pi * k / corners),
            y + radius * math.sin(turn + 2 * math.pi * k / corners),
        )
        for k in range(corners)
    ]


def _check_new_folder(folder, per_class, size):
    if os.path.exists(folder):
        raise ValueError(f"The folder {folder!r} exists; pass a new one.")
    if per_class < 1 or size < 16:
        raise ValueError(
            "Needs at least 1 image per class of at least 16 px. Received: "
            f"per_class={per_class}, size={size}"
        )


def _noisy_background(rng, size):
    """A random colour with per-pixel noise, and the colour: `(pixels, colour)`."""
    background = rng.integers(0, 256, 3)
    noise = rng.normal(0, 24, (size, size, 3))
    return np.clip(background + noise, 0, 255), background


def _visible_colour(rng, background):
    """A random colour at least 150 (summed over R, G, B) from `background`."""
    colour = rng.integers(0, 256, 3)
    while np.abs(colour - background).sum() < 150:
        colour = rng.integers(0, 256, 3)
    return colour


def _save(image, rng, folder, kind, k):
    extension = "png" if rng.random() < 0.5 else "jpg"
    image.save(os.path.join(folder, kind, f"{kind}-{k:04d}.{extension}"))


def write_fashion(folder, source, per_class=100, size=40, seed=0):
    """Writes `per_class` coloured garments of each of `FASHION_CLASSES`
    into folder/<class>/, from the training images of `source`.

    Returns the number of files written. Refuses a folder that exists.
    """
    from PIL import Image

    _check_new_folder(folder, per_class, size)
    with np.load(source) as data:
        x, y = data["x_train"], data["y_train"]
    rng = np.random.default_rng(seed)
    written = 0
    for label, kind in enumerate(FASHION_CLASSES):
        rows = rng.permutation(np.flatnonzero(y == label))[:per_class]
        if len(rows) < per_class:
            raise ValueError(
                f"{source} holds {len(rows)} training images of {kind}; "
                f"per_class={per_class} needs more"
            )
        os.makedirs(os.path.join(folder, kind))
        for k, row in enumerate(rows):
            garment = Image.fromarray(x[row]).resize((size, size), Image.BILINEAR)
            alpha = np.asarray(garment, "float32")[..., None] / 255
            pixels, background = _noisy_background(rng, size)
            colour = _visible_colour(rng, background)
            # The garment's grey levels as its shading in its colour.
            pixels = (1 - alpha) * pixels + alpha * colour * (0.5 + 0.5 * alpha)
            _save(Image.fromarray(pixels.astype("uint8")), rng, folder, kind, k)
            written += 1
    return written


def write_shapes(folder, per_class=200, size=40, seed=0):
    """Writes `per_class` images of each of `SHAPES` into folder/<shape>/.

    Returns the number of files written. Refuses a folder that exists.
    """
    from PIL import Image, ImageDraw

    _check_new_folder(folder, per_class, size)
    rng = np.random.default_rng(seed)
    written = 0
    for kind in SHAPES:
        os.makedirs(os.path.join(folder, kind))
        for k in range(per_class):
            pixels, background = _noisy_background(rng, size)
            image = Image.fromarray(pixels.astype("uint8"))
            radius = rng.uniform(0.2, 0.4) * size
            centre = rng.uniform(radius, size - radius, 2)
            colour = _visible_colour(rng, background)
            colour = tuple(int(v) for v in colour)
            draw = ImageDraw.Draw(image)
            outline = shape_outline(kind, centre, radius, rng.uniform(0, 2 * np.pi))
            if outline is None:
                x, y = centre
                draw.ellipse((x - radius, y - radius, x + radius, y + radius), colour)
            else:
                draw.polygon(outline, fill=colour)
            _save(image, rng, folder, kind, k)
            written += 1
    return written


#: Each kind's images per class and side, unless given.
DEFAULTS = {"shapes": (200, 40), "fashion": (200, 40), "photos": (90, 48)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=tuple(DEFAULTS))
    parser.add_argument("folder")
    parser.add_argument(
        "--source", help="fashion: Fashion-MNIST as a Keras-layout .npz"
    )
    parser.add_argument(
        "--per-class", type=int, help="images of each class (default: the kind's)"
    )
    parser.add_argument("--size", type=int, help="their side (default: the kind's)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    per_class, size = DEFAULTS[args.kind]
    args.per_class = per_class if args.per_class is None else args.per_class
    args.size = size if args.size is None else args.size
    try:
        if args.kind == "shapes":
            written = write_shapes(args.folder, args.per_class, args.size, args.seed)
        elif args.kind == "photos":
            counts = write_photo_tiles(
                args.folder, args.size, args.per_class, args.seed
            )
            written = sum(tiles for _, tiles in counts.values())
        elif args.source is None:
            raise ValueError("fashion reads its garments from --source FILE.npz")
        else:
            written = write_fashion(
                args.folder, args.source, args.per_class, args.size, args.seed
            )
    except ValueError as error:
        sys.exit(str(error))
    print(f"{written} images in {args.folder}")
    return written


if __name__ == "__main__":
    main()
