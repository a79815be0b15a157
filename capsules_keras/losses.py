"""The losses: margin loss on capsule lengths, reconstruction loss, and the
spread loss of matrix capsules with its margin schedule."""

import keras
from keras import ops

from capsules_keras._checks import check_positive_number
from capsules_keras.ops import labels_to_one_hot


def margin_loss(y_true, y_pred, m_plus=0.9, m_minus=0.1, lambda_=0.5):
    """Per-sample margin loss, summed over classes.

    ```
    L_k = T_k * max(0, m_plus - |v_k|)^2
          + lambda_ * (1 - T_k) * max(0, |v_k| - m_minus)^2
    loss = sum_k L_k
    ```

    Both hinges are SQUARED, as in the paper.

    Args:
        y_true: Integer labels `(batch_size,)` or one-hot
            `(batch_size, num_classes)`.
        y_pred: Capsule lengths `(batch_size, num_classes)`.
        m_plus: A present class is not penalised above this length.
        m_minus: An absent class is not penalised below this length.
        lambda_: Down-weighting of the absent classes.

    Returns:
        Tensor of shape `(batch_size,)`.

    Reference: Sabour et al. (2017), equation 4.
    """
    y_pred = ops.convert_to_tensor(y_pred)
    targets = labels_to_one_hot(
        ops.convert_to_tensor(y_true), y_pred.shape[-1], dtype=y_pred.dtype
    )
    present = targets * ops.square(ops.relu(m_plus - y_pred))
    absent = lambda_ * (1.0 - targets) * ops.square(ops.relu(y_pred - m_minus))
    return ops.sum(present + absent, axis=-1)


def reconstruction_loss(images, reconstructions):
    """Per-sample SUM of squared pixel errors.

    `loss[b] = sum_pixels (images[b] - reconstructions[b])^2`

    The paper scales it by 0.0005 so that it does not dominate the margin
    loss; for 28x28 images that equals 0.392 times the mean squared error.

    Args:
        images: `(batch_size, ...)` targets.
        reconstructions: Decoder outputs of the same number of values per
            sample (they are flattened before the comparison).

    Returns:
        Tensor of shape `(batch_size,)`.
    """
    images = ops.convert_to_tensor(images)
    reconstructions = ops.convert_to_tensor(reconstructions)
    flat_images = ops.reshape(images, (ops.shape(images)[0], -1))
    flat_reconstructions = ops.reshape(
        reconstructions, (ops.shape(reconstructions)[0], -1)
    )
    error = flat_images - ops.cast(flat_reconstructions, flat_images.dtype)
    return ops.sum(ops.square(error), axis=-1)


@keras.saving.register_keras_serializable(package="capsules_keras")
class MarginLoss(keras.losses.Loss):
    """The margin loss of Sabour et al. (2017) as a Keras `Loss`.

    `loss = mean over the batch of sum_k [T_k max(0, m+ - |v_k|)^2
    + lambda (1 - T_k) max(0, |v_k| - m-)^2]`

    Args:
        m_plus: Length above which a present class costs nothing (0.9).
        m_minus: Length below which an absent class costs nothing (0.1).
        lambda_: Down-weighting of absent classes (0.5), which keeps the
            early training from shrinking all capsule lengths.
        reduction: Keras reduction over the batch; the paper's mean by default.
        name: Name of the loss.
        dtype: dtype of the computation.

    Accepts integer labels `(batch_size,)` or one-hot
    `(batch_size, num_classes)` as `y_true`, and capsule lengths
    `(batch_size, num_classes)` as `y_pred`.

    >>> loss = MarginLoss()
    >>> round(float(loss(keras.ops.array([0]), keras.ops.array([[0.9, 0.1]]))), 4)
    0.0
    >>> round(float(loss(keras.ops.array([0]), keras.ops.array([[0.5, 0.6]]))), 4)
    0.285

    Reference: Sabour et al. (2017), equation 4.
    """

    def __init__(
        self,
        m_plus=0.9,
        m_minus=0.1,
        lambda_=0.5,
        reduction="sum_over_batch_size",
        name="margin_loss",
        dtype=None,
    ):
        super().__init__(name=name, reduction=reduction, dtype=dtype)
        for arg_name, value in (
            ("m_plus", m_plus),
            ("m_minus", m_minus),
            ("lambda_", lambda_),
        ):
            check_positive_number(arg_name, value)
        if not m_minus < m_plus:
            raise ValueError(
                "`m_minus` must be smaller than `m_plus`. "
                f"Received: m_plus={m_plus}, m_minus={m_minus}"
            )
        self.m_plus = m_plus
        self.m_minus = m_minus
        self.lambda_ = lambda_

    def call(self, y_true, y_pred):
        return margin_loss(
            y_true,
            y_pred,
            m_plus=self.m_plus,
            m_minus=self.m_minus,
            lambda_=self.lambda_,
        )

    def get_config(self):
        config = {
            "m_plus": self.m_plus,
            "m_minus": self.m_minus,
            "lambda_": self.lambda_,
        }
        return {**super().get_config(), **config}


@keras.saving.register_keras_serializable(package="capsules_keras")
class ReconstructionLoss(keras.losses.Loss):
    """Per-image sum of squared errors, averaged over the batch.

    `loss = mean over the batch of sum_pixels (image - reconstruction)^2`

    `y_true` are the images, `y_pred` the decoder's reconstructions (any shape
    with the same number of values per image). The paper adds it to the margin
    loss with weight 0.0005.

    Args:
        reduction: Keras reduction over the batch; the mean by default.
        name: Name of the loss.
        dtype: dtype of the computation.
    """

    def __init__(
        self, reduction="sum_over_batch_size", name="reconstruction_loss", dtype=None
    ):
        super().__init__(name=name, reduction=reduction, dtype=dtype)

    def call(self, y_true, y_pred):
        return reconstruction_loss(y_true, y_pred)


def spread_loss(y_true, y_pred, margin=0.2):
    """Per-sample spread loss, summed over the wrong classes.

    `L = sum_{i != t} max(0, m - (a_t - a_i))^2`

    The activation `a_t` of the target class must exceed every other
    activation `a_i` by the margin `m`.

    Args:
        y_true: Integer labels `(batch_size,)` or one-hot
            `(batch_size, num_classes)`.
        y_pred: Class activations `(batch_size, num_classes)`.
        margin: `m`, a number or a scalar tensor / variable.

    Returns:
        Tensor of shape `(batch_size,)`.

    Reference: Hinton, Sabour & Frosst (2018), section 3, equation 3.
    """
    y_pred = ops.convert_to_tensor(y_pred)
    targets = labels_to_one_hot(
        ops.convert_to_tensor(y_true), y_pred.shape[-1], dtype=y_pred.dtype
    )
    a_t = ops.sum(targets * y_pred, axis=-1, keepdims=True)  # (b, 1)
    margin = ops.cast(margin, y_pred.dtype)
    # max(0, m - (a_t - a_i))^2, for the wrong classes i only
    losses = (1.0 - targets) * ops.square(ops.relu(margin - (a_t - y_pred)))
    return ops.sum(losses, axis=-1)


@keras.saving.register_keras_serializable(package="capsules_keras")
class SpreadLoss(keras.losses.Loss):
    """The spread loss of matrix capsules as a Keras `Loss`.

    `loss = mean over the batch of sum_{i != t} max(0, m - (a_t - a_i))^2`

    The paper starts with a margin of 0.2 and raises it linearly to 0.9
    during training, which avoids dead capsules in the early layers. To
    change the margin while a compiled model trains, pass a non-trainable
    `keras.Variable` as `margin` that the MODEL tracks (an attribute of the
    model; the jax backend passes only the model's variables into its
    compiled step) and raise it with `SpreadMarginSchedule`.
    `MatrixCapsNet` does both: its `spread_margin` variable is this loss's
    margin. A plain number is a fixed margin.

    Args:
        margin: `m`: a number in (0, 1], or a scalar variable.
        reduction: Keras reduction over the batch; the mean by default.
        name: Name of the loss.
        dtype: dtype of the computation.

    >>> loss = SpreadLoss(margin=0.2)
    >>> round(float(loss(keras.ops.array([0]), keras.ops.array([[0.5, 0.4]]))), 4)
    0.01

    Reference: Hinton, Sabour & Frosst (2018), section 3.
    """

    def __init__(
        self,
        margin=0.2,
        reduction="sum_over_batch_size",
        name="spread_loss",
        dtype=None,
    ):
        super().__init__(name=name, reduction=reduction, dtype=dtype)
        if not isinstance(margin, keras.Variable):
            _check_margin("margin", margin)
        self.margin = margin

    def call(self, y_true, y_pred):
        return spread_loss(y_true, y_pred, self.margin)

    def get_config(self):
        margin = float(ops.convert_to_numpy(self.margin))
        return {**super().get_config(), "margin": margin}


def _check_margin(name, value):
    check_positive_number(name, value)
    if value > 1:
        raise ValueError(
            f"`{name}` must be in (0, 1]: activations lie in (0, 1). "
            f"Received: {name}={value!r}"
        )


@keras.saving.register_keras_serializable(package="capsules_keras")
class SpreadMarginSchedule(keras.callbacks.Callback):
    """Raises the spread-loss margin linearly, once per epoch.

    `margin(epoch) = min(stop, start + step * epoch)`    (epochs from 0)

    Sets `model.spread_margin` (a `MatrixCapsNet`'s, or any model's
    non-trainable scalar variable of that name) at the start of every epoch.
    The defaults reach the paper's final 0.9 after 7 epochs.

    Args:
        start: The margin of the first epoch (the paper's 0.2).
        stop: The largest margin (the paper's 0.9).
        step: The increase per epoch.

    >>> SpreadMarginSchedule().margin(3)
    0.5

    Reference: Hinton, Sabour & Frosst (2018), section 3.
    """

    def __init__(self, start=0.2, stop=0.9, step=0.1):
        super().__init__()
        for name, value in (("start", start), ("stop", stop)):
            _check_margin(name, value)
        check_positive_number("step", step)
        if start > stop:
            raise ValueError(
                f"`start` must not exceed `stop`. Received: start={start}, stop={stop}"
            )
        self.start, self.stop, self.step = start, stop, step

    def margin(self, epoch):
        """The margin of epoch `epoch` (counted from 0)."""
        return round(min(self.stop, self.start + self.step * epoch), 10)

    def on_epoch_begin(self, epoch, logs=None):
        variable = getattr(self.model, "spread_margin", None)
        if not isinstance(variable, keras.Variable):
            raise ValueError(
                "SpreadMarginSchedule needs a model with a `spread_margin` "
                f"variable, such as MatrixCapsNet. Received: a model of type "
                f"{type(self.model).__name__}"
            )
        variable.assign(self.margin(epoch))

    def get_config(self):
        return {"start": self.start, "stop": self.stop, "step": self.step}
