"""The one drawing helper several figure modules share: an image on an axis."""

import numpy as np


def _image(ax, image, title=None):
    image = np.asarray(image)
    ax.imshow(
        image[..., 0] if image.shape[-1] == 1 else image, cmap="gray", vmin=0, vmax=1
    )
    ax.set_xticks([])
    ax.set_yticks([])
    if title is not None:
        ax.set_title(title, fontsize=8)
