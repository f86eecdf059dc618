"""Train a small CNN with a MirroredStrategy custom loop that resumes exactly.

Launch (the program uses every GPU it sees, or 2 simulated CPU replicas without one):

    1 GPU:             python recipes/tf_custom_loop.py --epochs 10
    8 GPUs, 1 machine: python recipes/tf_custom_loop.py --epochs 40
                       (CUDA_VISIBLE_DEVICES=0,1,2,3 picks GPUs; the global batch follows;
                       the 4,500 training digits are 8 steps an epoch at 64 x 8)
    2 machines:        MirroredStrategy is one machine: use recipes/tf_multiworker.py.

Run the same command again after a crash or a stop: it restores model, optimizer, epoch
and step from --out/checkpoints and continues from the batch it stopped at (each epoch's
order is a function of --seed and the epoch; with another number of replicas, from the
epoch's first batch). On SIGTERM or SIGUSR1 (a scheduler's preemption) it saves a checkpoint
after the step in progress and exits 0.

Chapters: 4 (custom loops, compute_average_loss), 8 (input pipeline), 9 (checkpoints,
resuming mid-epoch), 12 (linear LR rule, warm-up, mixed precision).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's C++ info lines
# recipes/tf_common.py and recipes/data.py: copy both beside this file
from tf_common import (  # noqa: E402
    CustomLoop,
    add_tf_flags,
    base_parser,
    check_args,
    setup_mirrored_devices,
    setup_training,
    split,
    steps_done,
    write_results,
)

RECIPE = "tf_custom_loop"


def parse_args(argv=None):
    """The command line (see --help)."""
    parser = base_parser(__doc__, "runs/tf_custom_loop", "checkpoints, weights")
    add_tf_flags(parser)
    parser.add_argument("--signal-self-at-step", type=int, help=argparse.SUPPRESS)  # tests
    args = parser.parse_args(argv)
    return check_args(args, ("epochs", "batch_per_device", "base_batch", "cpu_devices"))


def main(argv=None) -> None:
    args = parse_args(argv)
    train, test, num_classes = split(args)

    import keras
    import tensorflow as tf

    devices, device_type = setup_mirrored_devices(tf, args)
    strategy = tf.distribute.MirroredStrategy(devices)
    replicas = strategy.num_replicas_in_sync
    global_batch, precision, *schedule = setup_training(tf, keras, args, replicas, len(train[0]))
    steps_per_epoch = len(train[0]) // global_batch

    loop = CustomLoop(
        tf, keras, strategy, args, (train, test), num_classes, global_batch, precision, schedule
    )
    manager = tf.train.CheckpointManager(loop.checkpoint, Path(args.out) / "checkpoints", 2)
    if manager.latest_checkpoint:
        loop.checkpoint.restore(manager.latest_checkpoint).assert_consumed()
        print(
            f"resumed from {manager.latest_checkpoint}: epoch {int(loop.epoch_var) + 1}, "
            f"batch {int(loop.step_var)}",
            flush=True,
        )

    step_times, epoch_losses, done = loop.train(manager.save)
    loop.evaluate()
    loop.model.save_weights(Path(args.out) / "final.weights.h5")
    write_results(
        args,
        RECIPE,
        step_times[1:],  # the first step traces the function
        epoch_losses,
        replicas=replicas,
        device_type=device_type,
        precision=precision,
        global_batch=global_batch,
        test_accuracy=float(loop.test_accuracy.result()),
        test_examples=int(loop.test_accuracy.count.value.numpy()),  # summed over replicas
        steps=steps_done(loop.optimizer),
        steps_this_run=steps_done(loop.optimizer) - done,
        steps_per_epoch=steps_per_epoch,
    )


if __name__ == "__main__":
    main()
