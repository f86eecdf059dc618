"""Steady-state training throughput, with and without MirroredStrategy (chapter 7).

    python -m utils.bench --devices 1 2 --mode fit custom --quick --json results.json

Every configuration trains `small_cnn` on the bundled digits. Each first trains one untimed
block (tracing, allocation); then the configurations take turns, one timed block each, and
the median of each one's blocks is reported. A plain single-device run with no strategy is
always included as the baseline.
Works unchanged on GPUs (real devices) and CPUs (logical devices from `setup_devices`).
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

from utils.checks import positive_int_argument

MODES = ("fit", "custom")


@dataclass(frozen=True)
class Result:
    """One benchmark row; `strategy` is "none" for the baseline, else "mirrored"."""

    strategy: str
    replicas: int
    mode: str
    global_batch: int
    step_ms: float
    samples_per_s: float
    blocks: int


@functools.lru_cache(maxsize=1)
def _training_digits():
    from utils.data import load_mnist_subset

    return load_mnist_subset()[0]


def _dataset(global_batch: int):
    """The digits, cached in memory and repeated, with tf.data's autotuner off.

    There is nothing to tune here, and an autotuned iterator kept for a minute or more (as
    the turns keep them) has a tuning thread that sleeps up to 60 s between rounds: deleting
    the iterator can wait for that thread, which once added 107 s to a six-configuration run.
    Under MirroredStrategy this does not reach the per-device iterators that the strategy
    builds (their datasets do not carry these options), so the end of a run can still wait:
    40-46 s in 3 of about 12 runs at a global batch of 512, where gdb showed one of those
    iterators' destructors waiting for its tuning thread.
    """
    import tensorflow as tf

    from utils.data import make_dataset

    x_train, y_train = _training_digits()
    options = tf.data.Options()
    options.autotune.enabled = False
    return make_dataset(x_train, y_train, global_batch).repeat().with_options(options)


def _fit_blocks(strategy, data, steps: int) -> Callable[[], float]:
    """Train with `fit`, one untimed block first; then each call trains a block, returns seconds.

    A call is a `fit` of one epoch, timed from its first step: `fit` setting up (a new
    iterator over the data every time) is not part of the step time.
    """
    import keras

    from utils.training import fit_model

    class FromFirstStep(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            if batch == 0:
                self.start = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            self.seconds = (
                time.perf_counter() - self.start
            )  # fit waited for the last step

    if strategy is not None:  # split the batches once, not in every fit
        data = strategy.experimental_distribute_dataset(data)
    model, _ = fit_model(data, strategy=strategy, epochs=1, steps_per_epoch=steps)

    def block() -> float:
        timer = FromFirstStep()
        model.fit(
            data,
            epochs=1,
            steps_per_epoch=steps,
            verbose=0,
            callbacks=[timer],
            shuffle=False,
        )
        return timer.seconds

    return block


def make_custom_step(strategy, model, optimizer, global_batch: int) -> Callable:
    """The custom-loop step that the benchmark times: chapter 4's `make_distributed_step`
    without metrics, kept here so that editing chapter 4 cannot change chapter 7's numbers
    (tests/utils/test_bench.py checks that the two train alike)."""
    import keras
    import tensorflow as tf

    per_example_loss = keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, reduction=None
    )

    def replica_step(images, labels):
        with tf.GradientTape() as tape:
            per_example = per_example_loss(labels, model(images, training=True))
            loss = tf.nn.compute_average_loss(
                per_example, global_batch_size=global_batch
            )
            scaled = optimizer.scale_loss(loss)
        gradients = tape.gradient(scaled, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        return loss

    @tf.function
    def step(batch):
        return strategy.reduce("SUM", strategy.run(replica_step, args=batch), axis=None)

    return step


def _custom_blocks(
    strategy, data, steps: int, global_batch: int
) -> Callable[[], float]:
    """The same with a custom loop (`make_custom_step`)."""
    import tensorflow as tf

    from utils.training import model_and_optimizer

    strategy = strategy or tf.distribute.get_strategy()  # the default: no distribution
    model, optimizer = model_and_optimizer(strategy)
    step = make_custom_step(strategy, model, optimizer, global_batch)
    batches = iter(strategy.experimental_distribute_dataset(data))

    def block() -> float:
        start = time.perf_counter()
        for _ in range(steps):
            loss = step(next(batches))
        float(loss)  # wait for the last step
        return time.perf_counter() - start

    block()  # the untimed block: tracing, allocation
    return block


def _replica_count(devices: list[str] | None) -> int:
    return 1 if devices is None else len(devices)


def _timed_blocks(
    devices: list[str] | None, mode: str, global_batch: int, steps: int
) -> Callable[[], float]:
    """One configuration, warmed up: `devices=None` is the baseline with no strategy."""
    import tensorflow as tf

    strategy = (
        None if devices is None else tf.distribute.MirroredStrategy(devices=devices)
    )
    data = _dataset(global_batch)
    if mode == "fit":
        return _fit_blocks(strategy, data, steps)
    return _custom_blocks(strategy, data, steps, global_batch)


def run_benchmark(
    devices: list[str],
    replicas: list[int],
    modes: list[str],
    *,
    batch_per_device: int = 64,
    global_batch: int | None = None,
    steps: int = 20,
    blocks: int = 5,
    progress: bool = True,
) -> list[Result]:
    """Measure the baseline and MirroredStrategy over the first r of `devices` for each r.

    Each configuration's global batch is `global_batch` when given (the same work per step
    for every row), else `batch_per_device` times its replica count (the same work per device).
    The configurations take turns, one block each, so that a busy spell of the machine slows
    them all alike instead of whichever one it falls on (chapter 7).
    """
    from tqdm import tqdm

    configs = [(None, mode) for mode in modes]
    configs += [(devices[:r], mode) for r in replicas for mode in modes]
    batches = [global_batch or batch_per_device * _replica_count(d) for d, _ in configs]
    for (config_devices, _), batch in zip(
        configs, batches
    ):  # before any configuration trains
        replica_count = _replica_count(config_devices)
        if batch % replica_count:
            raise ValueError(
                f"global batch {batch} does not split evenly over {replica_count} replicas"
            )
    with tqdm(
        total=len(configs) * (blocks + 1),
        desc="benchmark",
        disable=not progress,
        file=sys.stderr,
    ) as bar:
        timed = []
        for (config_devices, mode), batch in zip(configs, batches):
            timed.append(_timed_blocks(config_devices, mode, batch, steps))
            bar.update()
        seconds: list[list[float]] = [[] for _ in configs]
        for _ in range(blocks):
            for block, times in zip(timed, seconds):
                times.append(block())
                bar.update()
    results = []
    for (config_devices, mode), batch, times in zip(configs, batches, seconds):
        block = statistics.median(times)
        results.append(
            Result(
                strategy="none" if config_devices is None else "mirrored",
                replicas=_replica_count(config_devices),
                mode=mode,
                global_batch=batch,
                step_ms=1000 * block / steps,
                samples_per_s=batch * steps / block,
                blocks=len(times),
            )
        )
    return results


def format_table(results: list[Result]) -> str:
    """The results as a text table, with each row's cost per sample relative to the baseline."""
    baseline = {r.mode: r for r in results if r.strategy == "none"}
    lines = [
        f"{'strategy':<9} {'replicas':>8} {'mode':<7} {'global batch':>12} "
        f"{'step ms':>9} {'samples/s':>10} {'per-sample cost':>16}"
    ]
    for r in results:
        relative = baseline[r.mode].samples_per_s / r.samples_per_s
        lines.append(
            f"{r.strategy:<9} {r.replicas:>8} {r.mode:<7} {r.global_batch:>12} "
            f"{r.step_ms:>9.1f} {r.samples_per_s:>10.0f} {relative:>15.2f}x"
        )
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m utils.bench",
        description="Training throughput of small_cnn with and without MirroredStrategy.",
    )
    parser.add_argument(
        "--devices",
        type=positive_int_argument,
        nargs="+",
        default=[2],
        help="device counts to measure, a MirroredStrategy over each (default: 2)",
    )
    parser.add_argument(
        "--mode",
        nargs="+",
        choices=MODES,
        default=["fit"],
        help="training loop(s) to time (default: fit)",
    )
    batch = parser.add_mutually_exclusive_group()
    batch.add_argument(
        "--batch-per-device",
        type=positive_int_argument,
        default=64,
        help="examples per device per step (default: 64)",
    )
    batch.add_argument(
        "--global-batch",
        type=positive_int_argument,
        help="examples per step for every row instead (a multiple of each device count)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="fewer and shorter timing blocks, for a smoke test",
    )
    parser.add_argument(
        "--json", metavar="FILE", help="also write the rows to FILE as JSON"
    )
    args = parser.parse_args(argv)
    several = sorted({r for r in args.devices if r > 1})
    if len(several) > 1:
        # Every MirroredStrategy starts its collective group keys at 1
        # (tensorflow/python/distribute/mirrored_strategy.py), so a second strategy over
        # another number of devices joins the first one's group and the all-reduce aborts.
        parser.error(
            f"--devices: one count above 1 per run, not {several} (TensorFlow's strategies "
            "in one process share their collective keys); run the others separately"
        )
    uneven = [r for r in args.devices if args.global_batch and args.global_batch % r]
    if uneven:
        parser.error(
            f"--global-batch {args.global_batch} does not split evenly over {uneven} replicas"
        )
    return args


def main(argv: list[str] | None = None) -> list[Result]:
    args = parse_args(argv)
    from utils.devices import setup_devices

    names = setup_devices(max(args.devices))
    steps, blocks = (5, 2) if args.quick else (20, 5)
    results = run_benchmark(
        names,
        sorted(set(args.devices)),
        args.mode,
        batch_per_device=args.batch_per_device,
        global_batch=args.global_batch,
        steps=steps,
        blocks=blocks,
    )
    print(format_table(results))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump([asdict(r) for r in results], handle, indent=2)
    return results


if __name__ == "__main__":
    main()
