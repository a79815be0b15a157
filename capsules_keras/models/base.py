"""What every capsule model shares: checked inputs, its own loss, predict, analyze.

`CapsuleModel` is a `keras.Model` whose `fit`, `evaluate` and `predict` take
images and labels as users hold them (checked and converted by
`capsules_keras.inputs`), whose loss is its own (`compile` refuses another),
and whose `analyze` runs a step over a few images in batches and returns
NumPy arrays.
"""

import keras
import numpy as np

from capsules_keras._checks import check_positive_int
from capsules_keras.inputs import is_array, prepare_images, prepare_labels
from capsules_keras.models.pretrained import pretrained_path

#: The fewest rows `analyze` computes in one step (`CapsuleModel._in_batches`).
MIN_PADDED_ROWS = 16


class CapsuleModel(keras.Model):
    """A model with its own loss, whose arrays are checked with `prepare`.

    Subclasses set `image_shape` and `num_classes`, describe their loss in
    `OWN_LOSS` and compute it in `_task_loss`; `_scores` picks the class
    scores from the outputs of `call`. `fit` applies `prepare` to `x, y` and
    to `validation_data`, `evaluate` to `x, y`, `predict` to `x`. Models
    loaded from a file get their own `compile` back.
    """

    #: What the model's loss is, for the error when `compile` gets a loss.
    OWN_LOSS = ""

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

    def compile(self, optimizer="adam", loss=None, metrics=None, **kwargs):
        """Like `keras.Model.compile`; the loss is the model's own.

        Args:
            optimizer: Optimizer; the papers use Adam.
            loss: Must be None: the model computes its own loss (see
                `compute_loss`).
            metrics: Metrics on the class scores; `["accuracy"]` (or the
                model's own default) if None.
            **kwargs: Passed to `keras.Model.compile` (e.g. `jit_compile`).
        """
        if loss is not None:
            raise ValueError(
                f"{type(self).__name__} computes its own loss ({self.OWN_LOSS}); "
                f"do not pass one. Received: loss={loss!r}"
            )
        if metrics is None:
            metrics = self._default_metrics()
        super().compile(optimizer=optimizer, metrics=metrics, **kwargs)

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
        """The model's own loss (`_task_loss`), plus e.g. kernel regularizers."""
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
        return self._scores(outputs)

    def _scores(self, outputs):
        """The class scores among the outputs of `call`."""
        return outputs

    def _in_batches(self, step, batch_size, *arrays):
        """`step(*batch)` over `batch_size` rows of `arrays` at a time, as NumPy.

        Used by `analyze`. `step` returns a dict of tensors with one row per
        input row; the result holds them concatenated over all the batches.
        A batch shorter than `batch_size` is padded (its last row repeated)
        to the next power of two, at least `MIN_PADDED_ROWS`, or to
        `batch_size`, and the padding's rows dropped from the result: every
        row is computed on its own, and the backends that compile a program
        per input shape (jax's eager ops, tensorflow's compiled routing) meet
        a few shapes instead of one per call. On jax on this project's 2-core
        CPU, each new shape cost an EfficientCapsNet's `analyze` 2.5-4 s of
        compiling, while 16 rows instead of 1 cost it 0.01 s more, a CapsNet's
        0.07 s.
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
