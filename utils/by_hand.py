"""Data parallelism written by hand: split a batch, all-reduce gradients, the ring.

Written in chapter 5 (05_data_parallel_by_hand.ipynb), in its cells marked `# @save`: edit
them there, re-run the chapter, then run `python -m tools.save_from_chapters`.
"""

from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from utils.checks import check_int


def split_and_load(data, devices):
    """Split `data` along its first axis into one part per device; copy each part there.

    The first parts get one extra row when the rows do not divide evenly.
    """
    data = tf.convert_to_tensor(data)
    rows = int(data.shape[0])
    if not devices or rows < len(devices):
        raise ValueError(
            f"split_and_load: {rows} rows cannot feed {len(devices)} devices; give at "
            "least one device and a batch at least as large as the number of devices."
        )
    sizes = [len(part) for part in np.array_split(np.arange(rows), len(devices))]
    placed = []
    for device, part in zip(devices, tf.split(data, sizes)):
        with tf.device(device):
            placed.append(tf.identity(part))  # a copy of the part, on its device
    return placed


def all_reduce_sum(tensors):
    """Naive all-reduce: sum on the first tensor's device, copy the sum back."""
    if not tensors:
        raise ValueError("all_reduce_sum: give at least one tensor.")
    with tf.device(tensors[0].device):
        total = tf.add_n([tf.identity(t) for t in tensors])  # everything to device 0
    copies = []
    for tensor in tensors:
        with tf.device(tensor.device):
            copies.append(tf.identity(total))  # the sum back to every device
    return copies


@dataclass(frozen=True)
class Transfer:
    """One message of a ring all-reduce: `source` sends chunk `chunk` to `target`."""

    step: int
    phase: str  # "reduce-scatter" (target adds the chunk) or "all-gather" (keeps it)
    source: int
    target: int
    chunk: int


def ring_schedule(n):
    """The messages of a ring all-reduce over `n` devices, in order."""
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


def ring_all_reduce(tensors):
    """All-reduce (sum) by the ring algorithm: the sum on every input's device."""
    if not tensors:
        raise ValueError("ring_all_reduce: give at least one tensor.")
    shape = tensors[0].shape
    if any(t.shape != shape for t in tensors):
        raise ValueError("ring_all_reduce: all tensors must have the same shape.")
    n, devices = len(tensors), [t.device for t in tensors]
    size = int(np.prod(shape)) if shape.rank else 1
    sizes = [len(part) for part in np.array_split(np.arange(size), n)]
    chunks = []  # chunks[device][chunk], each on its device
    for device, tensor in zip(devices, tensors):
        with tf.device(device):
            chunks.append(list(tf.split(tf.reshape(tensor, [-1]), sizes)))
    for transfer in ring_schedule(n):
        with tf.device(devices[transfer.target]):  # a message: a copy on the target
            received = tf.identity(chunks[transfer.source][transfer.chunk])
            if transfer.phase == "reduce-scatter":
                received = chunks[transfer.target][transfer.chunk] + received
            chunks[transfer.target][transfer.chunk] = received
    results = []
    for device, parts in zip(devices, chunks):
        with tf.device(device):
            results.append(tf.reshape(tf.concat(parts, 0), shape))
    return results
