"""What single capsule dimensions draw: the paper's Figure 4, computed and by hand.

`dimension_mosaics` decodes a capsule with one dimension nudged at a time
over a range of steps: the mosaics of the paper's Figure 4 (notebooks 03 and
09 draw them with `figures.plot_dimension_perturbations`).

`capsule_explorer(model, images)` (notebook 09) returns an ipywidgets box: a menu of
images, one slider per dimension of the winning capsule, and the image beside
its redrawing from that capsule, drawn again whenever a slider moves. Where
widgets do not run (nbval, the documentation site, a code host's viewer) the
box shows a still picture of its current state instead: its display data
carries a PNG beside the widget, and a viewer without the widget's state
shows the PNG.
"""

import base64
import io

import keras
import numpy as np
from matplotlib.image import imsave

#: How far each slider moves a dimension: the paper's Figure 4 range.
LIMIT, STEP = 0.25, 0.05
#: Each pixel drawn as SCALE x SCALE pixels, so that a 28x28 digit is legible.
SCALE = 6


def dimension_mosaics(model, capsules, winners, deltas):
    """Each winning capsule decoded with one dimension nudged at a time.

    ```
    mosaics[k, d, s] = decode(capsules[k] with deltas[s] added to
                              dimension d of capsule winners[k], masked by it)
    ```

    All `dims x steps` variants of a capsule go through the decoder in one
    batch (`model.reconstruct` decodes any number of capsules).

    Args:
        model: A capsule classifier with a decoder (`reconstruct`).
        capsules: `(n, classes, dims)` class capsules (`model.analyze`).
        winners: `(n,)` the class whose capsule is nudged and decoded.
        deltas: The `steps` amounts added.

    Returns:
        `(n, dims, steps, height, width, channels)` decoded images.
    """
    capsules, deltas = np.asarray(capsules), np.asarray(deltas)
    mosaics = []
    for capsule_set, winner in zip(capsules, winners, strict=True):
        dims, steps = capsule_set.shape[-1], len(deltas)
        tweaked = np.tile(
            capsule_set, (dims, steps, 1, 1)
        )  # (dims, steps, classes, dims)
        rows = np.arange(dims)
        tweaked[rows, :, winner, rows] += deltas  # row d, column s: d + deltas[s]
        decoded = model.reconstruct(
            tweaked.reshape(-1, *capsule_set.shape), np.full(dims * steps, winner)
        )
        decoded = keras.ops.convert_to_numpy(decoded)
        mosaics.append(decoded.reshape(dims, steps, *decoded.shape[1:]))
    return np.stack(mosaics)


def side_by_side_png(image, redrawing, scale=SCALE):
    """PNG bytes of an image and its redrawing side by side, enlarged, in grey."""
    tiles = [np.asarray(tile, dtype=float).mean(axis=-1) for tile in (image, redrawing)]
    gap = np.ones((tiles[0].shape[0], 2))
    picture = np.kron(np.hstack([tiles[0], gap, tiles[1]]), np.ones((scale, scale)))
    buffer = io.BytesIO()
    imsave(buffer, np.clip(picture, 0, 1), cmap="gray", vmin=0, vmax=1, format="png")
    return buffer.getvalue()


def capsule_explorer(model, images, names=None):
    """An interactive Figure 4: nudge each dimension of a capsule, see the redrawing.

    For the image picked in the menu the model's winning capsule is computed
    once (`model.analyze`); the sliders add their values to its dimensions
    and `model.reconstruct` decodes it, masked by the winning class, as in
    the paper's Figure 4 (there one dimension at a time, here all at once).

    Args:
        model: A trained capsule classifier with a decoder (`CapsNet`,
            `EfficientCapsNet`): anything with `analyze` and `reconstruct`.
        images: `(n, height, width, channels)` images to pick from.
        names: Optional `n` names for the menu (default: "image k").

    Returns:
        An `ipywidgets.VBox`; its attributes `menu`, `sliders` and `picture`
        are the widgets, `redrawing()` the current redrawing as an array.
    """
    import ipywidgets as widgets  # only this explorer needs it

    images = np.asarray(images)
    if images.ndim != 4 or not len(images):
        raise ValueError(
            "`images` must be a non-empty (n, height, width, channels) array. "
            f"Received: images.shape={images.shape}"
        )
    names = [f"image {k}" for k in range(len(images))] if names is None else names
    if len(names) != len(images):
        raise ValueError(
            f"`names` must name each of the {len(images)} images. "
            f"Received: {len(names)} names"
        )

    class Explorer(widgets.VBox):
        def _repr_mimebundle_(self, **kwargs):
            bundle = super()._repr_mimebundle_(**kwargs)
            bundle["image/png"] = base64.b64encode(self.picture.value).decode()
            return bundle

    menu = widgets.Dropdown(
        options=[(name, k) for k, name in enumerate(names)], value=0
    )
    sliders = [
        widgets.FloatSlider(
            value=0.0,
            min=-LIMIT,
            max=LIMIT,
            step=STEP,
            description=f"dim {d}",
            continuous_update=False,
            readout_format="+.2f",
        )
        for d in range(model.analyze(images[:1])["capsules"].shape[-1])
    ]
    picture = widgets.Image(format="png")
    caption = widgets.HTML()
    reset = widgets.Button(description="all to 0")
    state = {}

    def redrawing():
        capsules = state["capsules"].copy()
        capsules[0, state["winner"]] += [slider.value for slider in sliders]
        decoded = model.reconstruct(capsules, np.array([state["winner"]]))
        return keras.ops.convert_to_numpy(decoded)[0]

    def redraw(_=None):
        picture.value = side_by_side_png(images[menu.value], redrawing())

    def pick(_=None):
        inside = model.analyze(images[menu.value : menu.value + 1])
        state["capsules"] = inside["capsules"]
        state["winner"] = int(inside["predictions"][0])
        length = inside["lengths"][0, state["winner"]]
        caption.value = (
            f"read as {state['winner']} (capsule length {length:.2f}); left: the "
            "image, right: its redrawing from the capsule as the sliders move it"
        )
        zero_all()

    def zero_all(_=None):
        for slider in sliders:
            slider.unobserve(redraw, "value")
            slider.value = 0.0
            slider.observe(redraw, "value")
        redraw()

    menu.observe(pick, "value")
    reset.on_click(zero_all)
    columns = widgets.HBox(
        [
            widgets.VBox(sliders[: len(sliders) // 2]),
            widgets.VBox(sliders[len(sliders) // 2 :]),
        ]
    )
    explorer = Explorer(
        [widgets.HBox([menu, reset]), caption, widgets.HBox([picture, columns])]
    )
    explorer.menu, explorer.sliders, explorer.picture = menu, sliders, picture
    explorer.redrawing = redrawing
    pick()
    return explorer
