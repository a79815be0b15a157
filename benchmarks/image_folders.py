"""Image folders to try the trainer on, written from code: one sub-folder per class.

    python benchmarks/image_folders.py shapes FOLDER --per-class 200
    python -m capsules_keras.train --data FOLDER --epochs 10

`shapes`: three classes of filled shapes (circle, square, triangle) in 40x40
RGB on noisy backgrounds, as a new user's first folder might be: each image
draws its shape in a random colour, size, place and (square, triangle) turn
over a background of random colour plus per-pixel noise, and is written as
PNG or JPEG at random (both readers are exercised). A class is told by its
outline only: colour, size and place carry no information.
"""

import argparse
import math
import os
import sys

import numpy as np

#: The classes of `write_shapes`, in label order.
SHAPES = ("circle", "square", "triangle")


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


def write_shapes(folder, per_class=200, size=40, seed=0):
    """Writes `per_class` images of each of `SHAPES` into folder/<shape>/.

    Returns the number of files written. Refuses a folder that exists.
    """
    from PIL import Image, ImageDraw

    if os.path.exists(folder):
        raise ValueError(f"The folder {folder!r} exists; pass a new one.")
    if per_class < 1 or size < 16:
        raise ValueError(
            "Needs at least 1 image per class of at least 16 px. Received: "
            f"per_class={per_class}, size={size}"
        )
    rng = np.random.default_rng(seed)
    written = 0
    for kind in SHAPES:
        os.makedirs(os.path.join(folder, kind))
        for k in range(per_class):
            background = rng.integers(0, 256, 3)
            noise = rng.normal(0, 24, (size, size, 3))
            pixels = np.clip(background + noise, 0, 255).astype("uint8")
            image = Image.fromarray(pixels)
            radius = rng.uniform(0.2, 0.4) * size
            centre = rng.uniform(radius, size - radius, 2)
            colour = rng.integers(0, 256, 3)
            while np.abs(colour - background).sum() < 150:  # keep it visible
                colour = rng.integers(0, 256, 3)
            colour = tuple(int(v) for v in colour)
            draw = ImageDraw.Draw(image)
            outline = shape_outline(kind, centre, radius, rng.uniform(0, 2 * np.pi))
            if outline is None:
                x, y = centre
                draw.ellipse((x - radius, y - radius, x + radius, y + radius), colour)
            else:
                draw.polygon(outline, fill=colour)
            extension = "png" if rng.random() < 0.5 else "jpg"
            image.save(os.path.join(folder, kind, f"{kind}-{k:04d}.{extension}"))
            written += 1
    return written


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=("shapes",))
    parser.add_argument("folder")
    parser.add_argument("--per-class", type=int, default=200)
    parser.add_argument("--size", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        written = write_shapes(args.folder, args.per_class, args.size, args.seed)
    except ValueError as error:
        sys.exit(str(error))
    print(f"{written} images in {args.folder}")
    return written


if __name__ == "__main__":
    main()
