r"""Train a small CNN on several machines: MultiWorkerMirroredStrategy, custom loop.

One process per machine, each with its own TF_CONFIG (the same cluster, its own task); each
uses every GPU it sees (or its CPU). Keras `fit` fails under this strategy in Keras 3
(keras-team/keras#20585), hence the custom loop. Launch:

    1 GPU:             TF_CONFIG='{"cluster": {"worker": ["localhost:12345"]},
                         "task": {"type": "worker", "index": 0}}' \
                       python recipes/tf_multiworker.py --epochs 10
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
checkpoints, the final weights and the results line. On SIGTERM or SIGUSR1 on any worker,
all stop after the same step, save, and exit 0; run the same commands to resume mid-epoch.

Chapters: 4 (custom loops), 8 (input pipeline, sharding), 9 (checkpoints), 11
(MultiWorkerMirroredStrategy, TF_CONFIG), 12 (linear LR rule, warm-up, mixed precision).
"""

from __future__ import annotations

import argparse
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's C++ info lines
# recipes/tf_common.py and recipes/data.py: copy both beside this file
from tf_common import (  # noqa: E402
    CustomLoop,
    add_tf_flags,
    base_parser,
    check_args,
    setup_training,
    split,
    steps_done,
    write_results,
)

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


def parse_args(argv=None) -> argparse.Namespace:
    """The command line (see --help)."""
    parser = base_parser(__doc__, "runs/tf_multiworker", "checkpoints, weights")
    add_tf_flags(parser, cpu_devices=False)
    parser.add_argument("--signal-self-at-step", type=int, help=argparse.SUPPRESS)  # tests
    args = parser.parse_args(argv)
    return check_args(args, ("epochs", "batch_per_device", "base_batch"))


def setup_devices(tf, args) -> str:
    """Memory growth on every GPU (the strategy uses them all), else the CPU: before TF starts."""
    gpus = tf.config.list_physical_devices("GPU")
    for gpu in gpus:
        tf.config.experimental.set_memory_growth(gpu, True)
    if gpus:
        tf.config.experimental.enable_tensor_float_32_execution(args.tf32)
    return "GPU" if gpus else "CPU"


def main(argv=None) -> None:
    args = parse_args(argv)
    task_type, task_index, workers, is_chief = read_tf_config()
    train, test, num_classes = split(args)

    import keras
    import tensorflow as tf

    device_type = setup_devices(tf, args)
    strategy = tf.distribute.MultiWorkerMirroredStrategy()  # reads TF_CONFIG; waits for all
    replicas = strategy.num_replicas_in_sync
    global_batch, precision, *schedule = setup_training(tf, keras, args, replicas, len(train[0]))
    steps_per_epoch = len(train[0]) // global_batch

    loop = CustomLoop(
        tf, keras, strategy, args, (train, test), num_classes, global_batch, precision, schedule
    )
    chief_dir = os.path.join(args.out, "checkpoints")  # every worker restores from here
    own_dir = chief_dir if is_chief else os.path.join(args.out, f"temp_{task_type}{task_index}")
    manager = tf.train.CheckpointManager(loop.checkpoint, own_dir, max_to_keep=2)
    latest = tf.train.latest_checkpoint(chief_dir)
    if latest:
        loop.checkpoint.restore(latest).assert_consumed()
        print(
            f"resumed from {latest}: epoch {int(loop.epoch_var) + 1}, batch {int(loop.step_var)}",
            flush=True,
        )

    def save() -> str:
        """Every worker saves (it may take collectives); only the chief's copy is kept."""
        path = manager.save()
        if not is_chief:
            tf.io.gfile.rmtree(own_dir)
        return os.path.join(chief_dir, os.path.basename(path))  # the copy that is kept

    step_times, epoch_losses, done = loop.train(save)
    loop.evaluate()
    # every worker reads them: reading all-reduces across workers
    accuracy = float(loop.test_accuracy.result())
    test_examples = int(loop.test_accuracy.count.value.numpy())
    if not is_chief:
        return
    loop.model.save_weights(os.path.join(args.out, "final.weights.h5"))
    write_results(
        args,
        RECIPE,
        step_times[1:],  # the first step traces the function
        epoch_losses,
        first={"workers": workers},
        replicas=replicas,
        device_type=device_type,
        precision=precision,
        global_batch=global_batch,
        test_accuracy=accuracy,
        test_examples=test_examples,
        steps=steps_done(loop.optimizer),
        steps_this_run=steps_done(loop.optimizer) - done,
        steps_per_epoch=steps_per_epoch,
    )


if __name__ == "__main__":
    main()
