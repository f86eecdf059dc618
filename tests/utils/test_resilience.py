"""utils.resilience. What it is for (an interrupted `fit` resumed with BackupAndRestore equals
the uninterrupted run; weights restore across device counts; seeds and op determinism repeat a
run bit for bit) is asserted by chapter 8 under nbval, so it is not trained again here."""

import pytest

from utils.resilience import InterruptAt, SimulatedInterruption


def test_interrupt_at_rejects_negative_positions():
    with pytest.raises(ValueError, match="count from 0"):
        InterruptAt(-1, 0)


def test_interrupt_at_stops_training_after_the_given_epoch_and_batch():
    callback = InterruptAt(1, 2)
    for epoch, batch in [(0, 2), (1, 0), (1, 1)]:
        callback.on_epoch_begin(epoch)
        callback.on_train_batch_end(batch)
    with pytest.raises(SimulatedInterruption, match="after epoch 1, batch 2"):
        callback.on_train_batch_end(2)
