"""A working re-creation of the removed `keras.utils.multi_gpu_model`, for old code.

Written in the appendix (appendix_multi_gpu_model.ipynb), in its cells marked `# @save`:
edit them there, re-run the chapter, then run `python -m tools.save_from_chapters`.
"""

from collections.abc import Sequence

import keras
import tensorflow as tf


class ParallelModel(keras.Model):
    """The template model replicated over `devices` by batch slicing."""

    def __init__(
        self, template: keras.Model, devices: Sequence[str], merge_device: str
    ):
        super().__init__(name=f"parallel_{template.name}")
        self.template = template  # one set of weights, read by every device
        self.devices = list(devices)
        self.merge_device = merge_device

    def call(self, inputs, training=None):
        parts = len(self.devices)
        batch = tf.shape(inputs)[0]
        tf.debugging.assert_greater_equal(
            batch,
            parts,
            message=f"multi_gpu_model: a batch must hold at least one example per "
            f"device ({parts}); use a larger batch_size",
        )
        size = batch // parts
        outputs = []
        for index, device in enumerate(self.devices):
            start = index * size
            # like the original: the last device also takes an uneven batch's remainder
            stop = batch if index == parts - 1 else start + size
            with tf.device(device):
                outputs.append(self.template(inputs[start:stop], training=training))
        with tf.device(self.merge_device):
            return tf.concat(outputs, axis=0)


def multi_gpu_model(
    model: keras.Model, devices: Sequence[str], *, merge_device: str = "/cpu:0"
) -> ParallelModel:
    """Return a model that runs `model` on every device in `devices`, one batch slice
    each. It shares `model`'s weights: train the wrapper, save `model`."""
    if not isinstance(model, keras.Model):
        raise TypeError(
            f"multi_gpu_model: model must be a keras.Model; got {type(model).__name__}."
        )
    devices = list(devices)
    if len(devices) < 2 or len(set(devices)) != len(devices):
        raise ValueError(
            f"multi_gpu_model: give at least 2 distinct devices (the original required "
            f"gpus >= 2); got {devices}. For one device, use the model itself."
        )
    return ParallelModel(model, devices, merge_device)
