"""utils.custom_step, chapter 4's step saved from its page, on two logical CPUs (in a fresh
process: TensorFlow configures its devices once per process)."""

import pytest

from tests.helpers import run_fresh


@pytest.mark.full  # starts Python programs: the full proof's
def test_one_step_is_the_one_device_sgd_step_on_the_global_batch():
    """The step returns the global batch's mean loss, updates the metrics with every
    replica's slice, and applies the one-device SGD update (gradients summed once), with
    and without a LossScaleOptimizer (whose scaled gradients it must take)."""
    result = run_fresh(
        """
        from utils import setup_devices
        devices = setup_devices(2, verbose=False)
        import keras
        import numpy as np
        import tensorflow as tf
        from utils import load_mnist_subset, max_abs_difference, model_and_optimizer
        from utils.custom_step import make_distributed_step
        (x, y), _ = load_mnist_subset()
        batch = (x[:64], y[:64])
        plain, plain_optimizer = model_and_optimizer(None, learning_rate=0.1)
        loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        with tf.GradientTape() as tape:
            logits = plain(batch[0], training=True)
            plain_loss = loss_fn(batch[1], logits)
        plain_accuracy = np.mean(np.argmax(logits, axis=1) == batch[1])
        grads = tape.gradient(plain_loss, plain.trainable_variables)
        plain_optimizer.apply_gradients(zip(grads, plain.trainable_variables))

        strategy = tf.distribute.MirroredStrategy(devices=devices)
        data = tf.data.Dataset.from_tensors(batch)
        for scaled in (False, True):  # the loss scale of mixed float16 (chapter 13)
            def sgd():
                sgd = keras.optimizers.SGD(0.1)
                return keras.optimizers.LossScaleOptimizer(sgd) if scaled else sgd
            model, optimizer = model_and_optimizer(strategy, make_optimizer=sgd)
            with strategy.scope():
                accuracy = keras.metrics.SparseCategoricalAccuracy()
            step = make_distributed_step(strategy, model, optimizer, 64, [accuracy])
            loss = step(next(iter(strategy.experimental_distribute_dataset(data))))
            assert abs(float(loss) - float(plain_loss)) < 1e-5, (scaled, float(loss))
            assert int(accuracy.count.numpy()) == 64  # both slices counted
            assert abs(float(accuracy.result()) - plain_accuracy) < 1e-6
            gap = max_abs_difference(model.get_weights(), plain.get_weights())
            assert gap < 1e-6, (scaled, gap)
        print("OK")
        """
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("OK")
