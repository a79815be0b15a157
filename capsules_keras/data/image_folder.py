"""Image folders: one sub-folder of images per class, read into uint8 arrays.

The layout of `keras.utils.image_dataset_from_directory`:

    flowers/            the folder (`path`)
        daisy/          one sub-folder per class: its name is the class name
            001.jpg
            002.png
        tulip/
            a.jpg
            more/b.jpg  folders inside a class folder belong to that class

The class names are the sub-folders' names, sorted (or the ones chosen, in
the order given); a class's images are the files below its folder whose
names end in one of `IMAGE_EXTENSIONS`. Other files are skipped and counted,
hidden files and folders (a leading dot) ignored, files directly in the
folder ignored, as Keras' loader does.

The images are read with Pillow into one uint8 array: RGB or grayscale,
stretched to one size (bilinear, no cropping: Keras' loader's defaults).
Not with `image_dataset_from_directory`: its `format="tf"` needs
TensorFlow, and its `format="grain"` needs the `grain` package besides
Pillow, decodes every image to float32 (four times the memory of uint8),
always resizes (to 256x256 unless told), cannot report the images' own size
or colour, and splits off a validation set by position, not by class.
`keras.utils.load_img` reads through Pillow too, without a way to look at an
image's size and colour before decoding it.

`ImageFolder` (`capsules_keras.data.datasets`) is the dataset these
functions read; `load_image_folder` what a user calls.
"""

import concurrent.futures
import os

import numpy as np

from capsules_keras.data.sources import IDX_FILES

#: The file name endings read as images: Keras' loader's, with TIFF and WebP.
IMAGE_EXTENSIONS = (".bmp", ".gif", ".jpeg", ".jpg", ".png", ".tif", ".tiff", ".webp")
#: The smallest height and width the models are built for: MNIST's.
MIN_IMAGE_SIZE = 28
#: `color_mode` values: "auto" is grayscale when every image is stored grey.
COLOR_MODES = ("auto", "grayscale", "rgb")
#: Pillow modes of grey images (8-bit, 1-bit, 16/32-bit integer, float, with alpha).
GREY_MODES = frozenset({"1", "L", "LA", "La", "I", "I;16", "I;16L", "I;16B", "F"})
#: The share of each class's images held out when none is given.
VALIDATION_SPLIT = 0.2
#: How many unreadable files an error message names.
NAMED_FILES = 5


def is_image_folder(path):
    """Whether `path` is a folder to read as class sub-folders: a directory
    that is not an MNIST IDX folder (none of `IDX_FILES` in it)."""
    path = os.fspath(path)
    return os.path.isdir(path) and not any(
        os.path.exists(os.path.join(path, name)) for name in IDX_FILES.values()
    )


def parse_image_size(image_size, name="image_size"):
    """`(height, width)` of an image size given as a user gives it, or None.

    Args:
        image_size: None; a whole number of pixels (square); a string `"64"`
            or `"HEIGHTxWIDTH"` (`"64x48"`: 64 rows, 48 columns, the order
            of Keras' `image_size`); or a `(height, width)` pair.
        name: What to call it in error messages.

    Raises:
        ValueError: not a size, or a side under `MIN_IMAGE_SIZE`.

    >>> parse_image_size("64x48"), parse_image_size(32)
    ((64, 48), (32, 32))
    """
    if image_size is None:
        return None
    size = None
    if isinstance(image_size, str):
        parts = image_size.strip().lower().split("x")
        if 1 <= len(parts) <= 2 and all(p.strip().isdigit() for p in parts):
            size = tuple(int(p) for p in parts)
    elif isinstance(image_size, (int, np.integer)) and not isinstance(image_size, bool):
        size = (int(image_size),)
    elif isinstance(image_size, (tuple, list)) and len(image_size) == 2:
        if all(
            isinstance(v, (int, np.integer)) and not isinstance(v, bool)
            for v in image_size
        ):
            size = tuple(int(v) for v in image_size)
    if size is None:
        raise ValueError(
            f"`{name}` must be a size in pixels: N, 'HEIGHTxWIDTH' (e.g. 64 or "
            f"'64x48') or a (height, width) pair. Received: {name}={image_size!r}"
        )
    size = size * 2 if len(size) == 1 else size
    if min(size) < MIN_IMAGE_SIZE:
        raise ValueError(
            f"`{name}` must be at least {MIN_IMAGE_SIZE} px on each side, the "
            f"smallest images the models are built for. Received: "
            f"{name}={image_size!r}"
        )
    return size


def check_color_mode(color_mode):
    """Raises unless `color_mode` is one of `COLOR_MODES`."""
    if color_mode not in COLOR_MODES:
        raise ValueError(
            f"`color_mode` must be one of {COLOR_MODES}. "
            f"Received: color_mode={color_mode!r}"
        )


def check_validation_split(validation_split):
    """Raises unless `validation_split` is a number strictly between 0 and 1."""
    if (
        isinstance(validation_split, bool)
        or not isinstance(validation_split, (int, float))
        or not 0 < validation_split < 1
    ):
        raise ValueError(
            "`validation_split` must be a number between 0 and 1 (the share "
            "of each class held out). Received: "
            f"validation_split={validation_split!r}"
        )


def index_image_folder(path, class_names=None):
    """The classes and image files of a folder, without opening the files.

    Args:
        path: The folder, one sub-folder per class.
        class_names: The sub-folders to read, in label order; None: every
            sub-folder, sorted by name.

    Returns:
        `(class_names, files, skipped)`: the class names (a tuple), the
        image files as `(path, label)` pairs (by class, then by path), and
        how many other (non-hidden) files the class folders hold.

    Raises:
        ValueError: `path` is not a directory, there are fewer than two
            classes, `class_names` names a missing or repeated folder, or a
            class folder holds no image file.
    """
    path = os.fspath(path)
    if not os.path.isdir(path):
        found = "not a directory" if os.path.exists(path) else "no such directory"
        raise ValueError(
            "An image folder must be a directory with one sub-folder of images "
            f"per class. Received: path={path!r} ({found})"
        )
    folders = sorted(
        entry.name
        for entry in os.scandir(path)
        if entry.is_dir() and not entry.name.startswith(".")
    )
    if class_names is None:
        class_names = folders
    else:
        class_names = list(class_names)
        missing = [name for name in class_names if name not in folders]
        repeated = sorted({name for name in class_names if class_names.count(name) > 1})
        if missing or repeated:
            raise ValueError(
                f"`class_names` must name different sub-folders of {path!r} (it "
                f"has {folders}). Received: class_names={class_names}"
                + (f", missing {missing}" if missing else "")
                + (f", repeated {repeated}" if repeated else "")
            )
    if len(class_names) < 2:
        raise ValueError(
            "An image folder needs at least 2 classes, one sub-folder each "
            f"(path/class_name/image.png). Received: path={path!r} with "
            f"class folders {list(class_names)}"
        )
    files, skipped, empty = [], 0, []
    for label, name in enumerate(class_names):
        found, others = _class_files(os.path.join(path, name))
        files += [(file, label) for file in found]
        skipped += others
        if not found:
            empty.append(name)
    if empty:
        raise ValueError(
            f"Every class folder needs images ({', '.join(IMAGE_EXTENSIONS)}). "
            f"Received: path={path!r} with class folders holding none: {empty}"
        )
    return tuple(class_names), files, skipped


def _class_files(folder):
    """The image files below `folder` (sorted), and how many other files."""
    found, others = [], 0
    for root, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(names):
            if name.startswith("."):
                continue
            if name.lower().endswith(IMAGE_EXTENSIONS):
                found.append(os.path.join(root, name))
            else:
                others += 1
    return found, others


def held_out_split(labels, validation_split, seed=0, class_names=None):
    """Seeded, stratified indices of the training and the held-out images.

    Each class keeps `round(validation_split * n)` of its `n` images apart,
    at least one and at most `n - 1`, drawn with `seed`; both index arrays
    come back shuffled (seeded), not grouped by class.

    Args:
        labels: Class indices `(n,)`, every class 0..k-1 present.
        validation_split: The share of each class to hold out, in (0, 1).
        seed: Seed of the draw.
        class_names: The classes' names, for the error message.

    Raises:
        ValueError: a class has fewer than 2 images (one to train on, one
            to hold out).

    >>> train, held = held_out_split(np.repeat([0, 1], [10, 5]), 0.2)
    >>> len(train), len(held), np.bincount(np.repeat([0, 1], [10, 5])[held]).tolist()
    (12, 3, [2, 1])
    """
    check_validation_split(validation_split)
    labels = np.asarray(labels)
    rng = np.random.default_rng(seed)
    train, held = [], []
    for label in range(int(labels.max()) + 1):
        members = rng.permutation(np.flatnonzero(labels == label))
        count = len(members)
        if count < 2:
            name = label if class_names is None else repr(class_names[label])
            raise ValueError(
                "Every class needs at least 2 images: one to train on, one to "
                f"hold out. Received: {count} image(s) of class {name}"
            )
        n_held = min(count - 1, max(1, int(np.floor(validation_split * count + 0.5))))
        held.append(members[:n_held])
        train.append(members[n_held:])
    return rng.permutation(np.concatenate(train)), rng.permutation(np.concatenate(held))


def image_headers(paths):
    """`(height, width)` and Pillow mode of each file, from its header only.

    Raises:
        ValueError: naming the files Pillow cannot open as images.
    """
    image_module = pil_image()

    def header(path):
        try:
            with image_module.open(path) as image:
                return (image.height, image.width), image.mode
        # Pillow raises many kinds of error for a file it cannot read.
        except Exception as error:
            return error

    results = _in_threads(header, paths)
    _raise_unreadable(paths, results)
    return results


def resolve_shape(paths, headers, image_size=None, color_mode="auto"):
    """The `(height, width)` and colour mode the images are read at.

    Args:
        paths: The image files, and `headers` their `image_headers`.
        image_size: `(height, width)` to resize every image to, or None: the
            images' own, which must then be the same for all and at least
            `MIN_IMAGE_SIZE` px.
        color_mode: `"grayscale"`, `"rgb"`, or `"auto"`: grayscale when every
            image is stored grey (`GREY_MODES`), else rgb.

    Returns:
        `((height, width), color_mode)`, the mode `"grayscale"` or `"rgb"`.

    Raises:
        ValueError: sizes that differ, or images under `MIN_IMAGE_SIZE` px,
            without an `image_size`; naming files and their sizes.
    """
    check_color_mode(color_mode)
    if color_mode == "auto":
        grey = all(mode in GREY_MODES for _, mode in headers)
        color_mode = "grayscale" if grey else "rgb"
    if image_size is not None:
        return tuple(image_size), color_mode
    sizes = {}
    for path, (size, _) in zip(paths, headers, strict=True):
        sizes.setdefault(size, path)
    if len(sizes) > 1:
        examples = "; ".join(
            f"{path} is {h}x{w}" for (h, w), path in list(sizes.items())[:3]
        )
        raise ValueError(
            f"The images differ in size ({len(sizes)} sizes, height x width) and "
            "no image size was given to resize them to: pass image_size (the "
            f"trainer's --image-size), e.g. 64 or 64x48. Received: {examples}"
        )
    ((size, path),) = sizes.items()
    if min(size) < MIN_IMAGE_SIZE:
        raise ValueError(
            f"The images are smaller than {MIN_IMAGE_SIZE} px, the smallest the "
            f"models are built for: resize them with image_size={MIN_IMAGE_SIZE} "
            f"(--image-size {MIN_IMAGE_SIZE}) or larger. Received: {path} is "
            f"{size[0]}x{size[1]} (height x width)"
        )
    return size, color_mode


def read_images(paths, image_size, color_mode):
    """The images of `paths` in one uint8 array `(n, height, width, channels)`.

    Each is converted to `color_mode` ("grayscale": 1 channel, Pillow's
    ITU-R 601-2 luma; "rgb": 3, alpha dropped; 16-bit grey scaled to 8
    bits) and, where its size differs, stretched to `image_size`
    `(height, width)` with bilinear filtering (JPEGs first decoded at a
    reduced scale where Pillow can). The array takes `n * height * width *
    channels` bytes; nothing else of that size is held.

    Raises:
        ValueError: naming the files that cannot be decoded.
    """
    image_module = pil_image()
    height, width = image_size
    channels = 1 if color_mode == "grayscale" else 3
    images = np.empty((len(paths), height, width, channels), dtype=np.uint8)

    def read(index):
        try:
            with image_module.open(paths[index]) as image:
                images[index] = _decoded(image_module, image, image_size, color_mode)
        # Pillow raises many kinds of error for a file it cannot decode.
        except Exception as error:
            return error
        return None

    _raise_unreadable(paths, _in_threads(read, range(len(paths))))
    return images


def _decoded(image_module, image, image_size, color_mode):
    """One image as a uint8 array `(height, width, channels)`."""
    height, width = image_size
    pil_mode = "L" if color_mode == "grayscale" else "RGB"
    if (image.height, image.width) != (height, width):
        image.draft(pil_mode, (width, height))  # JPEG: decode at >= this size
    if image.mode.startswith("I;16") or image.mode == "I":
        # 16-bit grey: 0..65535 to 0..255 (Pillow's convert would clip at 255).
        values = np.asarray(image, dtype=np.float64) / 257.0
        image = image_module.fromarray(np.clip(values + 0.5, 0, 255).astype(np.uint8))
    if image.mode != pil_mode:
        image = image.convert(pil_mode)
    if (image.height, image.width) != (height, width):
        image = image.resize((width, height), image_module.Resampling.BILINEAR)
    array = np.asarray(image, dtype=np.uint8)
    return array[..., None] if array.ndim == 2 else array  # (height, width, channels)


def _in_threads(function, items):
    """`[function(item) for item in items]`, in threads (Pillow decodes
    outside Python's global lock)."""
    with concurrent.futures.ThreadPoolExecutor() as pool:
        return list(pool.map(function, items))


def _raise_unreadable(paths, results):
    """Raises a `ValueError` naming the files whose result is an exception."""
    failed = [
        (path, result)
        for path, result in zip(paths, results, strict=True)
        if isinstance(result, Exception)
    ]
    if failed:
        named = "; ".join(
            f"{path}: {type(error).__name__}: {error}"
            for path, error in failed[:NAMED_FILES]
        )
        extra = len(failed) - NAMED_FILES
        more = f" (and {extra} more)" if extra > 0 else ""
        raise ValueError(
            f"{len(failed)} image file(s) could not be read: remove or replace "
            f"them. Received: {named}{more}"
        )


def pil_image():
    """`PIL.Image`, or an `ImportError` that says what to install."""
    try:
        from PIL import Image
    except ImportError as error:
        raise ImportError(
            "Reading an image folder needs Pillow, as keras.utils.load_img "
            "does: pip install pillow"
        ) from error
    return Image
