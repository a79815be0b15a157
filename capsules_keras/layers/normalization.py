"""Batch normalisation that trains in one fused kernel on torch."""

import keras


@keras.saving.register_keras_serializable(package="capsules_keras")
class BatchNormalization(keras.layers.BatchNormalization):
    """`keras.layers.BatchNormalization`, with torch's fused kernel in training.

    The same layer, arguments, weights and results as Keras' own (it keeps
    its class name, so the weights of a model built with either load into
    the other). Only where Keras' version is slow does it compute
    differently: training on torch, where Keras computes the batch's
    moments and the normalisation as separate tensor operations, forward
    and backward. Here torch's `batch_norm` computes them in one kernel
    each way, and the moving statistics are updated from its batch
    statistics exactly as Keras updates them (the biased variance, Keras'
    `momentum`).

    Backend-specific for a measured reason: `EfficientCapsNet` (four of
    these) trains faster on torch with it than with Keras' computation
    (docs/design-decisions.md, "Fused batch normalisation on torch"). On
    jax and tensorflow this layer is Keras' own.

    Everything else (inference, a frozen layer, masks, renormalisation,
    float16 and bfloat16, one value per channel) is Keras' own computation
    on every backend.
    """

    def call(self, inputs, training=None, mask=None):
        if not self._fused(inputs, training, mask):
            return super().call(inputs, training=training, mask=mask)
        import torch  # already imported by Keras' torch backend

        channels_first = torch.movedim(inputs, self.axis, 1)
        num_channels = channels_first.shape[1]
        # torch writes the batch's mean and its unbiased variance into these
        # with momentum 1; Keras' moving variance takes the biased one.
        mean = torch.zeros(num_channels, dtype=inputs.dtype, device=inputs.device)
        variance = torch.zeros_like(mean)
        outputs = torch.nn.functional.batch_norm(
            channels_first,
            mean,
            variance,
            weight=self.gamma.value if self.scale else None,
            bias=self.beta.value if self.center else None,
            training=True,
            momentum=1.0,
            eps=self.epsilon,
        )
        count = channels_first.numel() // num_channels
        variance = variance * ((count - 1) / count)
        self.moving_mean.assign(
            self.moving_mean * self.momentum + mean * (1.0 - self.momentum)
        )
        self.moving_variance.assign(
            self.moving_variance * self.momentum + variance * (1.0 - self.momentum)
        )
        return torch.movedim(outputs, 1, self.axis)

    def _fused(self, inputs, training, mask):
        """Whether this call trains on torch's fused kernel."""
        return (
            keras.backend.backend() == "torch"
            and bool(training)
            and self.trainable
            and mask is None
            and not self.renorm
            and not self.synchronized
            and keras.backend.standardize_dtype(inputs.dtype) == "float32"
            and self.compute_dtype == "float32"
            and inputs.numel() > inputs.shape[self.axis]
        )
