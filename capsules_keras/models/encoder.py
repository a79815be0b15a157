"""The encoder contract: what a backbone needs from the layer that makes its
primary capsules.

```
features = encoder.conv(images)            # any feature extractor
u        = encoder.primary_caps(features)  # (b, in_capsules, in_dim)
```

`CapsuleBackbone` takes any `CapsuleEncoder`, and the capacity planner
costs one through `planned_layers`, so a new encoder is one subclass in one
module: `CapsNetEncoder`, `EfficientEncoder` and `ResidualEncoder` are three.
"""

import keras


class CapsuleEncoder(keras.layers.Layer):
    """Base class of the layers from images to primary capsules.

    A subclass sets, in its `__init__`:

    - `image_shape`: `(height, width, channels)` of the images it takes;
    - `conv`: the layer from images to features;
    - `primary_caps`: the layer from features to capsules
      `(batch, in_capsules, in_dim)`;

    and as a class attribute `squash`, the name of the squash its capsules
    use (`capsules_keras.ops.SQUASHES`), which the backbone's class capsules
    use too. It implements `call`, `compute_output_shape` and `get_config`
    as any Keras layer does; `build` here builds `conv`, then
    `primary_caps` on its output.

    `planned_layers` is what the capacity planner (`plan_capacity`) walks.
    The default is `conv`'s layers, then `primary_caps`' (a `Sequential` is
    opened), one feeding the next; an encoder whose layers branch (a
    residual block) lists them itself. The planner refuses a layer it does
    not know how to cost, with an error that names it, rather than plan it
    as free.
    """

    #: The squash of its capsules; a subclass names one.
    squash = None

    def build(self, input_shape):
        self.conv.build(input_shape)
        self.primary_caps.build(self.conv.compute_output_shape(input_shape))
        self.built = True

    def planned_layers(self, input_shape):
        """`[(layer, its input shape), ...]`: the layers the encoder runs, in order.

        Args:
            input_shape: `(batch, *image_shape)`.
        """
        return chain_shapes(
            [*opened(self.conv), *opened(self.primary_caps)], input_shape
        )


def opened(layer):
    """`layer`'s layers if it is a `keras.Sequential` (opened in turn), else
    `[layer]`."""
    if isinstance(layer, keras.Sequential):
        return [leaf for sub in layer.layers for leaf in opened(sub)]
    return [layer]


def chain_shapes(chain, input_shape):
    """`[(layer, its input shape), ...]` for layers that feed one another."""
    pairs = []
    shape = tuple(input_shape)
    for layer in chain:
        pairs.append((layer, shape))
        shape = tuple(layer.compute_output_shape(shape))
    return pairs
