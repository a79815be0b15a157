"""The drawing helpers several figure modules share: an image on an axis, a
row's name beside a row of small maps."""

import textwrap

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


def _row_label(ax, text, width=16):
    """`text` as the y-label of a row's first small axis, wrapped to `width`
    characters a line so that a long name fits the row's height unclipped."""
    ax.set_ylabel(textwrap.fill(text, width, break_on_hyphens=False), fontsize=8)
