"""Train a small CNN with a MirroredStrategy custom loop that resumes exactly.

Launch (the program uses every GPU it sees, or 2 simulated CPU replicas without one):

    1 GPU:             python recipes/tf_custom_loop.py --epochs 10 --batch-per-replica 256
    8 GPUs, 1 machine: python recipes/tf_custom_loop.py --epochs 10 --batch-per-replica 256
                       (CUDA_VISIBLE_DEVICES=0,1,2,3 picks GPUs; the global batch follows)
    2 machines:        MirroredStrategy is one machine: use recipes/tf_multiworker.py.

Run the same command again after a crash or a SIGTERM: it restores model, optimizer, epoch
and step from --out/checkpoints and continues from the batch it stopped at (each epoch's
order is a function of --seed and the epoch). On SIGTERM (a scheduler's preemption) it saves
a checkpoint after the step in progress and exits 0.

Chapters: 4 (custom loops, compute_average_loss), 8 (input pipeline), 9 (checkpoints,
resuming mid-epoch), 12 (linear LR rule, warm-up, mixed precision).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's C++ info lines
from data import append_result, load  # noqa: E402  (recipes/data.py, beside this file)

RECIPE = "tf_custom_loop"


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """--help shows this file's docstring as written, and the defaults that are set."""

    def _get_help_string(self, action):
        return action.help if action.default is None else super()._get_help_string(action)


def parse_args(argv=None) -> argparse.Namespace:
    """The command line (see --help)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("--epochs", type=int, default=5, help="passes over the data")
    parser.add_argument(
        "--batch-per-replica", type=int, default=64, help="x replicas = the global batch"
    )
    parser.add_argument("--base-lr", type=float, default=0.05, help="LR tuned for --base-batch")
    parser.add_argument("--base-batch", type=int, default=64, help="global batch of --base-lr")
    parser.add_argument("--warmup-steps", type=int, default=50, help="linear warm-up steps")
    parser.add_argument("--images", help="folder/CLASS/IMAGE files; without it, the bundled digits")
    parser.add_argument("--out", default="runs/tf_custom_loop", help="checkpoints, weights")
    parser.add_argument("--results", default="results.jsonl", help="JSON line appended here")
    parser.add_argument("--seed", type=int, default=0, help="weights and data order")
    parser.add_argument(
        "--limit-examples", type=int, help="at most this many training and test examples (tests)"
    )
    parser.add_argument(
        "--precision",
        choices=["auto", "fp32", "mixed"],
        default="auto",
        help="auto: mixed_bfloat16 on GPUs of compute capability 8+, mixed_float16 on older "
        "ones, float32 on CPUs; mixed: the same, but mixed_bfloat16 on CPUs",
    )
    parser.add_argument("--cpu-replicas", type=int, default=2, help="without a GPU")
    parser.add_argument("--tf32", action="store_true", help="allow TF32 matmuls on GPUs")
    parser.add_argument(
        "--deterministic", action="store_true", help="enable_op_determinism (slower)"
    )
    parser.add_argument("--signal-self-at-step", type=int, help=argparse.SUPPRESS)  # tests
    args = parser.parse_args(argv)
    for name in ("epochs", "batch_per_replica", "base_batch", "cpu_replicas"):
        if getattr(args, name) < 1:
            raise SystemExit(f"--{name.replace('_', '-')} must be at least 1.")
    if args.warmup_steps < 0 or args.base_lr <= 0:
        raise SystemExit("--warmup-steps must be >= 0 and --base-lr > 0.")
    return args


def split(args):
    """(train images, train labels), (test images, test labels): the last 10% is the test."""
    images, labels = load(args.images)
    cut = len(images) - max(1, len(images) // 10)
    train, test = (images[:cut], labels[:cut]), (images[cut:], labels[cut:])
    if args.limit_examples:
        train = tuple(a[: args.limit_examples] for a in train)
        test = tuple(a[: args.limit_examples] for a in test)
    return train, test, int(labels.max()) + 1


def setup_devices(tf, args) -> tuple[list[str], str]:
    """All GPUs (memory growth on), else `--cpu-replicas` logical CPUs; before TF starts."""
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        for gpu in gpus:
            tf.config.experimental.set_memory_growth(gpu, True)
        tf.config.experimental.enable_tensor_float_32_execution(args.tf32)
        return [d.name for d in tf.config.list_logical_devices("GPU")], "GPU"
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * args.cpu_replicas
    )
    return [d.name for d in tf.config.list_logical_devices("CPU")], "CPU"


def choose_precision(tf, requested: str) -> str:
    """auto: bfloat16 on GPUs of compute capability 8+, float16 on older, fp32 on CPU."""
    gpus = tf.config.list_physical_devices("GPU")
    if requested == "fp32" or (requested == "auto" and not gpus):
        return "float32"
    if not gpus:
        return "mixed_bfloat16"  # --precision mixed on a CPU
    capability = tf.config.experimental.get_device_details(gpus[0]).get("compute_capability")
    return "mixed_bfloat16" if capability and capability >= (8, 0) else "mixed_float16"


def build_model(keras, num_classes: int, seed: int):
    """Two convolutions and a float32 output layer (logits), seeded."""
    init = [keras.initializers.GlorotUniform(seed=seed + i) for i in range(3)]
    return keras.Sequential(
        [
            keras.Input(shape=(28, 28, 1)),
            keras.layers.Conv2D(16, 3, activation="relu", kernel_initializer=init[0]),
            keras.layers.MaxPooling2D(),
            keras.layers.Conv2D(32, 3, activation="relu", kernel_initializer=init[1]),
            keras.layers.MaxPooling2D(),
            keras.layers.Flatten(),
            keras.layers.Dense(num_classes, kernel_initializer=init[2], dtype="float32"),
        ]
    )


def warmup_schedule(keras, peak: float, warmup_steps: int):
    """Linear warm-up from peak/warmup_steps to `peak`, then constant (chapter 12)."""

    class LinearWarmup(keras.optimizers.schedules.LearningRateSchedule):
        def __call__(self, step):
            if warmup_steps == 0:
                return keras.ops.convert_to_tensor(peak, "float32")
            ramp = (keras.ops.cast(step, "float32") + 1.0) / warmup_steps
            return peak * keras.ops.minimum(1.0, ramp)

        def get_config(self):
            return {"peak": peak, "warmup_steps": warmup_steps}

    return LinearWarmup()


def steps_done(optimizer) -> int:
    """The optimizer's update count (a mirrored variable under a strategy)."""
    return int(optimizer.iterations.value.numpy())


def main(argv=None) -> None:
    args = parse_args(argv)
    (x_train, y_train), (x_test, y_test), num_classes = split(args)

    import keras
    import tensorflow as tf

    devices, device_type = setup_devices(tf, args)
    strategy = tf.distribute.MirroredStrategy(devices)
    replicas = strategy.num_replicas_in_sync
    global_batch = args.batch_per_replica * replicas
    if global_batch > len(x_train):
        raise SystemExit(
            f"The global batch ({args.batch_per_replica} per replica x {replicas} replicas "
            f"= {global_batch}) is larger than the {len(x_train)} training examples: "
            "lower --batch-per-replica or give more data."
        )
    steps_per_epoch = len(x_train) // global_batch
    keras.utils.set_random_seed(args.seed)
    if args.deterministic:
        tf.config.experimental.enable_op_determinism()
    precision = choose_precision(tf, args.precision)
    keras.mixed_precision.set_global_policy(precision)
    peak_lr = args.base_lr * global_batch / args.base_batch  # the linear rule

    with strategy.scope():
        model = build_model(keras, num_classes, args.seed)
        optimizer = keras.optimizers.SGD(
            warmup_schedule(keras, peak_lr, args.warmup_steps), momentum=0.9
        )
        if precision == "mixed_float16":
            optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
        optimizer.build(model.trainable_variables)  # before the first distributed step
        test_accuracy = keras.metrics.SparseCategoricalAccuracy()
    epoch_var = tf.Variable(0, dtype=tf.int64)  # the next epoch to train
    step_var = tf.Variable(0, dtype=tf.int64)  # batches of that epoch already trained
    checkpoint = tf.train.Checkpoint(
        model=model, optimizer=optimizer, epoch=epoch_var, step=step_var
    )
    manager = tf.train.CheckpointManager(checkpoint, Path(args.out) / "checkpoints", 2)
    if manager.latest_checkpoint:
        checkpoint.restore(manager.latest_checkpoint).assert_consumed()
        print(
            f"resumed from {manager.latest_checkpoint}: epoch {int(epoch_var)}, "
            f"batch {int(step_var)}",
            flush=True,
        )

    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    train_base = tf.data.Dataset.from_tensor_slices((x_train, y_train))

    def epoch_batches(epoch: int, skip: int):
        """The epoch's batches, in an order fixed by seed and epoch, minus `skip` done."""
        data = (
            train_base.shuffle(len(x_train), seed=args.seed + epoch, reshuffle_each_iteration=False)
            .batch(global_batch, drop_remainder=True)
            .skip(skip)
            .prefetch(tf.data.AUTOTUNE)
            .with_options(options)
        )
        return strategy.experimental_distribute_dataset(data)

    loss_object = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)

    def replica_step(images, labels, stop):
        with tf.GradientTape() as tape:
            logits = model(images, training=True)
            per_example = loss_object(labels, logits)
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
            scaled = optimizer.scale_loss(loss)  # the loss itself unless float16
        gradients = tape.gradient(scaled, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))  # all-reduced
        return tf.stack([loss, stop])

    @tf.function
    def train_step(batch, stop):
        """[global batch loss, number of replicas asked to stop], summed over replicas."""
        results = strategy.run(replica_step, args=(*batch, stop))
        return strategy.reduce("SUM", results, axis=None)

    @tf.function
    def eval_step(batch):
        strategy.run(
            lambda x, y: test_accuracy.update_state(y, model(x, training=False)), args=batch
        )

    stop_requested = []
    signal.signal(signal.SIGTERM, lambda signum, frame: stop_requested.append(signum))

    step_times, epoch_losses, done = [], [], steps_done(optimizer)
    while int(epoch_var) < args.epochs:
        epoch, losses = int(epoch_var), []
        for batch in epoch_batches(epoch, int(step_var)):
            start = time.perf_counter()
            loss, stops = train_step(batch, tf.constant(float(bool(stop_requested))))
            loss, stops = float(loss), float(stops)  # waits for the step: timing is honest
            step_times.append(time.perf_counter() - start)
            losses.append(loss)
            step_var.assign_add(1)
            if steps_done(optimizer) == args.signal_self_at_step:
                os.kill(os.getpid(), signal.SIGTERM)  # a preemption, for the tests
            if stops > 0:
                path = manager.save()
                print(
                    f"SIGTERM: saved {path} at epoch {epoch}, batch {int(step_var)}; "
                    "run the same command to resume",
                    flush=True,
                )
                sys.exit(0)
        epoch_var.assign_add(1)
        step_var.assign(0)
        manager.save()
        mean = sum(losses) / max(1, len(losses))
        epoch_losses.append(mean)
        print(f"epoch {epoch + 1}/{args.epochs}: loss {mean:.4f}", flush=True)

    test_data = tf.data.Dataset.from_tensor_slices((x_test, y_test)).batch(global_batch)
    for batch in strategy.experimental_distribute_dataset(test_data.with_options(options)):
        eval_step(batch)
    model.save_weights(Path(args.out) / "final.weights.h5")
    timed = step_times[1:]  # the first step traces the function
    mean_step = sum(timed) / len(timed) if timed else None
    record = {
        "recipe": RECIPE,
        "replicas": replicas,
        "device_type": device_type,
        "precision": precision,
        "global_batch": global_batch,
        "examples_per_s_per_replica": mean_step and args.batch_per_replica / mean_step,
        "mean_step_time_s": mean_step,
        "final_train_loss": epoch_losses[-1] if epoch_losses else None,
        "loss_per_epoch": epoch_losses,
        "test_accuracy": float(test_accuracy.result()),
        "test_examples": int(test_accuracy.count.value.numpy()),  # summed over replicas
        "epochs": args.epochs,
        "steps": steps_done(optimizer),
        "steps_this_run": steps_done(optimizer) - done,
        "steps_per_epoch": steps_per_epoch,
    }
    append_result(args.results, record)
    print(f"test accuracy {record['test_accuracy']:.4f}; results in {args.results}")


if __name__ == "__main__":
    main()
