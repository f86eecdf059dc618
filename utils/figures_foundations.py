"""Figures of the Foundations part (the quick start, chapter 2): one data-parallel step as
it ran."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt

from utils.figures_common import (
    ARROW,
    BLUE,
    ORANGE,
    box,
    numbers,
)


def draw_data_parallel_step(
    examples: Sequence[Sequence[int]],
    gradients: Sequence[Sequence[float]],
    total: Sequence[float],
    weights: Sequence[Sequence[float]],
):
    """One synchronous data-parallel step as it ran, one column per device; returns the
    figure.

    Drawn in the quick start and chapter 2. `examples[d]` are the batch's example numbers
    device d got, `gradients[d]` its gradient from them, `total` the all-reduced sum every
    device received, and `weights[d]` device d's weights after its update.
    """
    if not len(examples) == len(gradients) == len(weights) >= 1:
        raise ValueError(
            "draw_data_parallel_step: give one entry per device in each list."
        )
    n = len(examples)

    figure, axis = plt.subplots(figsize=(2.3 * n + 1.5, 4.4))
    axis.set(xlim=(0, n), ylim=(0, 4.3))
    axis.axis("off")
    rows = [  # (height, label, the text in each device's box)
        (
            3.7,
            "1. its slice\nof the batch",
            [f"examples {e[0]}-{e[-1]}" for e in examples],
        ),
        (
            2.6,
            "2. forward and\nbackward, alone",
            [f"gradient\n{numbers(g)}" for g in gradients],
        ),
        (0.5, "4. the same\nupdate", [f"weights\n{numbers(w)}" for w in weights]),
    ]
    for height, label, texts in rows:
        axis.text(-0.08, height, label, ha="right", va="center", fontsize=9)
        for device, text in enumerate(texts):
            box(axis, device + 0.5, height, text, BLUE)
    box(
        axis,
        n / 2,
        1.55,
        f"3. all-reduce: every device receives the sum {numbers(total)}",
        ORANGE,
    )
    for device in range(n):
        x = device + 0.5
        for top, bottom in ((3.45, 2.95), (2.2, 1.8), (1.3, 0.9)):
            axis.annotate("", xy=(x, bottom), xytext=(x, top), arrowprops=ARROW)
        axis.text(
            x,
            4.2,
            f"device {device}",
            ha="center",
            va="center",
            fontsize=10,
            weight="bold",
        )
    figure.tight_layout()
    return figure
