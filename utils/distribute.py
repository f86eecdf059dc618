"""Inspecting and checking distributed training (chapters 2 and 3)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def all_reduce_method(strategy) -> str:
    """Name the all-reduce a `MirroredStrategy` uses, e.g. "CollectiveAllReduce (RING)".

    Introduced in chapter 2. TensorFlow has no public API for this, so it reads the
    strategy's private attributes; the unit tests catch a release that renames them.
    """
    extended = strategy.extended
    method = type(extended._cross_device_ops).__name__
    if method == "CollectiveAllReduce":
        implementation = extended._communication_options.implementation
        return f"{method} ({implementation.name})"
    return method


def max_abs_difference(first: Sequence[np.ndarray], second: Sequence[np.ndarray]) -> float:
    """Largest absolute difference between two lists of arrays, such as two models' weights.

    Introduced in chapter 3 to prove that two trainings match.
    """
    if len(first) != len(second):
        raise ValueError(f"cannot compare {len(first)} arrays with {len(second)}.")
    largest = 0.0
    for a, b in zip(first, second):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape:
            raise ValueError(f"cannot compare arrays of shapes {a.shape} and {b.shape}.")
        if a.size:
            largest = max(largest, float(np.max(np.abs(a.astype(np.float64) - b))))
    return largest
