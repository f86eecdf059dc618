"""The training step of a custom loop under a tf.distribute strategy.

Written in chapter 4 (04_custom_loops.ipynb), in its cells marked `# @save`: edit them
there, re-run the chapter, then run `python -m tools.save_from_chapters`.
"""

import keras
import tensorflow as tf


def make_distributed_step(strategy, model, optimizer, global_batch_size, metrics=()):
    """A `tf.function` training step of a distributed batch; returns the batch's loss.
    Build `optimizer` before the first call; make `metrics` in the strategy's scope."""
    per_example_loss = keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, reduction=None
    )

    def replica_step(images, labels):
        with tf.GradientTape() as tape:
            logits = model(images, training=True)
            per_example = per_example_loss(labels, logits)
            loss = tf.nn.compute_average_loss(
                per_example, global_batch_size=global_batch_size
            )
            scaled = optimizer.scale_loss(loss)  # on the tape: its gradient is recorded
        gradients = tape.gradient(scaled, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))  # summed
        for metric in metrics:
            metric.update_state(labels, logits)
        return loss

    @tf.function
    def step(batch):
        return strategy.reduce("SUM", strategy.run(replica_step, args=batch), axis=None)

    return step
