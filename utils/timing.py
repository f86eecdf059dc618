"""Timing helpers (chapter 1; every chapter that times anything uses these)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from utils.checks import check_int


def printbar() -> None:
    """Print a separator line ending in the wall-clock time, as the book's sources do."""
    print("=" * 72 + time.strftime("%H:%M:%S"))


@dataclass
class Timing:
    """The result of a `timer` block, set when the block ends.

    `seconds` is the wall time: what you wait, and what other programs on the machine
    can stretch. `cpu_seconds` is the CPU time this process used, on all its threads:
    the work done, which they barely change (chapter 7 asserts on it).
    """

    label: str
    seconds: float = float("nan")
    cpu_seconds: float = float("nan")


@contextmanager
def timer(label: str, *, verbose: bool = True) -> Iterator[Timing]:
    """Time a `with` block; prints `label: 0.123 s` at the end unless `verbose=False`.

    TensorFlow runs GPU work asynchronously: finish the block with something that waits
    for the result (for example `.numpy()`), or the time is only that of launching it.
    """
    timing = Timing(label)
    start, cpu_start = time.perf_counter(), time.process_time()
    yield timing
    timing.seconds = time.perf_counter() - start
    timing.cpu_seconds = time.process_time() - cpu_start
    if verbose:
        print(f"{label}: {timing.seconds:.3f} s")


def median_time(
    fn: Callable[[], object], *, repeats: int = 5, warmup: int = 1
) -> float:
    """Median wall time in seconds of `repeats` calls of `fn`, after `warmup` untimed calls.

    One timing on a shared machine proves nothing; a median of several is worth quoting.
    `fn` must wait for its own result (see `timer`).
    """
    check_int("median_time: repeats", repeats)
    check_int("median_time: warmup", warmup, least=0)
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def steady_epoch_seconds(history: Mapping[str, Sequence[float]]) -> float:
    """Median epoch wall time of a `fit_model` history (its `epoch_seconds`).

    The first epoch traces and compiles the training step, so it is left out when there are
    more (chapter 3 and the multi_gpu_model appendix).
    """
    seconds = list(history["epoch_seconds"])
    if not seconds:
        raise ValueError(
            "steady_epoch_seconds: the history has no epoch times; train at "
            "least one epoch with utils.fit_model, which records them."
        )
    return statistics.median(seconds[1:] or seconds)
