r"""Train a small CNN on several machines: MultiWorkerMirroredStrategy, custom loop.

One process per machine, each with its own TF_CONFIG (the same cluster, its own task); each
uses every GPU it sees (or its CPU). Keras `fit` fails under this strategy in Keras 3
(keras-team/keras#20585), hence the custom loop. Launch:

    1 GPU:             TF_CONFIG='{"cluster": {"worker": ["localhost:12345"]},
                         "task": {"type": "worker", "index": 0}}' \
                       python recipes/tf_multiworker.py --epochs 10 --batch-per-replica 256
    8 GPUs, 1 machine: the same command (one worker, 8 replicas); recipes/tf_custom_loop.py
                       with MirroredStrategy does the same job with no TF_CONFIG.
    2 machines:        on 10.0.0.1:
                       TF_CONFIG='{"cluster": {"worker": ["10.0.0.1:12345", "10.0.0.2:12345"]},
                         "task": {"type": "worker", "index": 0}}' \
                       python recipes/tf_multiworker.py --out /shared/run1 --epochs 10
                       on 10.0.0.2: the same with "index": 1. Worker 0 is the chief (or a
                       task of type "chief" if the cluster has one).

Give --out on storage every machine sees (NFS, gs://...): every worker restores from the
chief's checkpoints, and writes its own to a temporary folder that it deletes (TensorFlow's
multi-worker checkpoint pattern; saving may need every worker). Only the chief keeps the
checkpoints, the final weights and the results line. On SIGTERM on any worker, all stop
after the same step, save, and exit 0; run the same commands to resume mid-epoch.

Chapters: 4 (custom loops), 8 (input pipeline, sharding), 9 (checkpoints), 11
(MultiWorkerMirroredStrategy, TF_CONFIG), 12 (linear LR rule, warm-up, mixed precision).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's C++ info lines
from data import append_result, load  # noqa: E402  (recipes/data.py, beside this file)

RECIPE = "tf_multiworker"
HOW = (
    'set TF_CONFIG on every machine, e.g. \'{"cluster": {"worker": ["host1:12345", '
    '"host2:12345"]}, "task": {"type": "worker", "index": 0}}\' with this machine\'s index; '
    "see --help"
)


def read_tf_config() -> tuple[str, int, int, bool]:
    """(task type, task index, number of workers, is chief) from TF_CONFIG, checked."""
    text = os.environ.get("TF_CONFIG", "").strip()
    if not text:
        raise SystemExit(f"TF_CONFIG is not set: {HOW}.")
    try:
        config = json.loads(text)
    except json.JSONDecodeError as err:
        raise SystemExit(f"TF_CONFIG is not valid JSON ({err}): {HOW}.") from None
    cluster = config.get("cluster") if isinstance(config, dict) else None
    task = config.get("task") if isinstance(config, dict) else None
    if not isinstance(cluster, dict) or not isinstance(task, dict):
        raise SystemExit(f'TF_CONFIG needs a "cluster" and a "task" object: {HOW}.')
    for job, addresses in cluster.items():
        if job not in ("chief", "worker") or not (
            isinstance(addresses, list) and all(isinstance(a, str) and ":" in a for a in addresses)
        ):
            raise SystemExit(
                f'TF_CONFIG cluster {job!r}: expected "chief" or "worker", each a list of '
                f'"host:port" strings: {HOW}.'
            )
    kind, index = task.get("type"), task.get("index")
    if kind not in cluster or not isinstance(index, int) or not 0 <= index < len(cluster[kind]):
        raise SystemExit(f"TF_CONFIG task {task} is not in its cluster {cluster}: {HOW}.")
    workers = sum(len(addresses) for addresses in cluster.values())
    chief = kind == "chief" or ("chief" not in cluster and index == 0)
    return kind, index, workers, chief


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
    parser.add_argument("--out", default="runs/tf_multiworker", help="checkpoints, weights")
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
    parser.add_argument("--tf32", action="store_true", help="allow TF32 matmuls on GPUs")
    parser.add_argument(
        "--deterministic", action="store_true", help="enable_op_determinism (slower)"
    )
    parser.add_argument("--signal-self-at-step", type=int, help=argparse.SUPPRESS)  # tests
    args = parser.parse_args(argv)
    for name in ("epochs", "batch_per_replica", "base_batch"):
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


def setup_devices(tf, args) -> str:
    """Memory growth on every GPU (the strategy uses them all), else the CPU: before TF starts."""
    gpus = tf.config.list_physical_devices("GPU")
    for gpu in gpus:
        tf.config.experimental.set_memory_growth(gpu, True)
    if gpus:
        tf.config.experimental.enable_tensor_float_32_execution(args.tf32)
    return "GPU" if gpus else "CPU"


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
    task_type, task_index, workers, is_chief = read_tf_config()
    (x_train, y_train), (x_test, y_test), num_classes = split(args)

    import keras
    import tensorflow as tf

    device_type = setup_devices(tf, args)
    strategy = tf.distribute.MultiWorkerMirroredStrategy()  # reads TF_CONFIG; waits for all
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
    chief_dir = os.path.join(args.out, "checkpoints")  # every worker restores from here
    own_dir = chief_dir if is_chief else os.path.join(args.out, f"temp_{task_type}{task_index}")
    manager = tf.train.CheckpointManager(checkpoint, own_dir, max_to_keep=2)
    latest = tf.train.latest_checkpoint(chief_dir)
    if latest:
        checkpoint.restore(latest).assert_consumed()
        print(f"resumed from {latest}: epoch {int(epoch_var)}, batch {int(step_var)}", flush=True)

    def save() -> str:
        """Every worker saves (it may take collectives); only the chief's copy is kept."""
        path = manager.save()
        if not is_chief:
            tf.io.gfile.rmtree(own_dir)
        return os.path.join(chief_dir, os.path.basename(path))  # the copy that is kept

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
                path = save()
                print(
                    f"SIGTERM: saved {path} at epoch {epoch}, batch {int(step_var)}; "
                    "run the same command to resume",
                    flush=True,
                )
                sys.exit(0)
        epoch_var.assign_add(1)
        step_var.assign(0)
        save()
        mean = sum(losses) / max(1, len(losses))
        epoch_losses.append(mean)
        print(f"epoch {epoch + 1}/{args.epochs}: loss {mean:.4f}", flush=True)

    test_data = tf.data.Dataset.from_tensor_slices((x_test, y_test)).batch(global_batch)
    for batch in strategy.experimental_distribute_dataset(test_data.with_options(options)):
        eval_step(batch)
    # every worker reads them: reading all-reduces across workers
    accuracy = float(test_accuracy.result())
    test_examples = int(test_accuracy.count.value.numpy())
    if not is_chief:
        return
    model.save_weights(os.path.join(args.out, "final.weights.h5"))
    timed = step_times[1:]  # the first step traces the function
    mean_step = sum(timed) / len(timed) if timed else None
    record = {
        "recipe": RECIPE,
        "workers": workers,
        "replicas": replicas,
        "device_type": device_type,
        "precision": precision,
        "global_batch": global_batch,
        "examples_per_s_per_replica": mean_step and args.batch_per_replica / mean_step,
        "mean_step_time_s": mean_step,
        "final_train_loss": epoch_losses[-1] if epoch_losses else None,
        "loss_per_epoch": epoch_losses,
        "test_accuracy": accuracy,
        "test_examples": test_examples,
        "epochs": args.epochs,
        "steps": steps_done(optimizer),
        "steps_this_run": steps_done(optimizer) - done,
        "steps_per_epoch": steps_per_epoch,
    }
    append_result(args.results, record)
    print(f"test accuracy {record['test_accuracy']:.4f}; results in {args.results}")


if __name__ == "__main__":
    main()
