"""Stopping a run that can no longer learn: `CollapseGuard`, `TrainingCollapsed`.

A capsule's length is squashed into (0, 1), and near length 1 the squash
passes almost no gradient. Under Adam every weight moves by about the
learning rate in the first steps whatever the size of its gradient, and a
capsule sums thousands of inputs (each primary capsule reads 9 x 9 x 256
features, each class capsule thousands of votes): on images whose pixels
are all lit (a folder of coloured shapes on noisy backgrounds) one such
step can push every capsule far past length 1. The margin loss pulls a
wrong class down with weight 0.5, so with few classes it cannot pull them
back, and the run goes on at chance to its last epoch
(docs/guides/your-own-images.md, "When training collapses", has the
measurement). The guard looks after every epoch and stops such a run, or
one stalled at chance, with what it saw and the flag to change.
"""

import keras
import numpy as np

#: Lengths above this pass almost no gradient through the squash (at 0.95
#: the pre-squash norm is 4.4 and d length / d norm 0.02, against 0.5 at 1).
SATURATED = 0.95
#: The share of class-capsule lengths above `SATURATED` that makes a collapse:
#: a model that learns keeps the wrong classes' capsules short.
COLLAPSED_SHARE = 0.99
#: Three epochs at chance, the loss moving by less than this share: stalled.
FLAT_LOSS = 0.01


class TrainingCollapsed(RuntimeError):
    """The run stopped because its model can no longer learn (message: why)."""


def saturated(lengths):
    """Whether (almost) every class capsule in `lengths` `(n, classes)` is long.

    >>> saturated(np.full((4, 3), 0.99)), saturated(np.array([[0.97, 0.05]]))
    (True, False)
    """
    return bool(np.mean(np.asarray(lengths) > SATURATED) >= COLLAPSED_SHARE)


def stalled(history, num_classes):
    """Whether the last three epochs of `history` sat at chance, the loss flat.

    Args:
        history: `{"loss": [...], "accuracy": [...]}`, one value an epoch.
        num_classes: Classes; chance is `1 / num_classes`.
    """
    losses, accuracy = history.get("loss", []), history.get("accuracy", [])
    if len(losses) < 3 or len(accuracy) < 3:
        return False
    chance = 1 / num_classes
    near_chance = chance + 0.5 * (1 - chance) / num_classes
    flat = all(
        abs(after - before) <= FLAT_LOSS * abs(before)
        for before, after in zip(losses[-3:-1], losses[-2:], strict=True)
    )
    return flat and max(accuracy[-3:]) <= near_chance


class CollapseGuard(keras.callbacks.Callback):
    """Stops training with `TrainingCollapsed` when the model cannot learn.

    After every epoch: a capsule model's class-capsule lengths on `images`
    (`saturated`), and any model's training accuracy and loss (`stalled`).
    The message names what it saw, the learning rate and the flag that
    changes it.

    Args:
        images: A few images the lengths are read on (the trainer passes
            held-out ones; nothing is chosen by them).
        num_classes: Classes of the task.
        learning_rate: The run's learning rate, for the message.
        capsules: Whether the model's scores are class-capsule lengths.
    """

    def __init__(self, images, num_classes, learning_rate, capsules=True):
        super().__init__()
        self.images = images
        self.num_classes = num_classes
        self.learning_rate = learning_rate
        self.capsules = capsules
        self.history = {}

    def on_epoch_end(self, epoch, logs=None):
        for name in ("loss", "accuracy"):
            if logs and name in logs:
                self.history.setdefault(name, []).append(float(logs[name]))
        if self.capsules:
            lengths = self.model.predict(self.images, verbose=0)
            if saturated(lengths):
                raise TrainingCollapsed(self._message(epoch, "saturated", lengths))
        if stalled(self.history, self.num_classes):
            raise TrainingCollapsed(self._message(epoch, "stalled"))

    def _message(self, epoch, found, lengths=None):
        smaller = f"--learning-rate {self.learning_rate / 10:g}"
        if found == "stalled":
            losses = " -> ".join(f"{loss:.4f}" for loss in self.history["loss"][-3:])
            what = (
                "training accuracy is at chance "
                f"({self.history['accuracy'][-1]:.1%}, 1 in {self.num_classes}) "
                f"and the loss has stopped moving ({losses})"
            )
            advice = f"Try a smaller learning rate ({smaller}) or another --model."
        else:
            what = (
                "every class capsule is at length 1 (mean "
                f"{np.mean(lengths):.4f} on {len(lengths)} held-out images), "
                "where the squash passes no gradient"
            )
            advice = (
                "The first steps of Adam at learning rate "
                f"{self.learning_rate:g} moved the capsules too far; try {smaller}."
            )
        return (
            f"Training collapsed after epoch {epoch + 1}: {what}, so the rest "
            f"of the run would not learn. {advice}"
        )
