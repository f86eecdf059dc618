"""Comparing two trainings: the proof, in every chapter, that two ways give the same weights."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def max_abs_difference(
    first: Sequence[np.ndarray], second: Sequence[np.ndarray]
) -> float:
    """Largest absolute difference between two lists of arrays, such as two models' weights.

    Introduced in chapter 3 to prove that two trainings match.
    """
    if len(first) != len(second):
        raise ValueError(f"cannot compare {len(first)} arrays with {len(second)}.")
    largest = 0.0
    for a, b in zip(first, second):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape:
            raise ValueError(
                f"cannot compare arrays of shapes {a.shape} and {b.shape}."
            )
        if a.size:
            largest = max(largest, float(np.max(np.abs(a.astype(np.float64) - b))))
    return largest
