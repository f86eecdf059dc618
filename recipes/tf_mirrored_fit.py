"""Train a small CNN with MirroredStrategy and Keras `fit`.

Launch (the program uses every GPU it sees, or 2 simulated CPU replicas without one):

    1 GPU:             python recipes/tf_mirrored_fit.py --epochs 10 --batch-per-replica 256
    8 GPUs, 1 machine: python recipes/tf_mirrored_fit.py --epochs 10 --batch-per-replica 256
                       (CUDA_VISIBLE_DEVICES=0,1,2,3 picks GPUs; the global batch follows)
    2 machines:        MirroredStrategy is one machine, and Keras 3 `fit` fails under
                       MultiWorkerMirroredStrategy (keras-team/keras#20585): use
                       recipes/tf_multiworker.py (custom loop) or recipes/keras_jax.py.

The global batch is --batch-per-replica x replicas; the learning rate follows the linear
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
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's C++ info lines
from data import append_result, load  # noqa: E402  (recipes/data.py, beside this file)

RECIPE = "tf_mirrored_fit"


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
    parser.add_argument("--out", default="runs/tf_mirrored_fit", help="backup, weights")
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
    parser.add_argument("--kill-after-epoch", type=int, help=argparse.SUPPRESS)  # tests
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
    keras.utils.set_random_seed(args.seed)
    if args.deterministic:
        tf.config.experimental.enable_op_determinism()
    precision = choose_precision(tf, args.precision)
    keras.mixed_precision.set_global_policy(precision)
    peak_lr = args.base_lr * global_batch / args.base_batch  # the linear rule

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
                warmup_schedule(keras, peak_lr, args.warmup_steps), momentum=0.9
            ),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=["accuracy"],
            jit_compile=False,  # what "auto" picks under a strategy anyway
            steps_per_execution=1,  # > 1 fails under MirroredStrategy (keras#19246)
        )

    class Progress(keras.callbacks.Callback):
        """Where fit (re)started, and steady-state step times (after each epoch's first)."""

        def __init__(self):
            super().__init__()
            self.first_epoch, self.start_step, self.times, self.last = None, None, [], None

        def on_train_begin(self, logs=None):  # after BackupAndRestore's restore
            self.start_step = int(self.model.optimizer.iterations.value.numpy())

        def on_epoch_begin(self, epoch, logs=None):
            if self.first_epoch is None:
                self.first_epoch = epoch
            self.last = None

        def on_train_batch_end(self, batch, logs=None):
            now = time.perf_counter()
            if self.last is not None:
                self.times.append(now - self.last)
            self.last = now

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
    mean_step = sum(progress.times) / len(progress.times) if progress.times else None
    losses = [float(loss) for loss in history.history.get("loss", [])]
    record = {
        "recipe": RECIPE,
        "replicas": replicas,
        "device_type": device_type,
        "precision": precision,
        "global_batch": global_batch,
        "examples_per_s_per_replica": mean_step and args.batch_per_replica / mean_step,
        "mean_step_time_s": mean_step,
        "final_train_loss": losses[-1] if losses else None,
        "loss_per_epoch": losses,
        "test_accuracy": float(accuracy),
        "test_examples": len(x_test),
        "epochs": args.epochs,
        "steps": steps,
        "steps_this_run": steps - progress.start_step,
        "steps_per_epoch": len(x_train) // global_batch,
        "resumed_from_epoch": progress.first_epoch,
    }
    append_result(args.results, record)
    print(f"test accuracy {record['test_accuracy']:.4f}; results in {args.results}")


if __name__ == "__main__":
    main()
