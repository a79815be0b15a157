"""The task of several overlapping digits per image (MultiMNIST), on any backbone."""

import inspect

import keras
import numpy as np
from keras import ops

from capsules_keras._checks import check_positive_int
from capsules_keras.inputs import is_array, prepare_image_sets, prepare_label_sets
from capsules_keras.metrics import k_hot, multi_label_metrics, top_k_classes
from capsules_keras.models.capsnet import CapsNetArguments, capsnet_backbone
from capsules_keras.models.classifier import CapsuleClassifier


@keras.saving.register_keras_serializable(package="capsules_keras")
class MultiDigitClassifier(CapsuleClassifier):
    """Images holding several digits of different classes, on any backbone.

    Sabour et al. (2017), section 6 (MultiMNIST): the backbone is the
    one-label task's, with every shape derived from the larger image (36x36
    for MultiMNIST); the task changes:

    ```
    lengths = |v|                                          # (b, 10)
    loss    = margin(T, lengths)                           # T_k = 1 for every digit
              + 0.0005 * sum_d sum((digit_d - decoder(mask(v, label_d)))^2)
    predict = the `digits_per_image` longest capsules
    ```

    Each digit is reconstructed from its own capsule (masked by its true
    label) and compared with that digit ALONE as it sits in the image, so the
    decoder learns to separate the overlapping digits. Evaluation masks by the
    true labels too; `analyze` without labels reconstructs from the longest
    capsules, as the paper's Figure 5 does.

    Targets `y` (see `capsules_keras.data.multi_mnist`): a dict with `"labels"`
    int `(n, digits_per_image)` (different classes per row) and `"digits"`
    `(n, digits_per_image, *image_shape)`; `evaluate` also accepts the labels
    alone (then the loss is the margin loss only). Metrics: `exact_match`
    (all digits among the longest capsules) and `at_least_1`.

    `MultiDigitCapsNet` is this task on the paper's backbone; any other
    composes the same way, e.g. Efficient-CapsNet's:

    >>> from capsules_keras.models import CapsuleBackbone, EfficientEncoder
    >>> encoder = EfficientEncoder((36, 36, 1))
    >>> backbone = CapsuleBackbone(encoder, routing="self_attention")
    >>> MultiDigitClassifier(backbone).count_encoder_params()  # 13x13 depthwise
    173088

    Args:
        backbone: A `CapsuleBackbone`.
        digits_per_image: How many digits each image holds (2).
        **kwargs: `CapsuleClassifier`'s (`reconstruction_weight`,
            `decoder_units`, and `keras.Model`'s).

    Reference: Sabour et al. (2017), section 6 and Figure 5.
    """

    def __init__(self, backbone, *, digits_per_image=2, **kwargs):
        check_positive_int("digits_per_image", digits_per_image)
        if digits_per_image >= backbone.num_classes:
            raise ValueError(
                "`digits_per_image` must be smaller than `num_classes` "
                f"({backbone.num_classes}). "
                f"Received: digits_per_image={digits_per_image}"
            )
        super().__init__(backbone, **kwargs)
        self.digits_per_image = digits_per_image

    @staticmethod
    def _split_targets(y):
        if isinstance(y, dict):
            return y["labels"], y.get("digits")
        return y, None

    def _task_loss(self, x, y, y_pred, sample_weight, training):
        labels, digits = self._split_targets(y)
        targets = k_hot(labels, self.num_classes, y_pred["lengths"].dtype)
        margin = self.margin_loss(targets, y_pred["lengths"], sample_weight)
        if not self.reconstruction_weight or digits is None:
            return self._logged_loss(margin)
        # Each digit reconstructed from its own capsule, the errors summed.
        reconstruction = sum(
            self.reconstruction_loss(
                digits[:, d],
                self.reconstruct(y_pred["capsules"], labels[:, d]),
                sample_weight,
            )
            for d in range(self.digits_per_image)
        )
        return self._logged_loss(margin, reconstruction)

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        """Metrics see the labels and the capsule lengths."""
        return super().compute_metrics(x, self._split_targets(y)[0], y_pred)

    def _default_metrics(self):
        return multi_label_metrics(self.digits_per_image)

    def _prepare_labels(self, labels, num_images, name):
        return prepare_label_sets(
            labels, self.num_classes, self.digits_per_image, num_images, name
        )

    def _prepare_targets(self, y, num_images):
        if isinstance(y, dict):
            unknown = sorted(set(y) - {"labels", "digits"})
            if "labels" not in y or unknown:
                raise ValueError(
                    "A dict `y` holds 'labels' and optionally 'digits'. "
                    f"Received: keys {sorted(y)}"
                )
            prepared = {"labels": self._prepare_labels(y["labels"], num_images, "y")}
            if "digits" in y:
                prepared["digits"] = prepare_image_sets(
                    y["digits"],
                    self.image_shape,
                    self.digits_per_image,
                    num_images,
                    "y['digits']",
                )
            return prepared
        return super()._prepare_targets(y, num_images)

    def fit(self, x=None, y=None, *args, **kwargs):
        """`fit`; array targets need the digits unless the loss skips them."""
        if self.reconstruction_weight and is_array(x) and not isinstance(y, dict):
            raise ValueError(
                f"{type(self).__name__} learns to reconstruct each digit alone: pass "
                "y={'labels': ..., 'digits': ...} (see "
                "capsules_keras.data.multi_mnist), or build it with "
                f"reconstruction_weight=0. Received: y of type {type(y).__name__}"
            )
        return super().fit(x, y, *args, **kwargs)

    def predicted_classes(self, lengths):
        """The `digits_per_image` longest capsules, longest first, `(n, k)`."""
        order = np.argsort(-np.asarray(lengths), axis=-1, kind="stable")
        return order[:, : self.digits_per_image]

    def _reconstructions(self, capsules, labels):
        """`(n, digits_per_image, *image_shape)`: each digit from its capsule."""
        if labels is None:
            labels = top_k_classes(self.length(capsules), self.digits_per_image)
        return ops.stack(
            [
                self.reconstruct(capsules, labels[:, d])
                for d in range(self.digits_per_image)
            ],
            axis=1,
        )

    def get_config(self):
        return {**super().get_config(), "digits_per_image": self.digits_per_image}


#: `capsnet_backbone`'s keyword arguments, which `MultiDigitCapsNet` takes too.
_CAPSNET_ARGUMENTS = tuple(inspect.signature(capsnet_backbone).parameters)


@keras.saving.register_keras_serializable(package="capsules_keras")
class MultiDigitCapsNet(CapsNetArguments, MultiDigitClassifier):
    """The paper's CapsNet on images of several overlapping digits (MultiMNIST).

    `MultiDigitClassifier` on `capsnet_backbone`, with every shape derived
    from the 36x36 image:

    >>> MultiDigitCapsNet().count_params()
    11361808

    Args:
        image_shape: `(height, width, channels)`; MultiMNIST's is (36, 36, 1).
        num_classes: Number of classes.
        digits_per_image: How many digits each image holds (2).
        **kwargs: `CapsNet`'s other arguments (`routing_iterations`,
            `conv_filters`, `primary_capsules`, `reconstruction_weight`, ...).

    Reference: Sabour et al. (2017), section 6 and Figure 5.
    """

    def __init__(
        self, image_shape=(36, 36, 1), num_classes=10, *, digits_per_image=2, **kwargs
    ):
        arguments = {k: kwargs.pop(k) for k in _CAPSNET_ARGUMENTS if k in kwargs}
        backbone = capsnet_backbone(image_shape, num_classes, **arguments)
        super().__init__(backbone, digits_per_image=digits_per_image, **kwargs)
