"""Data parallelism written by hand: split a batch, all-reduce gradients (chapter 5).

These are the pieces `MirroredStrategy` hides, written in a few lines each so the chapter can
check them against the strategy. Devices are TensorFlow device names such as "/device:CPU:1".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from utils.checks import check_int


def split_and_load(data, devices: Sequence[str]) -> list[tf.Tensor]:
    """Split `data` along its first axis into one part per device; copy each part there.

    When the size is not a multiple of the number of devices, the first parts get one
    extra row (as `np.array_split` does). Every device must get at least one row.
    """
    if not devices:
        raise ValueError("split_and_load: give at least one device.")
    data = tf.convert_to_tensor(data)
    rows = int(data.shape[0])
    if rows < len(devices):
        raise ValueError(
            f"split_and_load: {rows} rows cannot feed {len(devices)} devices; every "
            "device needs at least one. Use a batch at least as large as the number of "
            "devices."
        )
    sizes = [len(part) for part in np.array_split(np.arange(rows), len(devices))]
    parts = tf.split(data, sizes)
    placed = []
    for device, part in zip(devices, parts):
        with tf.device(device):
            placed.append(tf.identity(part))
    return placed


def all_reduce_sum(tensors: Sequence[tf.Tensor]) -> list[tf.Tensor]:
    """Naive all-reduce: add all tensors on the first one's device, copy the sum back.

    Each input stays where it is; the result is one copy of the sum on every input's
    device. Simple, but the first device receives and sends everything: (N-1) full
    copies each way.
    """
    if not tensors:
        raise ValueError("all_reduce_sum: give at least one tensor.")
    with tf.device(tensors[0].device):
        total = tf.add_n([tf.identity(t) for t in tensors])
    copies = []
    for tensor in tensors:
        with tf.device(tensor.device):
            copies.append(tf.identity(total))
    return copies


@dataclass(frozen=True)
class Transfer:
    """One message of a ring all-reduce: `source` sends chunk `chunk` to `target`."""

    step: int
    phase: str  # "reduce-scatter" (the target adds the chunk) or "all-gather" (it keeps it)
    source: int
    target: int
    chunk: int


def ring_schedule(n: int) -> list[Transfer]:
    """The messages of a ring all-reduce over `n` devices, in order.

    The data is cut into `n` chunks. In each of the n-1 reduce-scatter steps every
    device i sends one chunk to device i+1, which adds it to its own; afterwards
    device i holds the full sum of chunk i+1. In each of the n-1 all-gather steps the
    finished chunks travel on around the ring. Every device sends 2(n-1) chunks of
    size/n: 2(n-1)/n of the data.
    """
    check_int("ring_schedule: n", n)
    transfers = []
    for step in range(n - 1):
        for source in range(n):
            target, chunk = (source + 1) % n, (source - step) % n
            transfers.append(Transfer(step, "reduce-scatter", source, target, chunk))
    for step in range(n - 1):
        for source in range(n):
            target, chunk = (source + 1) % n, (source + 1 - step) % n
            transfers.append(Transfer(step, "all-gather", source, target, chunk))
    return transfers


def ring_all_reduce(tensors: Sequence[tf.Tensor]) -> list[tf.Tensor]:
    """All-reduce (sum) by the ring algorithm; returns the sum on every input's device.

    Follows `ring_schedule`: each message is a `tf.identity` of one chunk placed on the
    target's device, so on real GPUs every device sends and receives the same amount.
    """
    if not tensors:
        raise ValueError("ring_all_reduce: give at least one tensor.")
    shape = tensors[0].shape
    if any(t.shape != shape for t in tensors):
        raise ValueError("ring_all_reduce: all tensors must have the same shape.")
    n = len(tensors)
    devices = [t.device for t in tensors]
    size = int(np.prod(shape)) if shape.rank else 1
    sizes = [len(part) for part in np.array_split(np.arange(size), n)]
    chunks = []
    for device, tensor in zip(devices, tensors):
        with tf.device(device):
            chunks.append(list(tf.split(tf.reshape(tensor, [-1]), sizes)))
    for transfer in ring_schedule(n):
        with tf.device(devices[transfer.target]):
            received = tf.identity(chunks[transfer.source][transfer.chunk])
            if transfer.phase == "reduce-scatter":
                received = chunks[transfer.target][transfer.chunk] + received
            chunks[transfer.target][transfer.chunk] = received
    results = []
    for device, parts in zip(devices, chunks):
        with tf.device(device):
            results.append(tf.reshape(tf.concat(parts, 0), shape))
    return results
