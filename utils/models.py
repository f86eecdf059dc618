"""The small models the chapters train (chapter 1)."""

from __future__ import annotations

import keras


def small_cnn(
    num_classes: int = 10, input_shape: tuple[int, ...] = (28, 28, 1), seed: int = 0
):
    """A two-convolution CNN that outputs logits (use a loss with `from_logits=True`).

    Introduced in chapter 1. Every initializer is seeded, so two calls with the same `seed`
    build identical weights: that is what lets later chapters compare one device with many.
    """

    def init(offset: int) -> keras.initializers.Initializer:
        return keras.initializers.GlorotUniform(seed=seed + offset)

    return keras.Sequential(
        [
            keras.Input(shape=input_shape),
            keras.layers.Conv2D(16, 3, activation="relu", kernel_initializer=init(0)),
            keras.layers.MaxPooling2D(),
            keras.layers.Conv2D(32, 3, activation="relu", kernel_initializer=init(1)),
            keras.layers.MaxPooling2D(),
            keras.layers.Flatten(),
            keras.layers.Dense(num_classes, kernel_initializer=init(2)),
        ],
        name="small_cnn",
    )
