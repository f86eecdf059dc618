"""Training one model the same way with or without a distribution strategy (chapter 3)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

import keras

from utils.models import small_cnn


class EpochTimes(keras.callbacks.Callback):
    """Records the wall time of every epoch in `seconds` (chapter 3)."""

    def __init__(self) -> None:
        super().__init__()
        self.seconds: list[float] = []

    def on_epoch_begin(self, epoch, logs=None):
        self._start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        self.seconds.append(time.perf_counter() - self._start)


def fit_model(
    train_data,
    *,
    strategy=None,
    epochs: int = 2,
    build: Callable[[], keras.Model] = small_cnn,
    learning_rate: float = 0.05,
    validation_data=None,
    steps_per_epoch: int | None = None,
) -> tuple[keras.Model, dict[str, list[float]]]:
    """Build, compile (SGD, cross-entropy on logits, accuracy) and `fit` a model.

    Introduced in chapter 3. With a `strategy`, the model and optimizer are created inside
    `strategy.scope()` (the two-line change); with None, on TensorFlow's default device. The
    history gets an `epoch_seconds` entry with each epoch's wall time.
    """
    scope = strategy.scope() if strategy is not None else contextlib.nullcontext()
    with scope:
        model = build()
        model.compile(
            optimizer=keras.optimizers.SGD(learning_rate),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=["accuracy"],
        )
    timer = EpochTimes()
    history = model.fit(
        train_data, epochs=epochs, validation_data=validation_data, verbose=0, callbacks=[timer],
        steps_per_epoch=steps_per_epoch,
    ).history
    return model, {**history, "epoch_seconds": timer.seconds}
