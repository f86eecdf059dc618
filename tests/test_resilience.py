"""Resuming after an interruption, restoring on another device count, and determinism."""

import pytest

from tests.helpers import run_fresh
from utils.resilience import InterruptAt


def test_interrupt_at_rejects_negative_positions():
    with pytest.raises(ValueError, match="count from 0"):
        InterruptAt(-1, 0)


def test_interrupted_then_resumed_equals_uninterrupted_and_restores_across_device_counts():
    result = run_fresh(
        """
        import tempfile
        from utils import setup_devices
        devices = setup_devices(2, verbose=False)
        import keras
        import numpy as np
        import tensorflow as tf
        from utils import load_mnist_subset, make_dataset, max_abs_difference, small_cnn
        from utils.resilience import InterruptAt, SimulatedInterruption

        (x, y), _ = load_mnist_subset()
        data = make_dataset(x[:640], y[:640], 64, shuffle=False)
        strategy = tf.distribute.MirroredStrategy(devices=devices)

        def build():
            with strategy.scope():
                model = small_cnn()
                model.compile(optimizer=keras.optimizers.SGD(0.05),
                              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
            return model

        uninterrupted = build()
        uninterrupted.fit(data, epochs=3, verbose=0)
        backup = tempfile.mkdtemp()
        try:
            build().fit(data, epochs=3, verbose=0,
                        callbacks=[keras.callbacks.BackupAndRestore(backup), InterruptAt(1, 4)])
            raise AssertionError("not interrupted")
        except SimulatedInterruption:
            pass
        resumed = build()
        resumed.fit(data, epochs=3, verbose=0, callbacks=[keras.callbacks.BackupAndRestore(backup)])
        print("RESUME", max_abs_difference(uninterrupted.get_weights(), resumed.get_weights()))

        # 2 devices -> 1 (no strategy) and 1 -> 2
        path = tempfile.mkdtemp() + "/model.weights.h5"
        uninterrupted.save_weights(path)
        single = small_cnn(seed=5)
        single.load_weights(path)
        print("TWO_TO_ONE", np.abs(single.predict(x[:64], verbose=0)
                                   - uninterrupted.predict(x[:64], verbose=0)).max())
        single.save_weights(path)
        with strategy.scope():
            mirrored = small_cnn(seed=6)
        mirrored.load_weights(path)
        print("ONE_TO_TWO", max_abs_difference(single.get_weights(), mirrored.get_weights()))
        """
    )
    assert result.returncode == 0, result.stderr[-3000:]
    values = dict(line.split() for line in result.stdout.splitlines() if line.split()[0].isupper())
    assert float(values["RESUME"]) == 0.0
    assert float(values["TWO_TO_ONE"]) < 1e-6
    assert float(values["ONE_TO_TWO"]) == 0.0


DETERMINISTIC_RUN = """
import hashlib
import keras
import numpy as np
import tensorflow as tf
from utils import load_mnist_subset
keras.utils.set_random_seed(1234)          # Python, NumPy and TensorFlow seeds
tf.config.experimental.enable_op_determinism()
(x, y), _ = load_mnist_subset()
model = keras.Sequential([keras.Input((28, 28, 1)), keras.layers.Conv2D(8, 3, activation="relu"),
                          keras.layers.Flatten(), keras.layers.Dropout(0.3), keras.layers.Dense(10)])
model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
data = tf.data.Dataset.from_tensor_slices((x[:1024], y[:1024])).shuffle(1024).batch(64)
model.fit(data, epochs=2, verbose=0)
print("WEIGHTS", hashlib.sha256(b"".join(w.tobytes() for w in model.get_weights())).hexdigest())
"""


def test_seeds_and_op_determinism_make_two_runs_identical():
    """Random initialisation, shuffling and dropout, all seeded: two processes, same bits."""
    outputs = [run_fresh(DETERMINISTIC_RUN) for _ in range(2)]
    for result in outputs:
        assert result.returncode == 0, result.stderr[-3000:]
    first, second = (r.stdout.split("WEIGHTS")[1].strip() for r in outputs)
    assert first == second
