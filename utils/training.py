"""Training one model the same way with or without a distribution strategy (chapter 3)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import keras
import tensorflow as tf

from utils.models import small_cnn

DEFAULT_LEARNING_RATE = 0.05  # plain SGD for the book's CNN on the bundled digits


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
    learning_rate: float
    | keras.optimizers.schedules.LearningRateSchedule = DEFAULT_LEARNING_RATE,
    make_optimizer: Callable[[], keras.optimizers.Optimizer] | None = None,
    validation_data=None,
    steps_per_epoch: int | None = None,
    callbacks: Sequence[keras.callbacks.Callback] = (),
) -> tuple[keras.Model, dict[str, list[float]]]:
    """Build, compile (SGD, cross-entropy on logits, accuracy) and `fit` a model.

    Introduced in chapter 3. With a `strategy`, the model and optimizer are created inside
    `strategy.scope()` (the two-line change); with None, on TensorFlow's default device. The
    history gets an `epoch_seconds` entry with each epoch's wall time. `make_optimizer`, when
    given, replaces `SGD(learning_rate)` (chapter 13 passes one with
    `gradient_accumulation_steps`); `callbacks` are added to the epoch timer (chapter 19).

    XLA is off in every case (`jit_compile=False`): Keras's default, "auto", turns it on for
    a no-strategy `fit` on a machine with a GPU and off under any tf.distribute strategy, so
    a comparison of the two would compare XLA with non-XLA.
    """
    model, optimizer = model_and_optimizer(
        strategy,
        build=build,
        learning_rate=learning_rate,
        make_optimizer=make_optimizer,
    )
    with (strategy or tf.distribute.get_strategy()).scope():
        model.compile(
            optimizer=optimizer,
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=["accuracy"],
            jit_compile=False,
        )
    timer = EpochTimes()
    history = model.fit(
        train_data,
        epochs=epochs,
        validation_data=validation_data,
        verbose=0,
        callbacks=[timer, *callbacks],
        steps_per_epoch=steps_per_epoch,
        shuffle=False,  # a dataset shuffles itself; `fit`'s default True warns (chapter 3)
    ).history
    return model, {**history, "epoch_seconds": timer.seconds}


def model_and_optimizer(
    strategy=None,
    *,
    build: Callable[[], keras.Model] = small_cnn,
    learning_rate: float
    | keras.optimizers.schedules.LearningRateSchedule = DEFAULT_LEARNING_RATE,
    make_optimizer: Callable[[], keras.optimizers.Optimizer] | None = None,
) -> tuple[keras.Model, keras.optimizers.Optimizer]:
    """A fresh model and its optimizer, both made inside `strategy.scope()`, for a custom loop.

    Introduced in chapter 4. The optimizer is
    `SGD(learning_rate)` unless `make_optimizer` returns another, and it is built on the
    model's trainable variables: a custom distributed loop needs that before its first step.
    With no strategy, TensorFlow's default one (no distribution) is used.
    """
    strategy = strategy or tf.distribute.get_strategy()
    with strategy.scope():
        model = build()
        optimizer = (
            make_optimizer() if make_optimizer else keras.optimizers.SGD(learning_rate)
        )
        optimizer.build(model.trainable_variables)
    return model, optimizer
