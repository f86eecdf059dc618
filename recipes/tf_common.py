"""What the Keras recipes share (tf_mirrored_fit, tf_custom_loop, tf_multiworker, keras_jax):
the command line, the data split, the model, the warm-up schedule, TensorFlow's device and
precision setup, the custom loop's pieces and the results line. Copy this file and `data.py`
beside the recipe you use. It imports neither TensorFlow nor Keras itself: the recipes pass
them in once they have checked their flags and loaded the data (a wrong launch fails fast),
and keras_jax.py chooses its Keras backend first."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time

from data import append_result, load, split_test, warmup_length  # recipes/data.py, beside it

#: Signals that ask a job to stop soon: Slurm and Kubernetes send SIGTERM some seconds
#: before they kill a job. Slurm can send SIGUSR1 earlier, to the batch script
#: (`sbatch --signal=B:USR1@120`, as recipes/slurm/ does) or, without B:, to the steps.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR1)


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """--help shows this file's docstring as written, and the defaults that are set."""

    def _get_help_string(self, action):
        return action.help if action.default is None else super()._get_help_string(action)


def base_parser(doc: str, out: str, out_help: str) -> argparse.ArgumentParser:
    """The flags every recipe has; `doc` (the recipe's docstring) is the --help text."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=HelpFormatter)
    parser.add_argument("--epochs", type=int, default=5, help="passes over the data")
    parser.add_argument(
        "--batch-per-device", type=int, default=64, help="x devices = the global batch"
    )
    parser.add_argument("--base-lr", type=float, default=0.05, help="LR tuned for --base-batch")
    parser.add_argument("--base-batch", type=int, default=64, help="global batch of --base-lr")
    parser.add_argument("--warmup-steps", type=int, default=50, help="linear warm-up steps")
    parser.add_argument("--images", help="folder/CLASS/IMAGE files; without it, the bundled digits")
    parser.add_argument("--out", default=out, help=out_help)
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
    return parser


def add_tf_flags(parser: argparse.ArgumentParser, cpu_devices: bool = True) -> None:
    """--cpu-devices (MirroredStrategy only), --tf32 and --deterministic."""
    if cpu_devices:
        parser.add_argument("--cpu-devices", type=int, default=2, help="without a GPU")
    parser.add_argument("--tf32", action="store_true", help="allow TF32 matmuls on GPUs")
    parser.add_argument(
        "--deterministic", action="store_true", help="enable_op_determinism (slower)"
    )


def check_args(args: argparse.Namespace, at_least_one, *rules) -> argparse.Namespace:
    """SystemExit unless the flags named are >= 1, each (bad, message) rule is not bad, and
    the warm-up and learning rate are sensible."""
    for name in at_least_one:
        if getattr(args, name) < 1:
            raise SystemExit(f"--{name.replace('_', '-')} must be at least 1.")
    for bad, message in rules:
        if bad:
            raise SystemExit(message)
    if args.warmup_steps < 0 or args.base_lr <= 0:
        raise SystemExit("--warmup-steps must be >= 0 and --base-lr > 0.")
    return args


def split(args):
    """(train images, train labels), (test images, test labels): the first 10% is the test,
    as in the PyTorch recipes."""
    images, labels = load(args.images)
    train, test = split_test(images, labels)
    if args.limit_examples:
        train = tuple(a[: args.limit_examples] for a in train)
        test = tuple(a[: args.limit_examples] for a in test)
    return train, test, int(labels.max()) + 1


def setup_mirrored_devices(tf, args) -> tuple[list[str], str]:
    """All GPUs (memory growth on), else `--cpu-devices` logical CPUs; before TF starts."""
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        for gpu in gpus:
            tf.config.experimental.set_memory_growth(gpu, True)
        tf.config.experimental.enable_tensor_float_32_execution(args.tf32)
        return [d.name for d in tf.config.list_logical_devices("GPU")], "GPU"
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * args.cpu_devices
    )
    return [d.name for d in tf.config.list_logical_devices("CPU")], "CPU"


def choose_precision(requested: str, capability: tuple[int, int] | None) -> str:
    """The Keras dtype policy for --precision, given the first GPU's compute capability
    (None: no GPU): auto is bfloat16 on GPUs of capability 8.0 or more, float16 on older
    ones, float32 on the CPU; mixed is bfloat16 on the CPU. keras_jax.py uses it too."""
    if requested == "fp32" or (requested == "auto" and capability is None):
        return "float32"
    if capability is None:
        return "mixed_bfloat16"  # --precision mixed on a CPU
    return "mixed_bfloat16" if capability >= (8, 0) else "mixed_float16"


def tensorflow_gpu_capability(tf) -> tuple[int, int] | None:
    """The first GPU's compute capability as TensorFlow reports it; None without a GPU."""
    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        return None
    return tf.config.experimental.get_device_details(gpus[0]).get("compute_capability") or (0, 0)


def setup_training(tf, keras, args, replicas: int, train_examples: int):
    """(global batch, precision, peak LR, warm-up steps): checks the batch fits, seeds, sets
    the policy."""
    global_batch = args.batch_per_device * replicas
    if global_batch > train_examples:
        raise SystemExit(
            f"The global batch ({args.batch_per_device} per device x {replicas} devices "
            f"= {global_batch}) is larger than the {train_examples} training examples: "
            "lower --batch-per-device or give more data."
        )
    keras.utils.set_random_seed(args.seed)
    if args.deterministic:
        tf.config.experimental.enable_op_determinism()
    precision = choose_precision(args.precision, tensorflow_gpu_capability(tf))
    keras.mixed_precision.set_global_policy(precision)
    peak_lr = args.base_lr * global_batch / args.base_batch  # the linear rule
    total_steps = args.epochs * (train_examples // global_batch)
    return global_batch, precision, peak_lr, warmup_length(args.warmup_steps, total_steps)


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


def step_timer(keras):
    """A Keras callback class for `fit`: `start_step`, the optimizer's step count when `fit`
    began (after any restore), `first_epoch`, the epoch it began with, and `times`, the
    seconds of every step after each epoch's first."""

    class StepTimer(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.first_epoch, self.start_step, self.times, self.last = None, None, [], None

        def on_train_begin(self, logs=None):
            self.start_step = int(self.model.optimizer.iterations.numpy())

        def on_epoch_begin(self, epoch, logs=None):
            if self.first_epoch is None:
                self.first_epoch = epoch
            self.last = None

        def on_train_batch_end(self, batch, logs=None):
            now = time.perf_counter()
            if self.last is not None:
                self.times.append(now - self.last)
            self.last = now

    return StepTimer


def steps_done(optimizer) -> int:
    """The optimizer's update count (a mirrored variable under a strategy)."""
    return int(optimizer.iterations.value.numpy())


class CustomLoop:
    """A strategy's custom training loop that resumes mid-epoch (tf_custom_loop.py and
    tf_multiworker.py): the model, optimizer and checkpointed epoch and step, the data of
    each epoch, the distributed steps, the loop with its stop on a signal, and the test.
    `schedule` is (peak learning rate, warm-up steps)."""

    def __init__(
        self, tf, keras, strategy, args, data, num_classes, global_batch, precision, schedule
    ):
        self.tf, self.strategy, self.args, self.global_batch = tf, strategy, args, global_batch
        (self.x_train, self.y_train), (self.x_test, self.y_test) = data
        with strategy.scope():
            self.model = build_model(keras, num_classes, args.seed)
            optimizer = keras.optimizers.SGD(warmup_schedule(keras, *schedule), momentum=0.9)
            if precision == "mixed_float16":
                optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
            optimizer.build(self.model.trainable_variables)  # before the first distributed step
            self.optimizer = optimizer
            self.test_accuracy = keras.metrics.SparseCategoricalAccuracy()
        self.epoch_var = tf.Variable(0, dtype=tf.int64)  # the next epoch to train
        self.step_var = tf.Variable(0, dtype=tf.int64)  # batches of that epoch already trained
        self.batch_var = tf.Variable(global_batch, dtype=tf.int64)  # ... of this global batch
        self.checkpoint = tf.train.Checkpoint(
            model=self.model,
            optimizer=optimizer,
            epoch=self.epoch_var,
            step=self.step_var,
            batch=self.batch_var,
        )
        self.options = tf.data.Options()
        self.options.experimental_distribute.auto_shard_policy = (
            tf.data.experimental.AutoShardPolicy.DATA
        )
        self.train_base = tf.data.Dataset.from_tensor_slices((self.x_train, self.y_train))
        self.loss_object = keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, reduction=None
        )
        self.train_step = tf.function(self._train_step)
        self.eval_step = tf.function(self._eval_step)

    def epoch_batches(self, epoch: int, skip: int):
        """The epoch's batches, in an order fixed by seed and epoch, minus `skip` done."""
        data = (
            self.train_base.shuffle(
                len(self.x_train), seed=self.args.seed + epoch, reshuffle_each_iteration=False
            )
            .batch(self.global_batch, drop_remainder=True)
            .skip(skip)
            .prefetch(self.tf.data.AUTOTUNE)
            .with_options(self.options)
        )
        return self.strategy.experimental_distribute_dataset(data)

    def _replica_step(self, images, labels, stop):
        tf, model, optimizer = self.tf, self.model, self.optimizer
        with tf.GradientTape() as tape:
            logits = model(images, training=True)
            per_example = self.loss_object(labels, logits)
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=self.global_batch)
            scaled = optimizer.scale_loss(loss)  # the loss itself unless float16
        gradients = tape.gradient(scaled, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))  # all-reduced
        return tf.stack([loss, stop])

    def _train_step(self, batch, stop):
        """[global batch loss, number of replicas asked to stop], summed over replicas."""
        results = self.strategy.run(self._replica_step, args=(*batch, stop))
        return self.strategy.reduce("SUM", results, axis=None)

    def _eval_step(self, batch):
        self.strategy.run(
            lambda x, y: self.test_accuracy.update_state(y, self.model(x, training=False)),
            args=batch,
        )

    def train(self, save):
        """Train to --epochs, `save()` (returns the path) after each epoch; on SIGTERM or
        SIGUSR1 save after the step in progress and exit 0. Returns (step times, epoch
        losses, steps done before this run)."""
        tf, args, epoch_var, step_var = self.tf, self.args, self.epoch_var, self.step_var
        if int(self.batch_var) != self.global_batch:  # resumed with more or fewer replicas
            print(
                f"the checkpoint's global batch was {int(self.batch_var)}, this run's is "
                f"{self.global_batch}: epoch {int(epoch_var) + 1} runs from its first batch",
                flush=True,
            )
            step_var.assign(0)
            self.batch_var.assign(self.global_batch)
        stop_requested = []
        for signum in STOP_SIGNALS:
            signal.signal(signum, lambda signum, frame: stop_requested.append(signum))

        step_times, epoch_losses, done = [], [], steps_done(self.optimizer)
        while int(epoch_var) < args.epochs:
            epoch, losses = int(epoch_var), []
            for batch in self.epoch_batches(epoch, int(step_var)):
                start = time.perf_counter()
                loss, stops = self.train_step(batch, tf.constant(float(bool(stop_requested))))
                loss, stops = float(loss), float(stops)  # waits for the step: timing is honest
                step_times.append(time.perf_counter() - start)
                losses.append(loss)
                step_var.assign_add(1)
                if steps_done(self.optimizer) == args.signal_self_at_step:
                    os.kill(os.getpid(), signal.SIGTERM)  # a preemption, for the tests
                if stops > 0:
                    path = save()
                    print(
                        f"stop signal: saved {path} at epoch {epoch + 1}, batch "
                        f"{int(step_var)}; run the same command to resume",
                        flush=True,
                    )
                    sys.exit(0)
            epoch_var.assign_add(1)
            step_var.assign(0)
            save()
            if losses:  # none when a stop came after the epoch's last batch
                epoch_losses.append(sum(losses) / len(losses))
                print(f"epoch {epoch + 1}/{args.epochs}: loss {epoch_losses[-1]:.4f}", flush=True)
        return step_times, epoch_losses, done

    def evaluate(self) -> None:
        """Accumulate the test accuracy over the whole test set (in self.test_accuracy)."""
        tf = self.tf
        test_data = tf.data.Dataset.from_tensor_slices((self.x_test, self.y_test)).batch(
            self.global_batch
        )
        for batch in self.strategy.experimental_distribute_dataset(
            test_data.with_options(self.options)
        ):
            self.eval_step(batch)


def write_results(args, recipe: str, step_times, losses, first=None, last=None, **fields):
    """Append the results line (`first` after the recipe's name, `fields` in the usual
    order, `last` at the end) and say where it went."""
    mean_step = sum(step_times) / len(step_times) if step_times else None
    record = {
        "recipe": recipe,
        **(first or {}),
        "replicas": fields["replicas"],
        "device_type": fields["device_type"],
        "precision": fields["precision"],
        "global_batch": fields["global_batch"],
        "examples_per_s_per_replica": mean_step and args.batch_per_device / mean_step,
        "mean_step_time_s": mean_step,
        "final_train_loss": losses[-1] if losses else None,
        "loss_per_epoch": losses,
        "test_accuracy": fields["test_accuracy"],
        "test_examples": fields["test_examples"],
        "epochs": args.epochs,
        "steps": fields["steps"],
        "steps_this_run": fields["steps_this_run"],
        "steps_per_epoch": fields["steps_per_epoch"],
        **(last or {}),
    }
    append_result(args.results, record)
    print(f"test accuracy {record['test_accuracy']:.4f}; results in {args.results}")
    return record
