"""The training step of a custom loop under a tf.distribute strategy.

Written in chapter 4 (04_custom_loops.ipynb), in its cells marked `# @save`: edit
them there, re-run the chapter, then run `python -m tools.save_from_chapters`.
"""

import keras
import tensorflow as tf


def make_distributed_step(strategy, model, optimizer, global_batch_size, metrics=()):
    """A `tf.function` training step of a distributed batch; returns the batch's loss.

    Each replica scales its slice's per-example losses by the global batch size, takes
    the gradients of `optimizer.scale_loss(loss)` (the loss itself, except under a
    `LossScaleOptimizer`, chapter 12) and applies them: Keras sums them across replicas.
    Each of `metrics`, made in the strategy's scope, sees the slice's labels and logits.
    """
    loss_object = keras.losses.SparseCategoricalCrossentropy(
        from_logits=True,
        reduction=None,  # one loss per example
    )

    def replica_step(images, labels):
        with tf.GradientTape() as tape:
            logits = model(images, training=True)
            per_example = loss_object(labels, logits)
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
        per_replica_losses = strategy.run(replica_step, args=batch)
        return strategy.reduce("SUM", per_replica_losses, axis=None)

    return step
