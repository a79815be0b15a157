"""What every capsule model shares: checked inputs, its own loss, predict, analyze.

`CapsuleModel` is a `keras.Model` whose `fit`, `evaluate` and `predict` take
images and labels as users hold them (checked and converted by
`capsules_keras.inputs`), whose loss is its own unless `compile` is given
another, and whose `analyze` runs a step over a few images in batches and returns
NumPy arrays.
"""

import keras
import numpy as np

from capsules_keras._checks import check_positive_int
from capsules_keras.inputs import (
    image_batch,
    is_array,
    prepare_images,
    prepare_labels,
)
from capsules_keras.models.pretrained import pretrained_path

#: The fewest rows `analyze` computes in one step (`CapsuleModel._in_batches`).
MIN_PADDED_ROWS = 16


class CapsuleModel(keras.Model):
    """A model with its own loss, whose arrays are checked with `prepare`.

    Every capsule model gives the same outputs:

    - `model(x)` (`call`): a dict of tensors whose `"scores"` are the class
      scores `(batch_size, num_classes)`; its other entries are the model's
      own (e.g. `"capsules"`).
    - `model.predict(x)`: those class scores, `(n, num_classes)`.
    - `model.analyze(images, labels=None, *, batch_size=128,
      routing_iterations=None)`: NumPy arrays, among them `"scores"` and
      `"predictions"` `(n,)`, and what the model shows inside.

    Subclasses set `image_shape` and `num_classes`, describe their loss in
    `OWN_LOSS` and compute it in `_task_loss`. `fit` applies `prepare` to
    `x, y` and to `validation_data`, `evaluate` to `x, y`, `predict` to
    `x`. Models loaded from a file get their own `compile` back.
    """

    #: What the model's own loss is (its `_task_loss`).
    OWN_LOSS = ""
    #: False after `compile(loss=...)` with a loss of the user's.
    _uses_own_loss = True

    @classmethod
    def from_preset(cls, name):
        """A trained model that ships with the package, loaded offline.

        Args:
            name: A key of `capsules_keras.models.PRETRAINED`, e.g.
                `"efficient_capsnet_mnist"`; `pretrained_card(name)` says
                how it was trained and what it scores.

        Returns:
            The model, uncompiled (`predict` and `analyze` need no
            `compile`; call `compile()` to train it further).

        Raises:
            ValueError: If `name` is unknown, or names a model that is not
                a `cls` (e.g. `CapsNet.from_preset` of an Efficient-CapsNet).
        """
        model = keras.saving.load_model(pretrained_path(name))
        if not isinstance(model, cls):
            raise ValueError(
                f"The pretrained model {name!r} is of class {type(model).__name__}, "
                f"not {cls.__name__}. Load it with "
                f"{type(model).__name__}.from_preset({name!r})."
            )
        return model

    def compile(self, optimizer="adam", loss="auto", metrics=None, **kwargs):
        """`keras.Model.compile`, with the model's own loss by default.

        Args:
            optimizer: Optimizer; the papers use Adam.
            loss: `"auto"` or None (the default): the model's own loss
                (`OWN_LOSS`: e.g. the margin loss plus the reconstruction
                loss). Any other loss `keras.Model.compile` takes replaces
                it: computed on the class scores (what `predict` returns)
                against the labels, with nothing else added, so a decoder
                no longer learns.
            metrics: Metrics on the class scores; `["accuracy"]` (or the
                model's own default) if None.
            **kwargs: Passed to `keras.Model.compile` (e.g. `jit_compile`).
        """
        self._uses_own_loss = loss is None or loss == "auto"
        if metrics is None:
            metrics = self._default_metrics()
        super().compile(
            optimizer=optimizer,
            loss=None if self._uses_own_loss else loss,
            metrics=metrics,
            **kwargs,
        )

    def _default_metrics(self):
        return ["accuracy"]

    def compile_from_config(self, config):
        """Re-compiles a loaded model (Keras skips a custom `compile`).

        `jit_compile` is reset to `"auto"`: the saved value is the choice of the
        backend that saved the model (e.g. True on jax), and forcing it on
        another backend can be slow (torch.compile on torch).
        """
        config = keras.saving.deserialize_keras_object(config)
        self.compile(**{**config, "jit_compile": "auto"})
        if self.built:
            self.optimizer.build(self.trainable_variables)  # for its saved state

    def compute_loss(
        self, x=None, y=None, y_pred=None, sample_weight=None, training=True
    ):
        """The model's own loss (`_task_loss`), plus e.g. kernel regularizers;
        or the loss given to `compile`, on the class scores."""
        if not self._uses_own_loss:
            scores = y_pred["scores"]
            return super().compute_loss(x, y, scores, sample_weight, training)
        if x is not None:  # the images a decoder redraws, scaled as `call` saw them
            x = image_batch(x, self.image_shape)
        loss = self._task_loss(x, y, y_pred, sample_weight, training)
        if self.losses:  # e.g. kernel regularizers, scaled for tf.distribute
            loss = loss + super().compute_loss(x, y, y_pred, sample_weight, training)
        return loss

    def _task_loss(self, x, y, y_pred, sample_weight, training):
        raise NotImplementedError

    def prepare(self, x, y=None):
        """Checked, converted images and labels (see `capsules_keras.inputs`).

        Arrays and tensors come back as NumPy arrays: float32 images
        `(n, *image_shape)` in [0, 1], int32 labels or float32 one-hot rows.
        Anything else (datasets, generators, `None`) comes back unchanged.
        """
        if is_array(x):
            x = prepare_images(x, self.image_shape)
            y = self._prepare_targets(y, len(x))
        return x, y

    def _prepare_targets(self, y, num_images):
        return self._prepare_labels(y, num_images, "y") if is_array(y) else y

    def _prepare_labels(self, labels, num_images, name):
        return prepare_labels(labels, self.num_classes, num_images, name)

    def fit(self, x=None, y=None, *args, validation_data=None, **kwargs):
        """`keras.Model.fit` after `prepare` of `x, y` and `validation_data`."""
        x, y = self.prepare(x, y)
        if isinstance(validation_data, (tuple, list)) and len(validation_data) > 1:
            validation_data = (
                *self.prepare(*validation_data[:2]),
                *validation_data[2:],
            )
        return super().fit(x, y, *args, validation_data=validation_data, **kwargs)

    def evaluate(self, x=None, y=None, *args, **kwargs):
        """`keras.Model.evaluate` after `prepare` of `x, y`."""
        return super().evaluate(*self.prepare(x, y), *args, **kwargs)

    def predict(self, x, batch_size=None, verbose="auto", steps=None, callbacks=None):
        """The class scores, `(n, num_classes)`, of `prepare`d images."""
        x, _ = self.prepare(x)
        outputs = super().predict(
            x, batch_size=batch_size, verbose=verbose, steps=steps, callbacks=callbacks
        )
        return outputs["scores"]

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        """Metrics see the class scores."""
        return super().compute_metrics(x, y, y_pred["scores"], sample_weight)

    def _in_batches(self, step, batch_size, *arrays):
        """`step(*batch)` over `batch_size` rows of `arrays` at a time, as NumPy.

        Used by `analyze`. `step` returns a dict of tensors with one row per
        input row; the result holds them concatenated over all the batches.
        A batch shorter than `batch_size` is padded (its last row repeated)
        to the next power of two, at least `MIN_PADDED_ROWS`, or to
        `batch_size`, and the padding's rows dropped from the result: every
        row is computed on its own, and the backends that compile a program
        per input shape (jax's eager ops, tensorflow's compiled routing) meet
        a few shapes instead of one per call. On jax a new shape costs far
        more compiling than the padding's rows cost computing
        (docs/design-decisions.md, "Padded batches in analyze").
        """
        check_positive_int("batch_size", batch_size)
        parts = []
        for start in range(0, len(arrays[0]), batch_size):
            batch = [array[start : start + batch_size] for array in arrays]
            rows = len(batch[0])
            padded = max(MIN_PADDED_ROWS, 1 << (rows - 1).bit_length())
            padding = min(batch_size, padded) - rows
            batch = [
                np.pad(part, [(0, padding)] + [(0, 0)] * (part.ndim - 1), mode="edge")
                for part in batch
            ]
            outputs = step(*batch)
            parts.append(
                {k: keras.ops.convert_to_numpy(v)[:rows] for k, v in outputs.items()}
            )
        return {k: np.concatenate([part[k] for part in parts]) for k in parts[0]}
