"""Interrupting training on purpose, to prove that it resumes correctly (chapter 8)."""

from __future__ import annotations

import keras


class SimulatedInterruption(RuntimeError):
    """Raised by `InterruptAt`: stands in for a lost Colab session or a killed job."""


class InterruptAt(keras.callbacks.Callback):
    """Stops `fit` by raising `SimulatedInterruption` after batch `batch` of epoch `epoch`.

    Both are counted from 0, as Keras counts them. The exception leaves the model as it was
    at that moment, exactly like a crash would, so what a checkpoint restores can be checked.
    """

    def __init__(self, epoch: int, batch: int) -> None:
        super().__init__()
        if min(epoch, batch) < 0:
            raise ValueError(
                f"InterruptAt: epoch and batch count from 0; got {epoch}, {batch}."
            )
        self.target = (epoch, batch)
        self._epoch = 0

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        if (self._epoch, batch) == self.target:
            raise SimulatedInterruption(
                f"training interrupted after epoch {self._epoch}, batch {batch}"
            )
