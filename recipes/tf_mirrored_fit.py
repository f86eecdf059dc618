"""Train a small CNN with MirroredStrategy and Keras `fit`.

Launch (the program uses every GPU it sees, or 2 simulated CPU replicas without one):

    1 GPU:             python recipes/tf_mirrored_fit.py --epochs 10
    8 GPUs, 1 machine: python recipes/tf_mirrored_fit.py --epochs 40
                       (CUDA_VISIBLE_DEVICES=0,1,2,3 picks GPUs; the global batch follows;
                       the 4,500 training digits are 8 steps an epoch at 64 x 8)
    2 machines:        MirroredStrategy is one machine, and Keras 3 `fit` fails under
                       MultiWorkerMirroredStrategy (keras-team/keras#20585): use
                       recipes/tf_multiworker.py (custom loop) or recipes/keras_jax.py.

The global batch is --batch-per-device x devices; the learning rate follows the linear
rule, --base-lr x global batch / --base-batch, reached after --warmup-steps of linear
warm-up. After a crash, run the same command again: `BackupAndRestore` (--out/backup)
restores the weights, the optimizer (its step count too, so the warm-up does not restart)
and the epoch counter, and `fit` continues with the next epoch. It saves at the end of each
epoch, so the interrupted epoch is trained again from its start, and the resumed epochs are
shuffled in another order than an uninterrupted run would have used (the shuffle's state is
not saved): an equally valid run, not the same bits. recipes/tf_custom_loop.py resumes
mid-epoch, exactly.

Chapters: 3 (fit with MirroredStrategy), 8 (input pipeline), 9 (BackupAndRestore), 12
(linear LR rule, warm-up, mixed precision).
"""

from __future__ import annotations

import argparse
import os
import signal
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's C++ info lines
# recipes/tf_common.py and recipes/data.py: copy both beside this file
from tf_common import (  # noqa: E402
    add_tf_flags,
    base_parser,
    build_model,
    check_args,
    setup_mirrored_devices,
    setup_training,
    split,
    step_timer,
    warmup_schedule,
    write_results,
)

RECIPE = "tf_mirrored_fit"


def parse_args(argv=None) -> argparse.Namespace:
    """The command line (see --help)."""
    parser = base_parser(__doc__, "runs/tf_mirrored_fit", "backup, weights")
    add_tf_flags(parser)
    parser.add_argument("--kill-after-epoch", type=int, help=argparse.SUPPRESS)  # tests
    args = parser.parse_args(argv)
    return check_args(args, ("epochs", "batch_per_device", "base_batch", "cpu_devices"))


def main(argv=None) -> None:
    args = parse_args(argv)
    (x_train, y_train), (x_test, y_test), num_classes = split(args)

    import keras
    import tensorflow as tf

    devices, device_type = setup_mirrored_devices(tf, args)
    strategy = tf.distribute.MirroredStrategy(devices)
    replicas = strategy.num_replicas_in_sync
    global_batch, precision, peak_lr, warmup_steps = setup_training(
        tf, keras, args, replicas, len(x_train)
    )

    train_data = (
        tf.data.Dataset.from_tensor_slices((x_train, y_train))
        .shuffle(len(x_train), seed=args.seed)  # a new order each epoch
        .batch(global_batch, drop_remainder=True)  # equal slices for every replica
        .prefetch(tf.data.AUTOTUNE)
    )
    test_data = tf.data.Dataset.from_tensor_slices((x_test, y_test)).batch(global_batch)
    with strategy.scope():
        model = build_model(keras, num_classes, args.seed)
        model.compile(
            # compile wraps it in a LossScaleOptimizer under mixed_float16
            optimizer=keras.optimizers.SGD(
                warmup_schedule(keras, peak_lr, warmup_steps), momentum=0.9
            ),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=["accuracy"],
            jit_compile=False,  # what "auto" picks under a strategy anyway
            steps_per_execution=1,  # > 1 fails under MirroredStrategy (keras#19246)
        )

    class Progress(step_timer(keras)):
        """Where fit (re)started (after BackupAndRestore's restore), and step times."""

        def on_epoch_end(self, epoch, logs=None):
            if epoch + 1 == args.kill_after_epoch:  # a preemption, for the tests
                os.kill(os.getpid(), signal.SIGKILL)

    progress = Progress()
    history = model.fit(
        train_data,
        epochs=args.epochs,
        shuffle=False,  # the dataset shuffles
        verbose=2,
        callbacks=[keras.callbacks.BackupAndRestore(Path(args.out) / "backup"), progress],
    )
    accuracy = model.evaluate(test_data, verbose=0, return_dict=True)["accuracy"]
    model.save_weights(Path(args.out) / "final.weights.h5")
    steps = int(model.optimizer.iterations.value.numpy())
    write_results(
        args,
        RECIPE,
        progress.times,
        [float(loss) for loss in history.history.get("loss", [])],
        last={"resumed_from_epoch": progress.first_epoch},
        replicas=replicas,
        device_type=device_type,
        precision=precision,
        global_batch=global_batch,
        test_accuracy=float(accuracy),
        test_examples=len(x_test),
        steps=steps,
        steps_this_run=steps - progress.start_step,
        steps_per_epoch=len(x_train) // global_batch,
    )


if __name__ == "__main__":
    main()
